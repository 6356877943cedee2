"""Reclaim: billing-boundary returns, maximum lifetime, hysteresis, and units above observed use."""

from __future__ import annotations

from messages.demand import HostItem
from messages.facts import Decision, GrantChanged, RequestPlanned
from messages.records import DecisionRecord
from policy.limits import ProviderLimits
from policy.reclaim import reclaim, wanted_until
from state.projection import Projection
from tests.support.policy import T0, demand, feed, hosts, idle_host, units, view

PROVS = {"a": hosts("a")}


def _returned(out):
    return [m for _, o in out for m in o.machines]


def test_billing_boundary_return_waits_for_the_end_of_the_billed_hour():
    p = Projection()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 60)
    lim = {"a": ProviderLimits(billing_unit=3600, return_window=300)}
    assert _returned(reclaim(None, PROVS, {}, view(p), T0 + 1200, 600, lim)) == [], "40 min of the hour left"
    out = reclaim(None, PROVS, {}, view(p), T0 + 3400, 600, lim)
    assert _returned(out) == ["m1"] and "200s before its billed unit ends" in out[0][1].reason
    assert _returned(reclaim(None, PROVS, {}, view(p), T0 + 3700, 600, lim)) == [], "a new hour has begun"
    no_unit = {"a": ProviderLimits(return_window=300)}
    assert _returned(reclaim(None, PROVS, {}, view(p), T0 + 3400, 600, no_unit)) == ["m1"], "hourly by default"


def test_a_host_past_its_maximum_lifetime_goes_back_once_idle_even_if_wanted():
    p = Projection()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 7000)
    wanted = demand(HostItem(id="d", count=3))
    lim = {"a": ProviderLimits(max_lifetime=7200)}
    assert _returned(reclaim(wanted, PROVS, {}, view(p), T0 + 7100, 600, lim)) == []
    out = reclaim(wanted, PROVS, {}, view(p), T0 + 7200, 600, lim)
    assert _returned(out) == ["m1"] and out[0][1].reason == "held past max_lifetime 7200s"


def test_hysteresis_keeps_hosts_a_recent_need_could_use():
    p = Projection()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)
    snapshot = demand(HostItem(id="d", count=0, select={"ncpus": ">=8"}))
    history = [DecisionRecord(seq=1, at=T0 + 100, decision=Decision(item="d", need=2)),
               DecisionRecord(seq=2, at=T0 + 500, decision=Decision(item="d", need=0, in_flight=2))]
    assert wanted_until(history, T0 + 900) == {"d": T0 + 500}
    assert _returned(reclaim(snapshot, PROVS, {}, view(p), T0 + 900, 600, history=history)) == [], \
        "more was needed 400 s ago"
    assert _returned(reclaim(snapshot, PROVS, {}, view(p), T0 + 1101, 600, history=history)) == ["m1"]
    other = demand(HostItem(id="d", count=0, select={"ncpus": ">=64"}))
    assert _returned(reclaim(other, PROVS, {}, view(p), T0 + 900, 600, history=history)) == ["m1"], \
        "a need this host could not serve does not hold it"
    still = history + [DecisionRecord(seq=3, at=T0 + 600, decision=Decision(item="d", need=1))]
    assert wanted_until(still, T0 + 5000) == {"d": T0 + 5000}


def test_several_grants_never_take_the_total_below_use_together():
    p = Projection()
    for g in ("g1", "g2", "g3"):
        feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=3), ids=[g])
        feed(p, "u", GrantChanged(kind="grant_granted", grant_id=g, resource="vcs", state="granted", count=3))
    res = p.resource("vcs")
    res.base, res.borrowed, res.total, res.in_use = 10, 9, 19, 14
    out = reclaim(None, {"u": units("u")}, p.resources, view(p), now=T0 + 1000, idle_time=60)
    assert [(o.grants, o.count) for _, o in out] == [(["g1"], 3), (["g2"], 2)], \
        "the 5 above the 14 in use go back: the oldest grant whole, 2 of the next"


def test_an_idle_host_stays_while_a_bundle_item_it_could_hold_wants_more():
    from messages.demand import BundleItem

    p = Projection()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)  # a-t: 8 CPUs, X86_64

    def returned(*items, history=()):
        return _returned(reclaim(demand(*items), PROVS, {}, view(p), T0 + 900, 600, history=history))

    fits = BundleItem(id="j", count=3, resources={"ncpus": 2}, select={"type": "X86_64"})
    assert returned(fits) == [], "bundles of 2 CPUs fit on an idle 8-CPU host"
    assert returned(fits.model_copy(update={"resources": {"ncpus": 8}})) == [], "one bundle fills it exactly"
    assert returned(fits.model_copy(update={"resources": {"ncpus": 16}})) == ["m1"], "no bundle fits on it"
    assert returned(fits.model_copy(update={"resources": {"ncpus": 1, "ngpus": 1}})) == ["m1"], \
        "it has no GPU at all"
    assert returned(fits.model_copy(update={"select": {"type": "ARM64"}})) == ["m1"], "its select rules it out"
    assert returned(fits.model_copy(update={"count": 0})) == ["m1"], "nothing wanted, nothing recent"
    history = [DecisionRecord(seq=1, at=T0 + 100, decision=Decision(item="j", need=2)),
               DecisionRecord(seq=2, at=T0 + 500, decision=Decision(item="j", need=0, in_flight=2))]
    assert returned(fits.model_copy(update={"count": 0}), history=history) == [], "more was needed 400 s ago"
