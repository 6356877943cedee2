"""A stopped daemon's successor resumes from the facts: nothing forgotten, nothing doubled."""

from __future__ import annotations

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_list, sim_provider

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

