"""The first policy as pure functions: time and state are arguments."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.description import Pool, ProviderDescription, Template
from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, Order, RequestChanged, RequestPlanned, make_fact
from messages.records import ProviderRecord
from policy.granularity import size
from policy.planning import PlanSettings, plan
from policy.reclaim import reclaim
from policy.supply import SupplyView, in_flight
from state.projection import Projection

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def hosts(name, priority=0, price=1.0, max_number=10, ncpus=8, **kw):
    return ProviderRecord(name=name, owner="a", description=ProviderDescription(
        name=name, kind="hosts", priority=priority, cost_per_hour=price,
        templates=[Template(id=f"{name}-t", max_number=max_number, attributes={"ncpus": ncpus, "type": "X86_64"})],
        **kw))


def units(name, capacity=10, **kw):
    return ProviderRecord(name=name, owner="a", description=ProviderDescription(
        name=name, kind="units", pools=[Pool(resource="vcs", capacity=capacity)], **kw))


def view(p: Projection) -> SupplyView:
    return SupplyView(orders=p.orders, requests=p.requests, instances=p.instances, grants=p.grants)


def demand(*items):
    return DemandSnapshot(seq=1, items=list(items))


def feed(p: Projection, provider: str, *payloads, now=0.0, ids=None):
    for i, payload in enumerate(payloads):
        p.apply(make_fact(payload, provider=provider, now=now, fact_id=ids[i] if ids else None)
                .model_copy(update={"seq": p.seq + 1}))


@given(need=st.integers(0, 500), room=st.integers(0, 500), min_request=st.integers(1, 50), step=st.integers(1, 20))
def test_size_respects_granularity_and_room(need, room, min_request, step):
    got = size(need, room, min_request, step)
    assert 0 <= got <= room
    if got:
        assert got >= min_request and (got - min_request) % step == 0
    if need > 0 and room >= max(need, min_request) + step:
        assert got >= need, "when it fits, the whole need is ordered"
    if need <= 0:
        assert got == 0


def test_priority_beats_cost_and_cheaper_wins_among_equals():
    providers = {"dear": hosts("dear", priority=10, price=5.0), "cheap": hosts("cheap", priority=1, price=0.1),
                 "cheap2": hosts("cheap2", priority=10, price=1.0)}
    out = plan(demand(HostItem(id="d", count=3, select={"ncpus": ">=8"})), providers, view(Projection()), 0, SETTINGS)
    assert [(p, o.count) for p, o in out.orders] == [("cheap2", 3)]


def test_spill_over_when_capacity_runs_out_and_granularity():
    providers = {"a": hosts("a", priority=10, max_number=4), "b": hosts("b", priority=5, min_request=2, step=2)}
    out = plan(demand(HostItem(id="d", count=7)), providers, view(Projection()), 0, SETTINGS)
    assert [(p, o.count) for p, o in out.orders] == [("a", 4), ("b", 4)]
    assert out.decisions[0].need == 7 and [c.count for c in out.decisions[0].chosen] == [4, 4]


def test_rejections_name_their_reason():
    paused = hosts("paused", priority=9)
    paused.status = "paused"
    orphan = hosts("orphan", priority=9)
    orphan.owner = ""
    small = hosts("small", ncpus=2)
    out = plan(demand(HostItem(id="d", count=1, select={"ncpus": ">=8"})),
               {"paused": paused, "orphan": orphan, "small": small}, view(Projection()), 0, SETTINGS)
    reasons = {r.provider: r.reason for r in out.decisions[0].rejected}
    assert reasons["paused"] == "paused" and reasons["small"] == "ncpus 2 < 8" and "no owner" in reasons["orphan"]
    assert out.orders == [] and "1 could not be placed" in out.decisions[0].note


def test_in_flight_counts_orders_unseen_machines_arrivals_and_recent_joins():
    p = Projection()
    feed(p, "a", Order(action="request", supply="hosts", item_id="d", template="a-t", count=2), ids=["o1"])
    feed(p, "a", Order(action="request", supply="hosts", item_id="d", template="a-t", count=3), ids=["o2"])
    feed(p, "a", RequestPlanned(action="request", supply="hosts", order_id="o2", item_id="d", template="a-t",
                                count=3), ids=["o2.1"], now=1)
    feed(p, "a", InstanceSeen(machine_id="m1", name="n1", request_id="o2.1", state="running"), now=2)
    feed(p, "a", InstanceSeen(machine_id="m2", name="n2", request_id="o2.1", state="running"), now=2)
    feed(p, "a", InstanceChanged(kind="instance_joined", machine_id="m2", state="joined"), now=10)
    # o1 pending (2) + o2.1: one unseen (1) + m1 arriving (1) + m2 joined 5 s ago (1)
    assert in_flight(view(p), now=15, join_grace=30, order_timeout=600) == {"d": 5}
    # After the grace period the joined host is the scheduler's, and a stale order no longer counts.
    assert in_flight(view(p), now=700, join_grace=30, order_timeout=600) == {"d": 2}


def test_no_order_when_in_flight_covers_and_same_inputs_same_orders():
    p = Projection()
    feed(p, "a", Order(action="request", supply="hosts", item_id="d", template="a-t", count=4), ids=["o1"])
    providers = {"a": hosts("a")}
    out = plan(demand(HostItem(id="d", count=4)), providers, view(p), 1, SETTINGS)
    assert out.orders == [] and out.decisions[0].note == "in-flight supply covers the need"
    more = demand(HostItem(id="d", count=6))
    assert plan(more, providers, view(p), 1, SETTINGS) == plan(more, providers, view(p), 1, SETTINGS)
    assert [o.count for _, o in plan(more, providers, view(p), 1, SETTINGS).orders] == [2]


def test_failed_provider_cools_down_and_the_next_takes_over():
    p = Projection()
    feed(p, "a", Order(action="request", supply="hosts", item_id="d", template="a-t", count=2), ids=["o1"])
    feed(p, "a", RequestPlanned(action="request", supply="hosts", order_id="o1", item_id="d", template="a-t",
                                count=2), ids=["o1.1"])
    feed(p, "a", RequestChanged(kind="request_failed", request_id="o1.1", state="failed", outcome="capacity"),
         now=100)
    providers = {"a": hosts("a", priority=10), "b": hosts("b", priority=1)}
    out = plan(demand(HostItem(id="d", count=2)), providers, view(p), 110, SETTINGS)
    assert [(prov, o.count) for prov, o in out.orders] == [("b", 2)]
    out = plan(demand(HostItem(id="d", count=2)), providers, view(p), 100 + 61, SETTINGS)
    assert [prov for prov, _ in out.orders] == ["a"], "after the cooldown the preferred provider is used again"


def _idle_host(p, provider="a", launched=0.0, idle_at=10.0):
    feed(p, provider, RequestPlanned(action="request", supply="hosts", template=f"{provider}-t", count=1),
         ids=["r1"])
    feed(p, provider, InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running",
                                   launched_at=launched, template=f"{provider}-t"))
    feed(p, provider, InstanceChanged(kind="instance_joined", machine_id="m1", state="joined"), now=5)
    feed(p, provider, InstanceChanged(kind="instance_idle", machine_id="m1", state="idle"), now=idle_at)


def test_idle_host_returned_after_idle_time_and_min_hold_only():
    p = Projection()
    _idle_host(p)
    providers = {"a": hosts("a", min_hold_s=100)}
    assert reclaim(None, providers, {}, view(p), now=50, idle_time=30) == [], "before min hold"
    assert reclaim(None, providers, {}, view(p), now=101, idle_time=100) == [], "before idle time"
    out = reclaim(None, providers, {}, view(p), now=111, idle_time=100)
    assert [(prov, o.action, o.machines) for prov, o in out] == [("a", "return", ["m1"])]
    still_wanted = demand(HostItem(id="d", count=1, select={"ncpus": ">=8"}))
    assert reclaim(still_wanted, providers, {}, view(p), now=111, idle_time=100) == []


def test_units_in_use_are_never_returned():
    p = Projection()
    feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=3), ids=["g1"])
    feed(p, "u", GrantChanged(kind="grant_granted", grant_id="g1", resource="vcs", state="granted", count=3), now=0)
    res = p.resource("vcs")
    res.base, res.borrowed, res.total, res.in_use = 10, 3, 13, 13
    providers = {"u": units("u")}
    assert reclaim(None, providers, p.resources, view(p), now=1000, idle_time=60) == []
    res.in_use = 12
    out = reclaim(None, providers, p.resources, view(p), now=1000, idle_time=60)
    assert [(o.grants, o.count) for _, o in out] == [(["g1"], 1)], "only the unit above use goes back"
    res.in_use = 10
    out = reclaim(None, providers, p.resources, view(p), now=1000, idle_time=60)
    assert [(o.grants, o.count) for _, o in out] == [(["g1"], 3)]
    assert reclaim(demand(UnitItem(id="x", resource="vcs", count=1)), providers, p.resources, view(p),
                   now=1000, idle_time=60) == []
