"""Drill 1: kill the daemon at every failpoint, restart it, let it converge; nothing leaks, nothing doubles."""

from __future__ import annotations

import signal

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from persistence.failpoints import POINTS
from tests.support.daemons import wait_until
from tests.support.drills import Cluster

pytestmark = pytest.mark.slow

#: Journal points fire on the Nth commit, so the kill lands mid-flight rather than at the first lease fact.
HIT = {"journal.before_commit": 8, "journal.mid_batch": 8, "journal.after_commit": 8}


def run_scenario(cluster: Cluster, failpoint: str) -> None:
    """3 hosts and 2 license units wanted, used, then given back, with one kill on the way."""
    daemon = cluster.start("a", failpoints=f"{failpoint}@{HIT.get(failpoint, 1)}")
    c = cluster.c
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=3), UnitItem(id="d2", resource="vcs", count=2)]))
    phase = "get"
    restarted = False

    def step() -> bool:
        nonlocal daemon, phase, restarted
        if not daemon.alive():
            assert not restarted, "a daemon without failpoints died:\n" + daemon.text()[-3000:]
            assert daemon.proc.returncode == -signal.SIGKILL
            assert f"failpoint {failpoint}:" in daemon.text()
            daemon = cluster.start("a")
            restarted = True
        p = cluster.state()
        running = [i for i in p.instances.values() if i.state == "running"]
        granted = sum(g.count for g in p.grants.values() if g.state == "granted")
        if phase == "get" and len(running) == 3 and granted == 2:
            cluster.join_running()
            c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0), UnitItem(id="d2", resource="vcs",
                                                                                    count=0)]))
            phase = "give back"
        if phase == "give back":
            cluster.idle_all()
            done = p.instances and all(i.state == "returned" for i in p.instances.values()) and all(
                g.state == "returned" for g in p.grants.values())
            return bool(done and restarted)
        return False

    wait_until(step, timeout=60, what=f"convergence after a kill at {failpoint}")
    cluster.check(hosts_wanted=3, units_wanted=2)


@pytest.mark.parametrize("failpoint", sorted(POINTS))
def test_crash_at_failpoint_then_converge(cluster, failpoint):
    run_scenario(cluster, failpoint)
