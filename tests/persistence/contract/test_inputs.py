"""Demand snapshots, host events and shared-resource totals."""

from __future__ import annotations

from messages.demand import SupplyHost, SupplySnapshot
from messages.facts import ResourceTotalChanged, make_fact
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


def _total(name: str, base: int, borrowed: int, lease, now: float):
    return make_fact(ResourceTotalChanged(resource=name, base=base, borrowed=borrowed, total=base + borrowed),
                     provider="lic", lease=lease.name, fence=lease.fence, now=now)


def test_a_total_is_published_by_the_fenced_fact_that_says_it(controller: Controller, clock: FakeClock) -> None:
    assert controller.resource_totals() == []
    lease = controller.leases.acquire("provider:lic", "a", ttl=10)
    controller.append([_total("vcs", 20, 0, lease, 1.0), _total("calibre", 5, 1, lease, 1.0)])
    assert controller.resource_totals() == [ResourceTotal(name="calibre", base=5, borrowed=1, total=6, time=1.0),
                                            ResourceTotal(name="vcs", base=20, borrowed=0, total=20, time=1.0)]
    controller.append([_total("vcs", 20, 5, lease, 2.0)])
    assert [t.total for t in controller.resource_totals()] == [6, 25]


def test_a_total_written_under_a_lost_lease_is_refused_and_changes_nothing(controller: Controller,
                                                                           clock: FakeClock) -> None:
    """A daemon that lost the lease must not change what the scheduler reads (it could, before)."""
    old = controller.leases.acquire("provider:lic", "a", ttl=10)
    controller.append([_total("vcs", 20, 5, old, 1.0)])
    clock.advance(11)
    new = controller.leases.acquire("provider:lic", "b", ttl=10)
    result = controller.append([_total("vcs", 20, 9, old, clock.now)])
    assert result.refused and not result.accepted
    assert [t.total for t in controller.resource_totals()] == [25]
    controller.append([_total("vcs", 20, 2, new, clock.now)])
    assert [t.total for t in controller.resource_totals()] == [22]


def test_second_handle_sees_inputs_of_the_first(make_controller: MakeController) -> None:
    first, second = make_controller(), make_controller()
    snapshot = first.put_demand(demand(4))
    event = first.post_host_event("h1", "busy", 1.0)
    first.append([make_fact(ResourceTotalChanged(resource="vcs", base=1, borrowed=2, total=3), provider="lic")])
    assert second.get_demand() == snapshot
    assert second.read_host_events() == [event]
    assert second.resource_totals() == first.resource_totals() and second.resource_totals()[0].total == 3
    assert second.put_demand(demand(1)).seq > snapshot.seq


def test_a_host_event_keeps_the_provider_it_names(controller: Controller) -> None:
    named = controller.post_host_event("node-1", "idle", 1.0, provider="aws-east")
    plain = controller.post_host_event("node-1", "busy", 2.0)
    assert [(e.name, e.provider) for e in controller.read_host_events()] == [("node-1", "aws-east"), ("node-1", None)]
    assert (named.provider, plain.provider) == ("aws-east", None)


def test_the_supply_view_gets_a_growing_seq_and_replaces_the_last(controller: Controller, clock: FakeClock) -> None:
    assert controller.get_supply() is None
    first = controller.put_supply(SupplySnapshot(hosts=[SupplyHost(name="a", state="idle"),
                                                        SupplyHost(name="b", provider="p", state="busy")],
                                                 resources={"vcs": 7}))
    assert first.time == clock.now and controller.get_supply() == first and first.resources == {"vcs": 7}
    clock.advance(1)
    second = controller.put_supply(SupplySnapshot(hosts=[]))
    assert second.seq > first.seq and controller.get_supply() == second and second.hosts == []
