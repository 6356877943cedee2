"""Failover: the owner is killed with SIGKILL; how long until the standby acts in its place.

Two daemon processes on one SQLite controller, set up as the failover drill
does (tests/drills/harness.py), with a request in flight when the owner dies.
"Acting" means the standby holds every lease (its ``lease_acquired`` facts
stamp when) and has run a script for each provider it took over (the
script's wrapper stamps when, in calls.log), so nothing in the daemon is
timed. Each takeover is followed by a fresh standby and another kill; the
figure is the slowest takeover.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from messages.demand import DemandSnapshot, HostItem, UnitItem
from tests.support.daemons import wait_until
from tests.support.drills import Cluster, Daemon

#: The lease TTL of the bench: the target is TTL + 1 s.
TTL = 2.0
DEMAND = DemandSnapshot(items=[HostItem(id="d1", count=4), UnitItem(id="d2", resource="vcs", count=3)])


def takeover_seconds(tmp: Path, smoke: bool) -> float:
    """Seconds from kill -9 of the owner until the standby acts: the worst of three takeovers.

    Smoke mode: one takeover, with a TTL of 1 s to keep it short.
    """
    cluster = Cluster(tmp, ttl=1.0 if smoke else TTL)
    try:
        names = ["a", "b"] if smoke else ["a", "b", "c", "d"]
        owner = cluster.start(names[0])
        wait_until(lambda: _holds_all(cluster, owner.instance), timeout=30, what="the first owner to hold every lease")
        cluster.c.put_demand(DEMAND)
        worst = 0.0
        for name in names[1:]:
            standby = cluster.start(name)
            wait_until(lambda: any(r.state in ("submitted", "running") for r in cluster.state().requests.values())
                       or _met(cluster), timeout=30, what="a request in flight")
            _wait_started(standby)
            worst = max(worst, _kill_and_time(cluster, owner, standby))
            owner = standby
        return worst
    finally:
        cluster.close()


def _wait_started(d: Daemon) -> None:
    wait_until(lambda: f"daemon {d.instance} started" in d.text(), timeout=30, what=f"standby {d.instance} to start")


def _kill_and_time(cluster: Cluster, owner: Daemon, standby: Daemon) -> float:
    # Read before the kill: with a short TTL the standby may take a lease before the killed owner is reaped.
    before = cluster.c.last_seq()
    owner.signal(signal.SIGKILL)
    killed = time.time()
    owner.proc.wait(timeout=10)
    limit = cluster.ttl + 10

    def acquired() -> dict[str, float]:
        """When the standby stamped each lease it took; the stamp follows the grant, not with it."""
        return {f.payload.name: f.time for f in cluster.c.read(after=before)
                if f.kind == "lease_acquired" and f.payload.holder == standby.instance}

    wait_until(lambda: len(acquired()) == len(cluster.sims) + 1, timeout=limit,
               what="the standby to take and stamp every lease")
    held = max(acquired().values())
    first: dict[str, float] = {}

    def ran_everywhere() -> bool:
        for provider in cluster.sims:
            runs = [at for who, _, _, at in cluster.calls(provider) if who == standby.instance and at >= killed]
            if runs:
                first[provider] = min(runs)
        return len(first) == len(cluster.sims)

    wait_until(ran_everywhere, timeout=limit, what="the standby to run a script for every provider")
    return max(held, *first.values()) - killed


def _holds_all(cluster: Cluster, instance: str) -> bool:
    leases = [lease for lease in cluster.c.leases.all() if not lease.name.startswith("instance:")]
    return len(leases) == len(cluster.sims) + 1 and all(lease.holder == instance for lease in leases)


def _met(cluster: Cluster) -> bool:
    p = cluster.state()
    running = sum(1 for i in p.instances.values() if i.state == "running")
    return running == 4
