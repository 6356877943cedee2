"""The daemon says its version: in ``/healthz`` and as ``provisioner_build_info``."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.slow


def test_healthz_and_metrics_carry_the_installed_version(start_api):
    api = start_api()
    assert api.ok("GET", "/healthz", None) == {"status": "ok", "version": version("provisioner")}
    samples = [s for family in text_string_to_metric_families(api.get("/metrics").text) for s in family.samples
               if s.name == "provisioner_build_info"]
    assert [(s.labels, s.value) for s in samples] == [({"version": version("provisioner")}, 1.0)]
