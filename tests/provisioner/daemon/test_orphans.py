"""Orphans and lost supply: found, recorded as facts, returned or reported; nothing paid for is forgotten."""

from __future__ import annotations

import time

import pytest

from messages.demand import DemandSnapshot, HostItem
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_call, sim_list, sim_provider

pytestmark = pytest.mark.slow

#: The tag every request of the daemon's carries at provider "hosts": what a lost record left behind.
OURS = {"provisioner-provider": "hosts"}


def _daemon(tmp_path, start_daemon, orphans="return", **policy):
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM)],
                      policy={"orphans": orphans, **policy})
    d = start_daemon(cfg)
    d.wait_state(lambda s: s.providers.get("hosts") and s.providers["hosts"].description, "described")
    return d


def test_a_machine_unknown_to_the_facts_is_found_and_returned(tmp_path, start_daemon):
    d = _daemon(tmp_path, start_daemon)
    made = sim_call(tmp_path / "hosts", "request",
                    {"token": "made-by-hand", "template": "small", "count": 1, "tags": OURS})
    assert made["requestId"]
    p = d.wait_state(lambda s: any(i.state == "returned" for i in s.instances.values()), "the orphan returned")
    orphan = next(iter(p.instances.values()))
    assert [c.state for c in orphan.history.changes] == ["orphaned", "return_planned", "returning", "returned"]
    assert "unknown to the facts" in orphan.history.changes[0].reason
    assert orphan.history.changes[1].reason == "orphans: return"
    assert sim_list(tmp_path / "hosts") == []


def test_orphans_report_lists_without_returning(tmp_path, start_daemon):
    d = _daemon(tmp_path, start_daemon, orphans="report")
    sim_call(tmp_path / "hosts", "request", {"token": "made-by-hand", "template": "small", "count": 2, "tags": OURS})
    d.wait_state(lambda s: sum(1 for i in s.instances.values() if i.state == "orphaned") == 2, "2 orphans")
    # Untagged supply is not ours to judge: a machine made outside the daemon's tags is never touched.
    sim_call(tmp_path / "hosts", "request", {"token": "someone-else", "template": "small", "count": 1})
    # Another scan passes (one per 12 status polls): the orphans stay reported, never returned.
    d.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    p = d.wait_state(lambda s: any(i.state == "running" for i in s.instances.values()), "a host of our own")
    mine = next(i for i in p.instances.values() if i.state == "running")
    first_scan_done = time.monotonic()
    d.wait_state(lambda s: time.monotonic() - first_scan_done > 1.5, "a scan period", timeout=5)
    p = d.state()
    assert sorted(i.state for i in p.instances.values()) == ["orphaned", "orphaned", "running"]
    assert p.instances[mine.key].state == "running", "our own host is never mistaken for an orphan or lost"
    assert len(sim_list(tmp_path / "hosts")) == 4


def test_a_host_that_never_joins_becomes_an_orphan_and_is_returned(tmp_path, start_daemon):
    d = _daemon(tmp_path, start_daemon, join_timeout="1s")
    d.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    p = d.wait_state(lambda s: any(i.state == "returned" for i in s.instances.values()), "never-joined returned")
    inst = next(i for i in p.instances.values() if i.state == "returned")
    assert "orphaned" in [c.state for c in inst.history.changes]
    assert "join_timeout" in inst.history.changes[[c.state for c in inst.history.changes].index("orphaned")].reason


def test_a_reclaimed_host_is_lost_and_its_need_is_planned_again(tmp_path, start_daemon):
    d = _daemon(tmp_path, start_daemon)
    c = d.controller
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    p = d.wait_state(lambda s: any(i.state == "running" for i in s.instances.values()), "a running host")
    inst = next(iter(p.instances.values()))
    c.post_host_event(inst.name, "joined", time.time())
    d.wait_state(lambda s: s.instances[inst.key].state == "joined", "joined")
    sim_call(tmp_path / "hosts", "admin", None, "reclaim", inst.machine_id)
    p = d.wait_state(lambda s: s.instances[inst.key].state == "lost", "the host lost")
    assert "taken back" in p.instances[inst.key].history.changes[-1].reason
    assert p.instances[inst.key].ended_at is not None, "a lost host stops costing from then on"
    # The scheduler still needs a host: the planner orders a replacement.
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    p = d.wait_state(lambda s: sum(1 for i in s.instances.values() if i.state == "running") == 1, "a replacement")
    assert len(p.instances) == 2


def test_units_granted_after_their_request_timed_out_are_found(tmp_path, start_daemon):
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "units", UNITS_SIM)], policy={"orphans": "report"})
    d = start_daemon(cfg)
    d.wait_state(lambda s: s.providers.get("units") and s.providers["units"].description, "described")
    sim_call(tmp_path / "units", "request", {"token": "old-token", "resource": "vcs", "count": 2,
                                           "tags": {"provisioner-provider": "units"}})
    p = d.wait_state(lambda s: any(g.state == "orphaned" for g in s.grants.values()), "the orphan grant")
    grant = next(iter(p.grants.values()))
    assert grant.count == 2 and grant.id == "old-token", "named as the provider knows it, so a return can name it"
