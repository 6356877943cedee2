"""A dry run with no daemon running (issue 34, item 6): providers no daemon holds are planned for from
their last descriptions when asked, and every order and decision for them says so."""

from __future__ import annotations

import dataclasses

from messages.demand import BundleItem, HostItem
from messages.facts import LeaseChanged, ProviderDescribed
from policy.planning import PlanSettings
from policy.rounds import NO_OWNER, dry_run
from state.projection import Projection
from tests.support.policy import T0, demand, feed, hosts

SNAP = demand(HostItem(id="h", count=12), BundleItem(id="j", count=4, resources={"ncpus": 2}))


def state(*owned: str) -> Projection:
    """Two described providers, ``cheap`` (10 hosts of 8 CPUs) and ``dear``; those in ``owned`` held by a."""
    p = Projection()
    for name, price in (("cheap", 1.0), ("dear", 2.0)):
        feed(p, name, ProviderDescribed(description=hosts(name, price=price, priority=0).description))
        if name in owned:
            feed(p, name, LeaseChanged(kind="lease_acquired", name=f"provider:{name}", holder="a", fence=1))
    return p


def test_without_a_daemon_a_round_orders_nothing_but_a_dry_run_asked_to_plans_for_the_described():
    p = state()
    live = dry_run(SNAP, p, T0, PlanSettings())
    assert live.orders == [] and live.unowned == frozenset()
    assert all("no owner" in c.why for d in live.decisions for c in d.candidates), "the daemon's own rule"

    run = dry_run(SNAP, p, T0, PlanSettings(), ownerless=True)
    assert run.unowned == {"cheap", "dear"}
    assert [(provider, o.count) for provider, o in run.orders] == [("cheap", 10), ("dear", 2), ("dear", 1)]
    for provider, o in run.orders:
        assert f"{NO_OWNER}: no daemon holds {provider} now" in o.reason, o.reason
    [h, j] = run.decisions
    assert [(c.provider, c.count) for c in h.chosen] == [("cheap", 10), ("dear", 2)]
    assert f"{NO_OWNER}: no daemon holds cheap, dear now" in h.note, h.note
    assert [(c.provider, c.count, c.bundles) for c in j.chosen] == [("dear", 1, 4)]
    assert f"{NO_OWNER}: no daemon holds cheap, dear now" in j.note, j.note
    assert run.cost_per_hour == 10 * 1.0 + 3 * 2.0
    assert not any(rec.owner for rec in p.providers.values()), "the state is left as it is"


def test_only_the_providers_without_an_owner_are_noted():
    p = state("cheap")
    run = dry_run(demand(HostItem(id="h", count=12)), p, T0, PlanSettings(), ownerless=True)
    assert run.unowned == {"dear"}
    notes = {provider: NO_OWNER in o.reason for provider, o in run.orders}
    assert notes == {"cheap": False, "dear": True}
    [d] = run.decisions
    assert d.note.count(NO_OWNER) == 1 and "holds dear now" in d.note
    small = dry_run(demand(HostItem(id="h", count=3)), p, T0, PlanSettings(), ownerless=True)
    [d] = small.decisions
    assert [c.provider for c in d.chosen] == ["cheap"]
    assert "holds dear now" in d.note, "a decision that weighed it says so too"


def test_a_steered_provider_without_an_owner_still_takes_nothing():
    p = state()
    p.providers["dear"] = dataclasses.replace(p.providers["dear"], status="paused")
    run = dry_run(demand(HostItem(id="h", count=12)), p, T0, PlanSettings(), ownerless=True)
    assert [(provider, o.count) for provider, o in run.orders] == [("cheap", 10)]
    [d] = run.decisions
    assert [c.why for c in d.candidates if c.provider == "dear"] == ["paused"]
