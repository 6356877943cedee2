"""TLS to etcd: server verified against a CA, the daemon authenticated by its client certificate."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from messages.errors import ControllerUnavailable
from persistence.controller import open_controller
from persistence.port import Cursor
from tests.support.controllers import usage
from tests.support.etcd import certs
from tests.support.etcd.cluster import Cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def tls_cluster(tmp_path: Path):
    if certs.OPENSSL is None:
        pytest.skip("openssl is not installed: cannot make test certificates")
    folder = certs.make(tmp_path / "pki")
    cluster = Cluster(tls=folder).start()
    yield cluster, folder
    cluster.stop()


def test_mutual_tls_carries_every_call_and_the_watch(tls_cluster) -> None:
    cluster, pki = tls_cluster
    url = f"{cluster.url('tls')}?ca={pki / 'ca.pem'}&cert={pki / 'client.pem'}&key={pki / 'client.key'}"
    reader, writer = open_controller(url), open_controller(url)
    try:
        lease = writer.leases.acquire("provider:x", "a", ttl=10)
        assert lease is not None
        cursor = reader.changes(Cursor(), timeout=0).cursor
        results = []
        waiter = threading.Thread(target=lambda: results.append(reader.changes(cursor, timeout=20)))
        waiter.start()
        written = writer.append([usage(1, lease=lease)]).accepted
        waiter.join(25)
        assert results and results[0].facts == written
        assert reader.location.startswith("etcds://")
    finally:
        reader.close()
        writer.close()


def test_without_a_client_certificate_or_the_ca_the_cluster_is_unreachable(tls_cluster) -> None:
    cluster, pki = tls_cluster
    for query in (f"?ca={pki / 'ca.pem'}", ""):
        c = open_controller(cluster.url("tls") + (query + "&" if query else "?") + "timeout=1")
        try:
            with pytest.raises(ControllerUnavailable, match="unreachable"):
                c.last_seq()
        finally:
            c.close()
