"""The automatic policy end to end: real actors, the real script runner, the simulated provider scripts."""

from __future__ import annotations

import time

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from policy.cooldown import cooldowns
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_call, sim_provider, wait_until

pytestmark = pytest.mark.slow


def _template(tid, ncpus, **kw):
    return {"id": tid, "max_number": kw.pop("max_number", 10), "attributes": {"type": "X86_64", "ncpus": ncpus}, **kw}


def _described(d, n):
    return d.wait_state(lambda s: sum(1 for p in s.providers.values() if p.description and p.owner) == n,
                        f"{n} providers described and owned")


def _running_by_provider(s):
    out: dict[str, int] = {}
    for i in s.instances.values():
        if i.state == "running":
            out[i.provider] = out.get(i.provider, 0) + 1
    return out


def test_priority_beats_cost_cheaper_wins_among_equals_and_capacity_spills(tmp_path, start_daemon):
    dear = dict(HOSTS_SIM, name_prefix="dear", priority=10, cost_per_hour=5.0,
                templates=[_template("dear-8", 8, max_number=3)])
    cheap = dict(HOSTS_SIM, name_prefix="cheap", priority=5, cost_per_hour=1.0,
                 templates=[_template("cheap-8", 8), _template("cheap-16", 16)])
    cheaper = dict(HOSTS_SIM, name_prefix="cheaper", priority=5, cost_per_hour=0.5,
                   templates=[_template("cheaper-16", 16)])
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "dear", dear), sim_provider(tmp_path, "cheap", cheap),
                                 sim_provider(tmp_path, "cheaper", cheaper)])
    d = start_daemon(cfg)
    _described(d, 3)
    d.controller.put_demand(DemandSnapshot(items=[
        HostItem(id="eight", count=5, select={"ncpus": "=8"}),       # dear (priority) up to its 3, then cheap
        HostItem(id="sixteen", count=2, select={"ncpus": ">=16"}),   # cheap and cheaper tie on priority
    ]))
    s = d.wait_state(lambda s: sum(_running_by_provider(s).values()) == 7, "7 running hosts")
    by_item_template = {}
    for i in s.instances.values():
        by_item_template[(i.item_id, i.template)] = by_item_template.get((i.item_id, i.template), 0) + 1
    assert by_item_template == {("eight", "dear-8"): 3, ("eight", "cheap-8"): 2, ("sixteen", "cheaper-16"): 2}
    first = next(r.decision for r in s.decisions if r.decision.item == "eight" and r.decision.chosen)
    assert [(c.provider, c.count) for c in first.chosen] == [("dear", 3), ("cheap", 2)]


def test_a_provider_that_keeps_failing_cools_down_longer_and_is_used_again_after(tmp_path, start_daemon):
    flaky = dict(HOSTS_SIM, name_prefix="flaky", priority=10,
                 faults=[{"action": "request", "exit": 69, "times": 2}])
    spare = dict(HOSTS_SIM, name_prefix="spare", priority=5)
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "flaky", flaky), sim_provider(tmp_path, "spare", spare)],
                      policy={"cooldown": "0.5s", "backoff_max": "5s"})
    d = start_daemon(cfg)
    c = d.controller
    _described(d, 2)
    items: list[HostItem] = []

    def ask(item_id):
        """One more host wanted; the answer once a host runs for it."""
        items.append(HostItem(id=item_id, count=1, select={"ncpus": ">=8"}))
        c.put_demand(DemandSnapshot(items=list(items)))
        s = d.wait_state(lambda s: any(i.item_id == item_id and i.state == "running" for i in s.instances.values()),
                         f"a running host for {item_id}")
        return s, next(i.provider for i in s.instances.values() if i.item_id == item_id)

    def cooled_down(s):
        """Wait out the flaky provider's cooldown, read from its decisions' rejection."""
        reasons = [r.reason for rec in s.decisions for r in rec.decision.rejected if r.provider == "flaky"]
        assert reasons and reasons[-1].startswith("cooling down until ") and "after capacity error" in reasons[-1]
        until = max((c.until for c in cooldowns(s.requests.values(), time.time(), 0.5, 5.0).values()), default=0.0)
        wait_until(lambda: time.time() > until, timeout=10, what="the cooldown to end")
        return reasons[-1]

    s, provider = ask("d1")
    assert provider == "spare"
    assert "in a row" not in cooled_down(s), "the first failure: no count"
    s, provider = ask("d2")
    assert provider == "spare", "tried again after the cooldown, it failed again"
    assert "(2 in a row)" in cooled_down(s)
    s, provider = ask("d3")
    assert provider == "flaky", "after the longer cooldown the preferred provider is used again"
    failed = sorted((r for r in s.requests.values() if r.provider == "flaky" and r.state == "failed"),
                    key=lambda r: r.created_at)
    assert [r.outcome for r in failed] == ["capacity", "capacity"]
    gaps = [b.created_at - a.history.since("failed") for a, b in zip(failed, failed[1:])]
    assert gaps[0] >= 0.5, "not asked again within the first cooldown"


def test_idle_hosts_go_back_after_idle_time_and_never_before_min_hold(tmp_path, start_daemon):
    sim = dict(HOSTS_SIM, min_hold=3)
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", sim)], policy={"idle_time": "1s"})
    d = start_daemon(cfg)
    c = d.controller
    _described(d, 1)
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=2, select={"ncpus": ">=8"})]))
    s = d.wait_state(lambda s: len([i for i in s.instances.values() if i.state == "running"]) == 2, "2 running")
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0, select={"ncpus": ">=8"})]))
    for inst in s.instances.values():
        c.post_host_event(inst.name, "joined", time.time())
        c.post_host_event(inst.name, "idle", time.time())
    s = d.wait_state(lambda s: all(i.state == "returned" for i in s.instances.values()), "idle hosts returned")
    for inst in s.instances.values():
        planned = inst.history.since("return_planned")
        assert planned - inst.history.since("idle") >= 1.0, "not before idle_time"
        assert planned - inst.launched_at >= 3.0, "not before the provider's minimum hold"
    assert all("idle for 1s" in o.order.reason for o in s.orders.values() if o.order.action == "return")


def test_borrowed_units_above_use_go_back_in_steps_and_units_in_use_never(tmp_path, start_daemon):
    sim = dict(UNITS_SIM, min_request=2, step=2)
    provider = sim_provider(tmp_path, "units", sim)
    cfg = make_config(tmp_path, [provider], policy={"idle_time": "1s"},
                      resources=[{"name": "vcs", "elastic": True, "base": 0, "provider": "units"}])
    d = start_daemon(cfg)
    c = d.controller
    folder = tmp_path / "units"
    _described(d, 1)

    def use(n):
        sim_call(folder, "admin", None, "set-in-use", "vcs", str(n))
        return d.wait_state(lambda s: s.resources["vcs"].in_use == n, f"{n} in use observed")

    c.put_demand(DemandSnapshot(items=[UnitItem(id="d1", resource="vcs", count=5)]))
    d.wait_state(lambda s: [g.count for g in s.grants.values() if g.state == "granted"] == [6],
                 "5 wanted, 6 borrowed in steps of 2")
    use(6)
    c.put_demand(DemandSnapshot(items=[UnitItem(id="d1", resource="vcs", count=0)]))
    time.sleep(2.5)  # past idle_time, with every unit in use
    s = d.state()
    assert not [o for o in s.orders.values() if o.order.action == "return"], "units in use are never returned"
    dropped = use(1).resources["vcs"].observed_at
    s = d.wait_state(lambda s: any(g.given_back for g in s.grants.values()), "the unused units returned")
    [grant] = s.grants.values()
    [(back_at, n)] = grant.given_back
    assert (grant.state, grant.count, n) == ("granted", 2, 4), "4 go back, 2 stay for the 1 in use"
    planned = grant.history.since("return_planned")
    assert planned - dropped >= 1.0, "not before idle_time"
    assert back_at > planned, "given back once the provider confirmed it"
    [ret] = [r for r in s.requests.values() if r.action == "return"]
    assert (ret.count, ret.grants, ret.state) == (4, [grant.id], "complete")
    assert [o.order.reason for o in s.orders.values() if o.order.action == "return"] == ["4 of 6 unused for 1s"]
    d.wait_state(lambda s: s.resources["vcs"].total == 2, "the cluster total down to the 2 kept")
    assert sim_call(folder, "list", {})["grants"][0]["count"] == 2
    time.sleep(1.5)  # one more idle_time: the 1 spare unit is less than a step, so it stays
    s = d.state()
    assert [g.count for g in s.grants.values()] == [2]
    assert len([o for o in s.orders.values() if o.order.action == "return"]) == 1
