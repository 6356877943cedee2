"""Demand snapshots, host events and shared-resource totals."""

from __future__ import annotations

from messages.demand import SupplyHost, SupplySnapshot
from persistence.port import Controller, ResourceTotal
from tests.persistence.contract.conftest import MakeController
from tests.support.controllers import FakeClock, demand


def test_no_demand_before_the_first_put(controller: Controller) -> None:
    assert controller.get_demand() is None


def test_demand_gets_growing_controller_seq_and_time_and_replaces(
    controller: Controller, clock: FakeClock
) -> None:
    first = controller.put_demand(demand(3).model_copy(update={"seq": 900}))
    assert first.seq != 900, "the caller's seq is not the controller's"
    assert first.time == clock.now
    assert first.items == demand(3).items
    assert controller.get_demand() == first
    clock.advance(1)
    second = controller.put_demand(demand(5))
    assert second.seq > first.seq
    assert second.time == clock.now
    assert controller.get_demand() == second


def test_demand_seq_grows_even_when_the_caller_sends_lower(controller: Controller) -> None:
    seqs = [controller.put_demand(demand(n).model_copy(update={"seq": 10 - n})).seq for n in range(5)]
    assert seqs == sorted(set(seqs))


def test_empty_demand_replaces_too(controller: Controller) -> None:
    controller.put_demand(demand(2))
    empty = controller.put_demand(demand(0).model_copy(update={"items": []}))
    assert controller.get_demand() == empty and empty.items == []


def test_host_events_in_order_with_seq(controller: Controller) -> None:
    posted = [
        controller.post_host_event("h1", "joined", 10.0),
        controller.post_host_event("h2", "joined", 11.0),
        controller.post_host_event("h1", "idle", 12.0),
    ]
    seqs = [e.seq for e in posted]
    assert all(isinstance(s, int) for s in seqs) and seqs == sorted(set(seqs))
    assert controller.read_host_events() == posted
    assert [(e.name, e.event, e.time) for e in posted] == [
        ("h1", "joined", 10.0),
        ("h2", "joined", 11.0),
        ("h1", "idle", 12.0),
    ]
    assert controller.read_host_events(after=posted[0].seq) == posted[1:]
    assert controller.read_host_events(after=posted[0].seq, limit=1) == posted[1:2]


def test_resource_totals_upsert_by_name_listed_sorted(controller: Controller) -> None:
    assert controller.resource_totals() == []
    vcs = ResourceTotal(name="vcs", base=20, borrowed=0, total=20, time=1.0)
    calibre = ResourceTotal(name="calibre", base=5, borrowed=1, total=6, time=1.0)
    controller.set_resource_total(vcs)
    controller.set_resource_total(calibre)
    assert controller.resource_totals() == [calibre, vcs]
    grown = ResourceTotal(name="vcs", base=20, borrowed=5, total=25, time=2.0)
    controller.set_resource_total(grown)
    assert controller.resource_totals() == [calibre, grown]


def test_second_handle_sees_inputs_of_the_first(make_controller: MakeController) -> None:
    first, second = make_controller(), make_controller()
    snapshot = first.put_demand(demand(4))
    event = first.post_host_event("h1", "busy", 1.0)
    first.set_resource_total(ResourceTotal(name="vcs", base=1, borrowed=2, total=3, time=1.0))
    assert second.get_demand() == snapshot
    assert second.read_host_events() == [event]
    assert second.resource_totals() == first.resource_totals()
    assert second.put_demand(demand(1)).seq > snapshot.seq


def test_a_host_event_keeps_the_provider_it_names(controller: Controller) -> None:
    named = controller.post_host_event("node-1", "idle", 1.0, provider="aws-east")
    plain = controller.post_host_event("node-1", "busy", 2.0)
    assert [(e.name, e.provider) for e in controller.read_host_events()] == [("node-1", "aws-east"), ("node-1", None)]
    assert (named.provider, plain.provider) == ("aws-east", None)


def test_the_supply_view_gets_a_growing_seq_and_replaces_the_last(controller: Controller, clock: FakeClock) -> None:
    assert controller.get_supply() is None
    first = controller.put_supply(SupplySnapshot(hosts=[SupplyHost(name="a", state="idle"),
                                                        SupplyHost(name="b", provider="p", state="busy")]))
    assert first.time == clock.now and controller.get_supply() == first
    clock.advance(1)
    second = controller.put_supply(SupplySnapshot(hosts=[]))
    assert second.seq > first.seq and controller.get_supply() == second and second.hosts == []
