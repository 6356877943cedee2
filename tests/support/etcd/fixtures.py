"""Fixtures for the etcd backend's own tests and drills: real members, killed at teardown."""

from __future__ import annotations

import uuid
from typing import Callable, Iterator

import pytest

from tests.support.etcd.cluster import Cluster


@pytest.fixture(scope="session")
def etcd_cluster() -> Iterator[Cluster]:
    """One member shared by the tests that do not stop it; each test takes a namespace of its own."""
    cluster = Cluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd_url(etcd_cluster: Cluster) -> str:
    return etcd_cluster.url(f"t-{uuid.uuid4().hex}")


@pytest.fixture
def own_cluster() -> Iterator[Callable[..., Cluster]]:
    """Members of a test's own, for tests that kill or restart them."""
    started: list[Cluster] = []

    def start(size: int = 1) -> Cluster:
        cluster = Cluster(size=size)
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.stop()
