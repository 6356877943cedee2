"""Rounds that start from the last round's catalog decide as rounds planned from scratch, change after change.

A planner keeps one catalog across rounds (``policy.rounds.catalog_for``): the ranked offers, the quota scopes
and which templates each item shape could use (all read from the descriptions), and each item's last decision
(reused when the item weighs the same). Random sequences of demand, supply and description changes are planned
both ways after every change: with the kept catalog, as the daemon and the simulator plan, and with nothing
kept (a new catalog for the plan, none for the returns and the next moment due). Every decision, order and
return, and the moment the next round is due, must be the same.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.description import Pool, ProviderDescription, Quota, Template
from messages.facts import InstanceChanged, LeaseChanged, Order, ProviderDescribed
from policy.catalog import Catalog
from policy.due import next_change
from policy.matching import Serves
from policy.planning import plan
from policy.reclaim import reclaim
from policy.rounds import Proposal, catalog_for, propose
from policy.settings import PlanSettings
from state.projection import Projection
from tests.support.policy import T0, failed_request, feed, idle_host, view

SETTINGS = PlanSettings(cooldown=60, backoff_max=600, join_grace=30, order_timeout=600)
IDLE = 300.0
HOSTS = ["a", "b", "c"]


def _described(name: str, priority: int, max_number: int, ncpus: int, quota: int | None) -> ProviderDescribed:
    templates = [Template(id=f"{name}-t{k}", max_number=max_number, vcpus=n,
                          attributes={"ncpus": n, "mem": n * 4096, "type": "X86_64"})
                 for k, n in enumerate((ncpus, ncpus * 2))]
    return ProviderDescribed(description=ProviderDescription(
        name=name, kind="hosts", priority=priority, cost_per_hour=1.0 + priority / 10, min_hold_s=60,
        templates=templates, quota=Quota(vcpus=quota) if quota is not None else None))


describe = st.tuples(st.just("describe"), st.sampled_from(HOSTS), st.integers(0, 3), st.integers(0, 6),
                     st.sampled_from([2, 4, 8]), st.one_of(st.none(), st.integers(0, 64)))
wants = st.tuples(st.just("demand"), st.integers(0, 9), st.sampled_from([0, 0, 3]), st.integers(0, 8),
                  st.sampled_from([0, 0, 4]), st.booleans())
order = st.tuples(st.just("order"), st.sampled_from(HOSTS), st.sampled_from(["d", "e"]), st.integers(1, 3))
fail = st.tuples(st.just("fail"), st.sampled_from(HOSTS), st.integers(0, 1))
idle = st.tuples(st.just("idle"), st.sampled_from(HOSTS), st.integers(0, 1))
busy = st.tuples(st.just("busy"), st.integers(0, 5))
later = st.tuples(st.just("time"), st.sampled_from([1.0, 29.0, 61.0, 300.0, 601.0, 1800.0]))
changes = st.lists(st.one_of(describe, wants, order, fail, idle, idle, busy, later), min_size=1, max_size=30)


def _world() -> Projection:
    p = Projection()
    for k, name in enumerate(HOSTS):
        feed(p, name, _described(name, k, 4, 4, None), now=T0 - 3600)
    feed(p, "lic", ProviderDescribed(description=ProviderDescription(
        name="lic", kind="units", cost_per_hour=1.0, min_hold_s=60,
        pools=[Pool(resource="vcs", capacity=8)])), now=T0 - 3600)
    for name in [*HOSTS, "lic"]:
        feed(p, name, LeaseChanged(kind="lease_acquired", name=f"provider:{name}", holder="h", fence=1),
             now=T0 - 3600)
    return p


def _snapshot(seq: int, hosts8: int, hosts_any: int, licenses: int, bundles: int, by_name: bool) -> DemandSnapshot:
    items: list = [HostItem(id="d", count=hosts8, select={"ncpus": ">=8"}), HostItem(id="e", count=hosts_any),
                   UnitItem(id="u", count=licenses, resource="vcs"),
                   BundleItem(id="b", count=bundles, resources={"ncpus": 2})]
    if by_name:
        items.append(HostItem(id="n", count=1, template="b-t1"))
    return DemandSnapshot(seq=seq, items=items)


def _from_scratch(demand: DemandSnapshot | None, p: Projection, now: float) -> Proposal:
    """``propose`` with nothing kept: a new catalog for the plan, none for the returns."""
    supply = view(p)
    planned = plan(demand, p.providers, supply, now, SETTINGS)
    returns = reclaim(demand, p.providers, p.resources, supply, now, IDLE, SETTINGS.providers, p.decided,
                      SETTINGS.warm, SETTINGS.order_timeout)
    return Proposal(orders=planned.orders, returns=returns, decisions=planned.decisions)


def _said(out: Proposal) -> tuple:
    return ([d.model_dump() for d in out.decisions], [(p, o.model_dump()) for p, o in out.orders],
            [(p, o.model_dump()) for p, o in out.returns])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes)
@example([("demand", 1, 0, 0, 0, False), ("idle", "a", 0), ("idle", "a", 1)])  # one provider's templates apart
def test_rounds_from_the_kept_catalog_decide_as_rounds_from_scratch(steps):
    p = _world()
    now = T0
    seq = 0
    demand: DemandSnapshot | None = None
    kept: Catalog | None = None
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "describe":
            feed(p, step[1], _described(*step[1:]), now=now)
        elif kind == "demand":
            seq += 1
            demand = _snapshot(seq, *step[1:])
        elif kind == "order":
            feed(p, step[1], Order(action="request", supply="hosts", item_id=step[2], template=f"{step[1]}-t0",
                                   count=step[3]), now=now)
        elif kind == "fail":
            failed_request(p, step[1], f"{step[1]}-t{step[2]}", f"r{n}", at=now)
        elif kind == "idle":
            idle_host(p, step[1], f"m{n}", f"{step[1]}-t{step[2]}", launched=now - 1000, idle_at=now - IDLE,
                      rid=f"r{n}")
        elif kind == "busy":
            idle_hosts = sorted(k for k, i in p.instances.items() if i.state == "idle")
            if idle_hosts:
                key = idle_hosts[step[1] % len(idle_hosts)]
                feed(p, key.split("/")[0], InstanceChanged(kind="instance_busy", machine_id=key.split("/", 1)[1],
                                                           state="busy"), now=now)
        else:
            now += step[1]
        kept = catalog_for(kept, p.providers)
        incremental = propose(demand, p, now, SETTINGS, IDLE, kept)
        scratch = _from_scratch(demand, p, now)
        assert _said(incremental) == _said(scratch), f"after change {n}: {step}"
        assert next_change(demand, p, now, SETTINGS, IDLE, incremental.decisions, kept) == next_change(
            demand, p, now, SETTINGS, IDLE, scratch.decisions), f"after change {n}: {step}"


def test_a_kept_catalog_says_per_template_which_hosts_serve_an_item_as_the_selector_does():
    p = _world()
    for name in HOSTS:
        feed(p, name, _described(name, 1, 4, 4 if name != "c" else 8, None))
    catalog = Catalog(p.providers)
    items = [HostItem(id="d", count=1, select={"ncpus": ">=8"}), HostItem(id="n", count=1, template="b-t1"),
             BundleItem(id="b", count=1, resources={"ncpus": 12})]
    for item in items:
        serves = catalog.serving(item)
        for name in HOSTS:
            for template in p.providers[name].description.templates:
                expected = Serves(item).matches(template)
                assert serves(name, template.id) is expected, (item.id, template.id)
                assert serves(name, template.id) is expected, "asked again"
        assert not serves("lic", "vcs") and not serves("nobody", "x")
