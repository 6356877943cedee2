"""Fixtures of the EC2 provider tests: one moto server for the session, a world per test."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.ec2.faults import FaultProxy
from tests.support.ec2.world import Moto, World, start_moto


@pytest.fixture(scope="session")
def moto() -> Iterator[Moto]:
    m = start_moto()
    yield m
    m.server.stop()


@pytest.fixture
def world(moto: Moto, tmp_path) -> Iterator[World]:
    """A fresh cluster, behind a proxy that adds no fault until told to."""
    proxy = FaultProxy(moto.url).start()
    yield World(moto=moto, folder=tmp_path, proxy=proxy)
    proxy.stop()


@pytest.fixture
def lagging(moto: Moto, tmp_path) -> Iterator[World]:
    """A fresh cluster behind a proxy that holds pending and shutting-down, as AWS does, until the test lets go
    (``proxy.pending_s = 0``): a fixed lag could be over before a loaded machine starts the script."""
    proxy = FaultProxy(moto.url, pending_s=3600.0, shutting_down_s=3600.0).start()
    yield World(moto=moto, folder=tmp_path, proxy=proxy)
    proxy.stop()
