"""Property tests over random providers, demand and state: the policy's promises hold for any input."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messages.demand import DemandSnapshot, HostItem
from messages.description import ProviderDescription, Template
from messages.facts import GrantChanged, InstanceChanged, Order, RequestPlanned
from messages.records import ProviderRecord
from policy.budget import BudgetLimits, Headroom, Usage, review
from policy.catalog import Catalog
from policy.limits import ProviderLimits
from policy.planning import PlanSettings, plan
from policy.reclaim import reclaim
from policy.supply import held
from state.projection import Projection
from tests.support.policy import T0, failed_request, feed, idle_host, units, view

PRICES = st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0])
NOW = T0 + 10_000
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def providers(draw, all_usable: bool = False) -> dict[str, ProviderRecord]:
    out = {}
    for i in range(draw(st.integers(1, 4))):
        name = f"p{i}"
        templates = [
            Template(id=f"{name}-t{j}", max_number=draw(st.integers(0, 12)),
                     attributes={"ncpus": draw(st.sampled_from([2, 4, 8, 16]))},
                     priority=draw(st.one_of(st.none(), st.integers(0, 3))),
                     cost_per_hour=draw(st.one_of(st.none(), PRICES)))
            for j in range(draw(st.integers(1, 3)))
        ]
        desc = ProviderDescription(
            name=name, kind="hosts", priority=draw(st.integers(0, 3)), cost_per_hour=draw(PRICES),
            min_request=draw(st.integers(1, 3)), step=draw(st.integers(1, 3)),
            capacity=draw(st.one_of(st.none(), st.integers(0, 20))), templates=templates)
        usable = all_usable or draw(st.integers(0, 4)) > 0
        out[name] = ProviderRecord(name=name, description=desc, owner="a" if usable else "",
                                   status="active" if usable else draw(st.sampled_from(["paused", "drained",
                                                                                        "active"])))
    return out


@st.composite
def worlds(draw, all_usable: bool = False, with_limits: bool = True):
    provs = draw(providers(all_usable))
    p = Projection()
    n = 0
    for name, rec in provs.items():
        for t in rec.description.templates:  # type: ignore[union-attr]
            k = draw(st.integers(0, 6))
            if k:
                n += 1
                feed(p, name, RequestPlanned(action="request", supply="hosts", template=t.id, count=k),
                     now=NOW - 5, ids=[f"held{n}"])
    items = [HostItem(id=f"d{k}", count=draw(st.integers(0, 25)),
                      select={"ncpus": f">={draw(st.sampled_from([2, 4, 8, 16]))}"})
             for k in range(draw(st.integers(1, 3)))]
    budget = BudgetLimits()
    limits: dict[str, ProviderLimits] = {}
    if with_limits:
        budget = BudgetLimits(max_hosts=draw(st.one_of(st.none(), st.integers(0, 40))),
                              max_cost_per_hour=draw(st.one_of(st.none(), st.sampled_from([0.0, 5.0, 20.0, 60.0]))))
        limits = {name: ProviderLimits(max_cost_per_hour=draw(st.one_of(st.none(), st.sampled_from([0.0, 3.0, 10.0]))),
                                       rate_count=draw(st.one_of(st.none(), st.integers(1, 10))))
                  for name in provs if draw(st.booleans())}
    cfg = PlanSettings(cooldown=60, backoff_max=600, join_grace=30, order_timeout=600, budget=budget,
                       providers=limits)
    return provs, p, DemandSnapshot(seq=1, items=items), cfg


def _price(provs, provider, template):
    return provs[provider].description.price(template)


@FAST
@given(worlds())
def test_orders_never_exceed_capacity_caps_budget_or_rate_and_respect_granularity(world):
    provs, p, snapshot, cfg = world
    before = held(view(p), NOW, cfg.order_timeout)
    out = plan(snapshot, provs, view(p), NOW, cfg)
    per_key: dict[tuple[str, str], int] = {}
    per_provider: dict[str, int] = {}
    for provider, o in out.orders:
        rec = provs[provider]
        desc = rec.description
        assert rec.status == "active" and rec.owner, "only usable providers get orders"
        assert o.count >= desc.min_request and (o.count - desc.min_request) % desc.step == 0, "granularity"
        per_key[(provider, o.template)] = per_key.get((provider, o.template), 0) + o.count
        per_provider[provider] = per_provider.get(provider, 0) + o.count
    for (provider, template), n in per_key.items():
        t = provs[provider].description.template(template)
        assert n <= max(0, t.max_number - before.get((provider, "hosts", template), 0)), "template capacity"
    held_by = {}
    cost_by = {}
    for (provider, _, key), n in before.items():
        held_by[provider] = held_by.get(provider, 0) + n
        cost_by[provider] = cost_by.get(provider, 0.0) + n * _price(provs, provider, key)
    for provider, n in per_provider.items():
        desc = provs[provider].description
        if desc.capacity is not None:
            assert n <= max(0, desc.capacity - held_by.get(provider, 0)), "provider capacity"
        lim = cfg.limits(provider)
        if lim.rate_count is not None:
            assert n <= lim.rate_count, "rate limit"
        if lim.max_cost_per_hour is not None:
            new = sum(o.count * _price(provs, provider, o.template) for q, o in out.orders if q == provider)
            assert new <= max(0.0, lim.max_cost_per_hour - cost_by.get(provider, 0.0)) + 1e-6, "provider cost cap"
    total = sum(per_provider.values())
    if cfg.budget.max_hosts is not None:
        assert total <= max(0, cfg.budget.max_hosts - sum(before.values())), "global host cap"
    if cfg.budget.max_cost_per_hour is not None:
        new = sum(o.count * _price(provs, q, o.template) for q, o in out.orders)
        assert new <= max(0.0, cfg.budget.max_cost_per_hour - sum(cost_by.values())) + 1e-6, "global cost cap"


@FAST
@given(worlds(), st.randoms(use_true_random=False))
def test_the_same_inputs_give_the_same_orders_whatever_the_map_order(world, rnd):
    provs, p, snapshot, cfg = world
    names = list(provs)
    rnd.shuffle(names)
    shuffled = {n: provs[n] for n in names}
    first = plan(snapshot, provs, view(p), NOW, cfg)
    assert plan(snapshot, provs, view(p), NOW, cfg) == first
    assert plan(snapshot, shuffled, view(p), NOW, cfg, Catalog(shuffled)) == first


@FAST
@given(worlds())
def test_no_order_when_in_flight_supply_covers_the_demand(world):
    provs, p, snapshot, cfg = world
    for item in snapshot.items:
        if item.count:
            feed(p, "p0", Order(action="request", supply="hosts", item_id=item.id, template="p0-t0",
                                count=item.count), now=NOW - 1)
    out = plan(snapshot, provs, view(p), NOW, cfg)
    assert out.orders == []
    assert all(d.need == 0 and d.in_flight == i.count for d, i in zip(out.decisions, snapshot.items))


@FAST
@given(worlds(all_usable=True, with_limits=False), st.sampled_from(["capacity", "timeout", "failed"]))
def test_a_failed_providers_remainder_goes_to_the_next_candidate(world, outcome):
    provs, p, snapshot, cfg = world
    item = snapshot.items[0]
    offers, _ = Catalog(provs).offers(item)
    if not offers:
        return
    top = offers[0]
    failed_request(p, top.provider, top.key, "bad", at=NOW - 1, outcome=outcome, item=item.id)
    out = plan(snapshot, provs, view(p), NOW, cfg)
    # The same round with the failed scope simply unable to take anything.
    cut = dict(provs)
    desc = provs[top.provider].description
    if outcome == "capacity":
        templates = [t.model_copy(update={"max_number": 0}) if t.id == top.key else t for t in desc.templates]
    else:
        templates = [t.model_copy(update={"max_number": 0}) for t in desc.templates]
    cut[top.provider] = ProviderRecord(name=top.provider, owner="a",
                                       description=desc.model_copy(update={"templates": templates}))
    assert out.orders == plan(snapshot, cut, view(p), NOW, cfg).orders
    assert not any(q == top.provider and (o.template == top.key or outcome != "capacity") for q, o in out.orders)
    first = out.decisions[0]
    if first.need > 0:
        assert any(r.provider == top.provider and r.reason.startswith("cooling down until") for r in first.rejected)


@FAST
@given(st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 5_000), st.booleans()), min_size=1, max_size=6),
       st.integers(0, 3_000), st.integers(0, 2_000), st.integers(0, 8_000))
def test_no_host_returned_before_min_hold_or_while_busy(hosts_, min_hold, idle_time, elapsed):
    p = Projection()
    for n, (launch_ago, idle_ago, busy) in enumerate(hosts_):
        launched = NOW - launch_ago
        idle_host(p, "h", f"m{n}", "h-t", launched=launched, idle_at=max(launched, NOW - idle_ago))
        if busy:
            feed(p, "h", InstanceChanged(kind="instance_busy", machine_id=f"m{n}", state="busy"), now=NOW)
    provs = {"h": ProviderRecord(name="h", owner="a", description=ProviderDescription(
        name="h", kind="hosts", min_hold_s=min_hold, templates=[Template(id="h-t", max_number=10)]))}
    now = NOW + elapsed
    returned = [m for _, o in reclaim(None, provs, {}, view(p), now, idle_time) for m in o.machines]
    for m in returned:
        inst = p.instances[f"h/{m}"]
        assert inst.state == "idle", "busy hosts are never returned"
        assert now - inst.launched_at >= min_hold, "never before the minimum hold"
        assert now - inst.history.since("idle") >= idle_time, "never before the idle time"
    assert len(returned) == len(set(returned))


@FAST
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(0, 30), st.integers(0, 10))
def test_units_are_never_returned_below_observed_use(grants, in_use, base):
    p = Projection()
    for n, count in enumerate(grants):
        feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=count), ids=[f"g{n}"],
             now=T0)
        feed(p, "u", GrantChanged(kind="grant_granted", grant_id=f"g{n}", resource="vcs", state="granted",
                                  count=count), now=T0)
    res = p.resource("vcs")
    res.base, res.borrowed = base, sum(grants)
    res.total = base + res.borrowed
    res.in_use = min(in_use, res.total)
    out = reclaim(None, {"u": units("u")}, p.resources, view(p), now=NOW, idle_time=60)
    returned = sum(o.count for _, o in out)
    assert res.total - returned >= res.in_use
    assert all(0 < o.count <= p.grants[o.grants[0]].count for _, o in out), "a return takes from one grant it holds"


@FAST
@given(st.lists(st.tuples(st.integers(1, 12), st.sampled_from([0.5, 1.0, 3.0]), st.integers(1, 3),
                          st.integers(1, 3)), min_size=1, max_size=5),
       st.one_of(st.none(), st.integers(0, 30)), st.one_of(st.none(), st.sampled_from([0.0, 4.0, 25.0])),
       st.integers(0, 10), st.sampled_from([0.0, 3.0]))
def test_the_budget_review_never_exceeds_a_cap_and_keeps_granularity(orders, max_hosts, max_cost, held_hosts,
                                                                       held_rate):
    provs, asked = {}, []
    for n, (count, price, min_request, step) in enumerate(orders):
        name = f"p{n}"
        provs[name] = ProviderRecord(name=name, owner="a", description=ProviderDescription(
            name=name, kind="hosts", cost_per_hour=price, min_request=min_request, step=step,
            templates=[Template(id="t", max_number=100)]))
        count = min_request + step * count
        asked.append((name, Order(action="request", supply="hosts", item_id="d", template="t", count=count)))
    limits = BudgetLimits(max_hosts=max_hosts, max_cost_per_hour=max_cost)
    approved, clamps = review(asked, provs, Headroom(limits, Usage(hosts=held_hosts, cost_per_hour=held_rate)))
    hosts_ = sum(o.count for _, o in approved)
    rate = sum(o.count * provs[q].description.cost_per_hour for q, o in approved)
    if max_hosts is not None:
        assert hosts_ <= max(0, max_hosts - held_hosts)
    if max_cost is not None:
        assert rate <= max(0.0, max_cost - held_rate) + 1e-6
    for q, o in approved:
        d = provs[q].description
        assert o.count >= d.min_request and (o.count - d.min_request) % d.step == 0
    assert len(clamps) >= sum(1 for q, o in asked if (q, o.count) not in [(a, b.count) for a, b in approved])
    if max_hosts is None and max_cost is None:
        assert approved == asked and clamps == []
