"""The core loop through real actors, the real script runner and the simulated provider scripts."""

from __future__ import annotations

import time

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_list, sim_provider, wait_until

pytestmark = pytest.mark.slow

SNAPSHOT = DemandSnapshot(items=[
    HostItem(id="d1", count=5, select={"ncpus": ">=8"}),
    UnitItem(id="d2", resource="vcs", count=3),
])


def _running(p):
    return [i for i in p.instances.values() if i.state == "running"]


def _granted(p):
    return sum(g.count for g in p.grants.values() if g.state == "granted")


def test_demand_is_met_exactly_once_and_idle_supply_returns(tmp_path, start_daemon):
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM),
                                 sim_provider(tmp_path, "units", UNITS_SIM)])
    d = start_daemon(cfg)
    c = d.controller
    c.put_demand(SNAPSHOT)

    p = d.wait_state(lambda s: len(_running(s)) == 5 and _granted(s) == 3, "5 running hosts and 3 granted units")
    assert len(p.instances) == 5
    assert {i.provider for i in p.instances.values()} == {"hosts"}
    totals = {t.name: t for t in c.resource_totals()}
    wait_until(lambda: {t.name: t.total for t in c.resource_totals()}.get("vcs") == 5,
               what="the vcs total published to the controller")
    assert totals.get("vcs") is None or totals["vcs"].base == 2

    # The same snapshot again: in-flight supply covers it, nothing more is ordered.
    orders_before = len(d.state().orders)
    again = c.put_demand(SNAPSHOT)
    # The planning round that answered this snapshot wrote its decisions and orders in one batch.
    p = d.wait_state(lambda s: {r.decision.item for r in s.decisions if r.decision.demand_seq == again.seq}
                     == {"d1", "d2"}, "the decisions answering the repeated snapshot")
    answered = {r.decision.item: r.decision for r in p.decisions if r.decision.demand_seq == again.seq}
    assert answered["d1"].need == 0 and answered["d1"].in_flight == 5 and not answered["d1"].chosen
    assert answered["d2"].need == 0 and answered["d2"].in_flight == 3 and not answered["d2"].chosen
    assert len(p.orders) == orders_before
    assert len(p.instances) == 5 and _granted(p) == 3

    # The hosts join; the scheduler's unmet need drops to 0; they go idle and are returned.
    for inst in _running(p):
        c.post_host_event(inst.name, "joined", time.time())
    wait_until(lambda: all(i.state == "joined" for i in d.state().instances.values()), what="hosts joined")
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0, select={"ncpus": ">=8"}),
                                       UnitItem(id="d2", resource="vcs", count=3)]))
    for inst in p.instances.values():
        c.post_host_event(inst.name, "idle", time.time())
    p = d.wait_state(lambda s: all(i.state == "returned" for i in s.instances.values()), "idle hosts returned")
    assert len(p.instances) == 5
    assert _granted(p) == 3, "units still wanted are not returned"
    returns = [r for r in p.requests.values() if r.action == "return"]
    assert returns and all(r.state == "complete" for r in returns)
    assert sum(len(r.machines) for r in returns) == 5

    # The simulated cloud agrees: it holds nothing of ours any more.
    held = sim_list(tmp_path / "hosts")
    assert held == []

