"""``changes``: everything new beyond a cursor, waiting only when nothing is."""

from __future__ import annotations

import threading
import time

import pytest

from messages.demand import SupplyHost, SupplySnapshot
from persistence.port import Changes, Controller, Cursor
from tests.persistence.contract.conftest import MakeController
from tests.support.controllers import demand, usage

#: Long enough that returning "at once" and "after the timeout" cannot be confused.
LONG = 5.0
SHORT = 0.05


def test_returns_new_facts_demand_and_host_events(controller: Controller) -> None:
    facts = controller.append([usage(1), usage(2)]).accepted
    controller.put_demand(demand(1))
    latest = controller.put_demand(demand(2))
    event = controller.post_host_event("h1", "joined", 1.0)
    started = time.monotonic()
    got = controller.changes(Cursor(), timeout=LONG)
    assert time.monotonic() - started < LONG
    assert got.facts == facts
    assert got.demand == latest
    assert got.host_events == [event]
    assert got.cursor == Cursor(facts=facts[-1].seq, demand=latest.seq, host_events=event.seq)


def test_times_out_empty_with_the_same_cursor(controller: Controller) -> None:
    controller.append([usage(1)])
    controller.put_demand(demand(1))
    controller.post_host_event("h1", "idle", 1.0)
    cursor = controller.changes(Cursor(), timeout=0).cursor
    started = time.monotonic()
    got = controller.changes(cursor, timeout=SHORT)
    assert time.monotonic() - started >= SHORT
    assert got == Changes(cursor=cursor)


def test_only_what_is_new_beyond_each_part_of_the_cursor(controller: Controller) -> None:
    old = controller.append([usage(1)]).accepted
    snapshot = controller.put_demand(demand(1))
    cursor = controller.changes(Cursor(), timeout=0).cursor
    new = controller.append([usage(2)]).accepted
    got = controller.changes(cursor, timeout=LONG)
    assert got.facts == new and old[0] not in got.facts
    assert got.demand is None, "demand unchanged since the cursor"
    assert got.host_events == []
    assert got.cursor == cursor.model_copy(update={"facts": new[0].seq})
    assert got.cursor.demand == snapshot.seq


def test_a_new_demand_alone_wakes_it(controller: Controller) -> None:
    controller.put_demand(demand(1))
    cursor = controller.changes(Cursor(), timeout=0).cursor
    newer = controller.put_demand(demand(7))
    got = controller.changes(cursor, timeout=LONG)
    assert got.demand == newer and got.facts == [] and got.cursor.demand == newer.seq


def test_facts_come_at_most_ten_thousand_per_call(controller: Controller) -> None:
    controller.append([usage(i) for i in range(10_005)])
    first = controller.changes(Cursor(), timeout=0)
    assert len(first.facts) == 10_000
    rest = controller.changes(first.cursor, timeout=0)
    assert len(rest.facts) == 5
    assert rest.facts[0].seq > first.facts[-1].seq


@pytest.mark.parametrize("writer_handle", ["same", "other"])
def test_wakes_when_another_thread_writes_while_it_waits(
    make_controller: MakeController, writer_handle: str
) -> None:
    reader = make_controller()
    writer = reader if writer_handle == "same" else make_controller()
    cursor = reader.changes(Cursor(), timeout=0).cursor
    results: list[Changes] = []
    waiter = threading.Thread(target=lambda: results.append(reader.changes(cursor, timeout=LONG)))
    waiter.start()
    time.sleep(SHORT)  # let the reader start waiting: this is the path under test
    written = writer.append([usage(1)]).accepted
    waiter.join(LONG + 1)
    assert not waiter.is_alive()
    [got] = results
    assert got.facts == written


def test_a_new_supply_view_wakes_it_and_only_the_latest_comes(controller: Controller) -> None:
    start = controller.changes(Cursor(), timeout=0)
    controller.put_supply(SupplySnapshot(hosts=[SupplyHost(name="a", state="idle")]))
    latest = controller.put_supply(SupplySnapshot(hosts=[SupplyHost(name="a", state="busy")]))
    got = controller.changes(start.cursor, timeout=2.0)
    assert got.supply == latest and got.cursor.supply == latest.seq
    assert controller.changes(got.cursor, timeout=0).supply is None, "nothing new beyond the cursor"
