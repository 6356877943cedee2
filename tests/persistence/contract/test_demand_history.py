"""Past demand: every backend keeps the snapshots whose items changed, for DEMAND_HISTORY, oldest first."""

from __future__ import annotations

from persistence.port import DEMAND_HISTORY, Controller
from tests.persistence.contract.conftest import MakeController
from tests.support.controllers import FakeClock, demand


def test_history_keeps_each_change_once_with_its_seq_and_time(controller: Controller, clock: FakeClock) -> None:
    t0 = clock.now
    first = controller.put_demand(demand(1))
    clock.advance(60)
    controller.put_demand(demand(1))  # the same items again: not kept twice
    clock.advance(60)
    third = controller.put_demand(demand(4))
    kept = controller.demand_history(since=t0)
    assert [(s.seq, s.time, s.items) for s in kept] == [(first.seq, t0, first.items),
                                                        (third.seq, t0 + 120, third.items)]
    assert [s.seq for s in controller.demand_history(since=t0 + 1)] == [third.seq]
    assert [s.seq for s in controller.demand_history(since=t0, until=t0 + 60)] == [first.seq]


def test_history_older_than_the_retention_goes(controller: Controller, clock: FakeClock) -> None:
    controller.put_demand(demand(1))
    clock.advance(DEMAND_HISTORY + 1)
    last = controller.put_demand(demand(2))
    assert [s.seq for s in controller.demand_history(since=0)] == [last.seq]


def test_history_is_shared_by_every_handle(make_controller: MakeController, clock: FakeClock) -> None:
    a, b = make_controller(), make_controller()
    one = a.put_demand(demand(1))
    clock.advance(1)
    two = b.put_demand(demand(2))
    assert [s.seq for s in a.demand_history(since=0)] == [one.seq, two.seq]
