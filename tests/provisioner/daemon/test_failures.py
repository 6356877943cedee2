"""Failures through the real daemon: lost leases, provider errors, misbehaving scripts."""

from __future__ import annotations

import os
import stat

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_list, sim_provider, wait_until

pytestmark = pytest.mark.slow

HOSTS = DemandSnapshot(items=[HostItem(id="d1", count=3, select={"ncpus": ">=8"})])


def test_a_lost_lease_stops_the_provider_before_any_script_runs(tmp_path, start_daemon):
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM)])
    d = start_daemon(cfg)
    c = d.controller
    d.wait_state(lambda s: s.providers.get("hosts") and s.providers["hosts"].description, "hosts described")

    # Another holder takes the lease (as after this daemon was paused past its TTL).
    old = c.leases.get("provider:hosts")
    assert old is not None and old.holder == "a"
    assert c.leases.release(old)
    intruder = c.leases.acquire("provider:hosts", "intruder", ttl=120)
    assert intruder is not None and intruder.fence > old.fence
    stolen_at = c.last_seq()

    c.put_demand(HOSTS)
    d.wait_state(lambda s: any(r.decision.item == "d1" for r in s.decisions), "the planner's decision for d1")
    wait_until(lambda: any(f.kind == "lease_lost" and f.payload.name == "provider:hosts"
                           for f in c.read(after=stolen_at)), what="the daemon to notice the lost lease")
    later = c.read(after=stolen_at)
    assert not [f for f in later if f.lease == "provider:hosts" and f.fence == old.fence], \
        "no fact under the old fence after the lease passed on"
    assert c.leases.get("provider:hosts").holder == "intruder"
    assert sim_list(tmp_path / "hosts") == [], "no script ran for a provider whose lease is gone"


def test_capacity_error_moves_the_need_to_the_next_provider(tmp_path, start_daemon):
    first = dict(HOSTS_SIM, faults=[{"action": "request", "exit": 69, "times": 1}])
    second = dict(HOSTS_SIM, priority=5, name_prefix="g")
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "hosts", first),
                                 sim_provider(tmp_path, "spare", second)], policy={"cooldown": "60s"})
    d = start_daemon(cfg)
    d.wait_state(lambda s: all(p.description for p in s.providers.values()) and len(s.providers) == 2,
                 "both described")
    d.controller.put_demand(HOSTS)
    p = d.wait_state(lambda s: sum(1 for i in s.instances.values() if i.state == "running") == 3,
                     "3 running hosts")
    failed = [r for r in p.requests.values() if r.provider == "hosts"]
    assert len(failed) == 1 and failed[0].state == "failed" and failed[0].outcome == "capacity"
    assert "69" in failed[0].reason
    assert {i.provider for i in p.instances.values()} == {"spare"}
    rejected = [rej for r in p.decisions for rej in r.decision.rejected if rej.provider == "hosts"]
    assert any(rej.reason.startswith("cooling down until ") for rej in rejected)


BAD_SCRIPTS = {
    "garbage": "echo 'this is not json'",
    "exit1": "echo 'quota exceeded' >&2; exit 1",
    "transient": "echo 'throttled' >&2; exit 75",
    "non_utf8": "printf '\\377\\376{}'",
}


@pytest.mark.parametrize("name", sorted(BAD_SCRIPTS))
def test_a_misbehaving_request_script_is_recorded_and_the_daemon_lives(tmp_path, start_daemon, name):
    real = sim_provider(tmp_path, "hosts", HOSTS_SIM)
    wrapper = tmp_path / "bad-provider"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = request ]; then {BAD_SCRIPTS[name]}; exit 0; fi\n'
        f'exec {real["script"]["path"]} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    real["script"]["path"] = str(wrapper)
    units = sim_provider(tmp_path, "units", UNITS_SIM)
    cfg = make_config(tmp_path, [real, units], policy={"backoff_max": "0.1s"})
    d = start_daemon(cfg)
    d.controller.put_demand(DemandSnapshot(items=[*HOSTS.items, UnitItem(id="d2", resource="vcs", count=2)]))
    p = d.wait_state(lambda s: any(r.provider == "hosts" and r.state == "failed" for r in s.requests.values())
                     and sum(g.count for g in s.grants.values() if g.state == "granted") == 2,
                     "the hosts request failed and the units granted")
    req = next(r for r in p.requests.values() if r.provider == "hosts")
    assert req.attempts >= 2, "a failure that may pass is retried with the same token"
    assert req.reason and "hosts request" in req.reason
    assert p.instances == {}
    assert os.path.exists(tmp_path / "state.db")
