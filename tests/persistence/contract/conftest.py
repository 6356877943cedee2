"""Fixtures that run the contract suite against every controller backend.

A new backend is added by appending one ``Backend`` to ``BACKENDS``; the tests
do not change. Each backend gets a fresh controller per test, and every handle
made by ``make_controller`` shares the test's fake clock, so lease expiry is
driven by ``clock.advance`` rather than by waiting.

The etcd backend runs against one real etcd member for the whole session,
each test in a namespace of its own. Its lease records expire by the
injected clock, as the port says ("expiry is judged by the controller's
clock"); the etcd lease behind them runs on real time, which a test never
waits out, so the fake clock alone decides every expiry the tests look at.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from persistence.controller import open_controller
from persistence.port import Controller
from tests.support.controllers import FakeClock


@dataclass(frozen=True)
class Backend:
    name: str
    #: The URL of a fresh, empty controller for one test (fixtures come from the request).
    url: Callable[[pytest.FixtureRequest, Path], str]


BACKENDS = [
    Backend("sqlite", lambda request, tmp: f"sqlite://{tmp / 'controller' / 'state.db'}"),
    Backend("etcd", lambda request, tmp: request.getfixturevalue("etcd_cluster").url(f"t-{uuid.uuid4().hex}")),
]

MakeController = Callable[[], Controller]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def controller_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.param.url(request, tmp_path)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_controller(controller_url: str, clock: FakeClock) -> Iterator[MakeController]:
    """Opens another handle on the same controller, as another process would."""
    opened: list[Controller] = []

    def make() -> Controller:
        controller = open_controller(controller_url, clock=clock)
        opened.append(controller)
        return controller

    yield make
    for controller in opened:
        controller.close()


@pytest.fixture
def controller(make_controller: MakeController) -> Controller:
    return make_controller()
