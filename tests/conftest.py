"""Fixtures every folder of tests may use; their code lives in ``tests/support``."""

from __future__ import annotations

from tests.support.api import start_api  # noqa: F401
from tests.support.daemons import start_daemon  # noqa: F401
from tests.support.etcd.fixtures import etcd_cluster, etcd_url, own_cluster  # noqa: F401
from tests.support.inprocess import inprocess  # noqa: F401
from tests.support.prometheus import prometheus  # noqa: F401
