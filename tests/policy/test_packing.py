"""Packing bundles into new hosts: cheapest fit, select, exclusive, room, granularity, in-flight bundles."""

from __future__ import annotations

from messages.demand import BundleItem, HostItem
from messages.description import Template
from messages.facts import InstanceChanged, InstanceSeen, Order, RequestPlanned
from policy.budget import BudgetLimits, Headroom, Usage, review
from policy.catalog import Offer
from policy.limits import ProviderLimits
from policy.packing import OfferRoom, Wish, drop_hosts, pack
from policy.planning import PlanSettings, plan
from policy.rounds import CUT, dry_run, with_cuts
from state.projection import Projection
from tests.support.policy import T0, demand, feed, hosts, view


def offer(key: str, ncpus: float, mem: float, price: float, max_number: int = 1000, priority: int = 0,
          provider: str = "p", capacity: int | None = None, min_request: int = 1, step: int = 1,
          **attributes) -> Offer:
    return Offer(provider=provider, key=key, priority=priority, price=price, lead_time=0.0, max_number=max_number,
                 capacity=capacity, min_request=min_request, step=step, min_hold=0.0,
                 attributes={"ncpus": ncpus, "mem": mem, **attributes})


#: Per bundle of 2 CPUs and 8 GiB: small 0.10, medium 0.095, large 0.10 an hour.
SMALL, MEDIUM, LARGE = offer("small", 2, 8, 0.10), offer("medium", 8, 32, 0.38), offer("large", 32, 128, 1.60)
SIZES = [SMALL, MEDIUM, LARGE]


def shape(packing):
    return [(p.offer.key, p.count, [(ld.hosts, ld.bundles) for ld in p.loads]) for p in packing.orders]


def family(name: str, *sizes: tuple[str, float, float, float], **kw) -> dict:
    """A hosts provider whose templates are (id, ncpus, mem, price), all x86 unless ``type`` says."""
    kind = kw.pop("type", "X86_64")
    templates = [Template(id=t, max_number=kw.pop("max_number", 100), cost_per_hour=price,
                          attributes={"ncpus": ncpus, "mem": mem, "type": kind}) for t, ncpus, mem, price in sizes]
    return {name: hosts(name, templates=templates, **kw)}


def test_bundles_of_one_shape_fill_the_cheapest_host_per_bundle():
    out = pack([Wish("j1", 400, {"ncpus": 2, "mem": 8}, SIZES)])
    assert shape(out) == [("medium", 100, [(100, {"j1": 4})])]
    assert out.unplaced == [] and out.cost_per_hour == 38.0


def test_the_last_partly_filled_hosts_are_the_smallest_that_hold_them():
    out = pack([Wish("j1", 402, {"ncpus": 2, "mem": 8}, SIZES)])
    assert sorted(shape(out)) == [("medium", 100, [(100, {"j1": 4})]), ("small", 2, [(2, {"j1": 1})])]


def test_a_bundle_no_template_holds_is_unplaced_with_its_needs():
    out = pack([Wish("big", 3, {"ncpus": 64, "mem": 8}, SIZES), Wish("j1", 4, {"ncpus": 2, "mem": 8}, SIZES)])
    assert shape(out) == [("medium", 1, [(1, {"j1": 4})])]
    [u] = out.unplaced
    assert (u.item, u.count) == ("big", 3) and u.reason.startswith("too small") and "ncpus 64" in u.reason
    assert out.rejected["big"] == [("p", "too small: no template holds one bundle")]


def test_fractional_needs_fill_a_host_exactly():
    out = pack([Wish("j1", 10, {"ncpus": 0.1}, [offer("one", 1, 4, 0.05), offer("two", 2, 8, 0.09)])])
    assert shape(out) == [("one", 1, [(1, {"j1": 10})])], "ten tenths of a CPU fit on one CPU"


def test_bundles_of_different_items_share_hosts_unless_one_is_exclusive():
    cpu = {"ncpus": 3, "mem": 4}
    mem = {"ncpus": 1, "mem": 12}
    shared = pack([Wish("a", 2, cpu, SIZES), Wish("b", 2, mem, SIZES)])
    assert shape(shared) == [("medium", 1, [(1, {"a": 2, "b": 2})])], "8 CPUs and 32 GiB: one medium host, full"
    alone = pack([Wish("a", 2, cpu, SIZES), Wish("b", 2, mem, SIZES, exclusive=True)])
    for p in alone.orders:
        for ld in p.loads:
            assert set(ld.bundles) in ({"a"}, {"b"})
    assert alone.cost_per_hour > shared.cost_per_hour and not alone.unplaced


def test_select_keeps_bundles_off_templates_it_does_not_match():
    provs = {**family("arm", ("a.8x", 8, 32, 0.20), type="ARM64"), **family("x86", ("x.8x", 8, 32, 0.38))}
    snap = demand(BundleItem(id="j1", count=8, resources={"ncpus": 2, "mem": 8}, select={"type": "X86_64"}),
                  BundleItem(id="j2", count=8, resources={"ncpus": 2, "mem": 8}))
    out = plan(snap, provs, view(Projection()), T0, PlanSettings())
    carried = {(p, o.template): o.bundles for p, o in out.orders}
    assert carried == {("x86", "x.8x"): {"j1": 8}, ("arm", "a.8x"): {"j2": 8}}
    assert [(r.provider, r.reason) for r in out.decisions[0].rejected] == [("arm", "type ARM64 != X86_64")]
    assert all(o.item_id == "" and o.supply == "hosts" for _, o in out.orders)


def test_max_number_and_capacity_clamp_and_the_rest_spills_to_dearer_hosts():
    cheap = offer("medium", 8, 32, 0.38, max_number=10)
    out = pack([Wish("j1", 100, {"ncpus": 2, "mem": 8}, [cheap, SMALL])])
    assert sorted(shape(out)) == [("medium", 10, [(10, {"j1": 4})]), ("small", 60, [(60, {"j1": 1})])]
    capped = [offer("medium", 8, 32, 0.38, capacity=4), offer("small", 2, 8, 0.10, capacity=4)]
    out = pack([Wish("j1", 100, {"ncpus": 2, "mem": 8}, capped)])
    assert sum(p.count for p in out.orders) == 4, "the provider's capacity holds across its templates"
    [u] = out.unplaced
    assert u.count == 100 - out.placed("j1") and u.reason.startswith("no room: p ")


def test_hosts_already_held_use_up_the_room():
    cheap = offer("medium", 8, 32, 0.38, max_number=10)
    out = pack([Wish("j1", 8, {"ncpus": 2, "mem": 8}, [cheap])], OfferRoom({("p", "medium"): 9}))
    assert shape(out) == [("medium", 1, [(1, {"j1": 4})])]
    assert out.unplaced[0].count == 4 and out.unplaced[0].reason == "no room: p medium: capacity: room for 0"


def test_granularity_rounds_up_with_empty_hosts_or_moves_the_bundles():
    stepped = offer("medium", 8, 32, 0.38, min_request=2, step=2)
    out = pack([Wish("j1", 12, {"ncpus": 2, "mem": 8}, [stepped])])
    assert shape(out) == [("medium", 4, [(3, {"j1": 4})])], "3 hosts' worth, ordered as 4: one carries nothing"
    tight = offer("medium", 8, 32, 0.38, min_request=2, step=2, max_number=3)
    out = pack([Wish("j1", 12, {"ncpus": 2, "mem": 8}, [tight, SMALL])])
    assert sorted(shape(out)) == [("medium", 2, [(2, {"j1": 4})]), ("small", 4, [(4, {"j1": 1})])]


def test_granularity_at_a_lower_priority_drops_its_own_hosts_not_a_higher_items():
    # Found by the packing properties: "stepped" takes 1, 3 or 5 hosts. "high" fills 5 of them; "low" tops up
    # their spare space and wants a sixth, which the step cannot give. The host dropped must be low's own,
    # which then goes to "spare"; dropping one of high's hosts left high's bundles unplaced for good.
    stepped = offer("stepped", 8, 32, 0.0, max_number=6, step=2, provider="a")
    spare = offer("spare", 4, 16, 0.0, max_number=1, provider="b")
    out = pack([Wish("high", 9, {"ncpus": 4}, [stepped, spare], priority=1),
                Wish("low", 18, {"ncpus": 0.25}, [stepped, spare])])
    assert out.unplaced == [], [(u.item, u.count, u.reason) for u in out.unplaced]
    assert out.placed("high") == 9 and out.placed("low") == 18
    assert {p.offer.key: p.count for p in out.orders} == {"stepped": 5, "spare": 1}


def test_priority_first_then_cost():
    dear = offer("dear", 8, 32, 0.80, priority=5, max_number=2)
    out = pack([Wish("j1", 12, {"ncpus": 2, "mem": 8}, [MEDIUM, dear])])
    assert sorted(shape(out)) == [("dear", 2, [(2, {"j1": 4})]), ("medium", 1, [(1, {"j1": 4})])]


def test_items_of_higher_priority_get_the_room_first_and_lower_ones_fill_their_space():
    one = offer("medium", 8, 32, 0.38, max_number=2)
    out = pack([Wish("low", 6, {"ncpus": 2, "mem": 8}, [one]), Wish("high", 6, {"ncpus": 2, "mem": 8}, [one],
                                                                     priority=1)])
    assert out.placed("high") == 6 and out.placed("low") == 2, "the second host's spare half takes two of low"
    assert [(u.item, u.count) for u in out.unplaced] == [("low", 4)]


def test_a_repeated_snapshot_orders_nothing_more():
    provs = family("c", ("s", 2, 8, 0.10), ("m", 8, 32, 0.38))
    snap = demand(BundleItem(id="j1", count=10, resources={"ncpus": 2, "mem": 8}),
                  BundleItem(id="j2", count=3, resources={"ncpus": 1, "mem": 2}, exclusive=True))
    p = Projection()
    first = plan(snap, provs, view(p), T0, PlanSettings())
    assert first.orders
    for provider, order in first.orders:
        feed(p, provider, order, now=T0)
    again = plan(snap, provs, view(p), T0 + 10, PlanSettings())
    assert again.orders == []
    assert [(d.need, d.in_flight, d.note) for d in again.decisions] == [
        (0, 10, "in-flight supply covers the need"), (0, 3, "in-flight supply covers the need")]


def test_hosts_in_flight_carry_their_share_of_the_bundles_until_they_have_joined():
    provs = family("c", ("m", 8, 32, 0.38))
    snap = demand(BundleItem(id="j1", count=8, resources={"ncpus": 2, "mem": 8}))
    cfg = PlanSettings(join_grace=60)
    p = Projection()
    [(provider, order)] = plan(snap, provs, view(p), T0, cfg).orders
    feed(p, provider, order, now=T0, ids=["o1"])
    feed(p, provider, RequestPlanned(action="request", supply="hosts", order_id="o1", template="m", count=2),
         now=T0 + 1, ids=["r1"])
    feed(p, provider, InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running"), now=T0 + 5)
    assert plan(snap, provs, view(p), T0 + 10, cfg).orders == [], "one host coming, one not seen: all in flight"
    feed(p, provider, InstanceChanged(kind="instance_joined", machine_id="m1", state="joined"), now=T0 + 20)
    assert plan(snap, provs, view(p), T0 + 30, cfg).orders == [], "joined within the grace: still counted"
    later = plan(snap, provs, view(p), T0 + 100, cfg)
    assert later.decisions[0].in_flight == 4, "the joined host's four bundles are the scheduler's to place now"
    assert [o.bundles for _, o in later.orders] == [{"j1": 4}]


def test_a_paused_provider_is_rejected_and_a_rate_limit_clamps_packed_orders():
    provs = {**family("a", ("m", 8, 32, 0.30)), **family("b", ("m", 8, 32, 0.38))}
    provs["a"].status = "paused"
    snap = demand(BundleItem(id="j1", count=16, resources={"ncpus": 2, "mem": 8}))
    out = plan(snap, provs, view(Projection()), T0, PlanSettings(providers={"b": ProviderLimits(rate_count=3)}))
    assert [(p, o.count, o.bundles) for p, o in out.orders] == [("b", 3, {"j1": 12})]
    d = out.decisions[0]
    assert {r.provider: r.reason for r in d.rejected} == {"a": "paused"}, "b is chosen: the note says why no more"
    assert d.note == "4 could not be placed (no room: a m: paused; b m: rate: at most 3 per 60s)"
    assert [(c.provider, c.count, c.bundles) for c in d.chosen] == [("b", 3, 12)]


def test_global_caps_clamp_packing_and_host_items_share_the_room():
    provs = family("c", ("m", 8, 32, 0.38))
    snap = demand(HostItem(id="h", count=2), BundleItem(id="j1", count=20, resources={"ncpus": 2, "mem": 8}))
    out = plan(snap, provs, view(Projection()), T0, PlanSettings(budget=BudgetLimits(max_hosts=4)))
    assert [(o.item_id, o.count) for _, o in out.orders] == [("h", 2), ("", 2)]
    assert out.decisions[1].note == "12 could not be placed (no room: c m: budget: max_hosts)"
    assert [(u.item, u.count) for u in out.unplaced] == [("j1", 12)]


def test_a_budget_cut_drops_whole_hosts_least_loaded_first_and_says_which_bundles():
    order = Order(action="request", supply="hosts", template="m", count=4,
                  loads=[{"hosts": 2, "bundles": {"a": 4}}, {"hosts": 1, "bundles": {"a": 1, "b": 2}}])
    cut, dropped = drop_hosts(order, 2)
    assert cut.count == 2 and cut.bundles == {"a": 8} and dropped == {"a": 1, "b": 2}, "the empty host went first"
    provs = family("c", ("m", 8, 32, 1.0))
    approved, clamps = review([("c", order)], provs, Headroom(BudgetLimits(max_hosts=2), Usage()))
    assert [o.bundles for _, o in approved] == [{"a": 8}]
    assert clamps[0].dropped == {"a": 1, "b": 2}
    assert clamps[0].detail == "c: packed order clamped from 4 to 2 hosts; bundles unplaced: 1 of a, 2 of b"


def test_a_cut_shows_in_the_decisions_and_the_dry_run():
    provs = family("c", ("m", 8, 32, 0.38))
    snap = demand(BundleItem(id="j1", count=10, resources={"ncpus": 2, "mem": 8}))
    out = plan(snap, provs, view(Projection()), T0, PlanSettings())
    [(provider, order)] = out.orders
    assert order.count == 3 and order.bundles == {"j1": 10}
    cut, _ = drop_hosts(order, 2)
    [d] = with_cuts(out.decisions, out.orders, [(provider, cut)])
    assert [(c.count, c.bundles) for c in d.chosen] == [(2, 8)]
    assert d.rejected[-1].reason == CUT and d.note == f"2 could not be placed ({CUT})"
    run = dry_run(snap, _State(provs), T0, PlanSettings())
    assert run.cost_per_hour == 3 * 0.38 and run.unplaced == [] and run.decisions == out.decisions


class _State:
    """An empty state: a dry run as if no supply existed."""

    def __init__(self, providers) -> None:
        p = Projection()
        self.providers, self.resources = providers, {}
        self.orders, self.requests, self.instances, self.grants = p.orders, p.requests, p.instances, p.grants
        self.nodes, self.decided = p.nodes, []
