"""A stopped daemon's successor resumes from the facts: nothing forgotten, nothing doubled."""

from __future__ import annotations

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from persistence.controller import open_controller
from persistence.port import ResourceTotal
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_list, sim_provider, wait_until

pytestmark = pytest.mark.slow


def test_restart_mid_flight_resumes_and_provisions_nothing_twice(tmp_path, start_daemon):
    slow = dict(HOSTS_SIM, lead_time=1.5)
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", slow), sim_provider(tmp_path, "units", UNITS_SIM)])
    first = start_daemon(cfg)
    first.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=4), UnitItem(id="d2", resource="vcs",
                                                                                           count=2)]))
    first.wait_state(lambda s: any(i.state == "provisioning" for i in s.instances.values()),
                     "hosts provisioning (submitted, not yet running)")
    first.stop()

    second = start_daemon(cfg)
    p = second.wait_state(lambda s: sum(1 for i in s.instances.values() if i.state == "running") == 4
                          and sum(g.count for g in s.grants.values() if g.state == "granted") == 2,
                          "4 running hosts and 2 granted units after the restart")
    assert len(p.instances) == 4
    assert len([r for r in p.requests.values() if r.action == "request"]) == 2
    held = sim_list(tmp_path / "hosts")
    assert sorted(m["machineId"] for m in held) == sorted(i.machine_id for i in p.instances.values())
    leases = [f.payload for f in second.controller.read() if f.kind == "lease_acquired"
              and f.payload.name == "provider:hosts"]
    assert [lease.fence for lease in leases] == [1, 2], "the successor acts under a new fence"


def test_a_successor_publishes_the_totals_the_facts_say_before_it_calls(tmp_path, start_daemon):
    """An owner killed between writing a total and publishing it leaves the scheduler an old total: its
    successor publishes the facts' totals again before it decides any call."""
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "units", UNITS_SIM)])
    first = start_daemon(cfg)
    first.controller.put_demand(DemandSnapshot(items=[UnitItem(id="d2", resource="vcs", count=3)]))
    first.wait_state(lambda s: sum(g.count for g in s.grants.values() if g.state == "granted") == 3,
                     "3 units granted")
    wait_until(lambda: _published(first) == 5, what="base 2 + 3 borrowed published")
    first.stop()
    c = open_controller(cfg.controller.url)
    c.set_resource_total(ResourceTotal(name="vcs", base=2, borrowed=9, total=11, time=0.0))
    c.close()

    second = start_daemon(cfg)
    wait_until(lambda: _published(second) == 5, what="the successor to publish the facts' total again")


def _published(run) -> int | None:
    return next((t.total for t in run.controller.resource_totals() if t.name == "vcs"), None)
