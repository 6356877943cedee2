"""Drill 4: a seeded run of demand changes and host events with kills at random moments.

After the storm, demand drops to nothing and every host goes idle; the system
must converge to holding nothing, with the clouds and the facts agreeing.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.states import REQUEST
from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow

SEEDS = [int(s) for s in os.environ.get("CHAOS_SEEDS", "11,23").split(",")]
STORM_SECONDS = 12.0


@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_chaos_converges_with_nothing_leaked_or_unknown(cluster, seed):
    rng = random.Random(seed)
    daemons = {"a": cluster.start("a"), "b": cluster.start("b")}
    c = cluster.c
    kills = 0
    end = time.monotonic() + STORM_SECONDS
    while time.monotonic() < end:
        roll = rng.random()
        if roll < 0.35:
            c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=rng.randint(0, 4)),
                                               UnitItem(id="d2", resource="vcs", count=rng.randint(0, 3))]))
        elif roll < 0.6:
            cluster.join_running()
        elif roll < 0.75:
            cluster.idle_all()
        elif roll < 0.9:
            # Kill one daemon at a random moment, and bring it back.
            name = rng.choice(sorted(daemons))
            daemons[name].signal(signal.SIGKILL)
            daemons[name].wait_dead(10)
            daemons[name] = cluster.start(name)
            kills += 1
        time.sleep(rng.uniform(0.05, 0.6))  # the storm's own pace, not a wait for the system
    assert kills > 0

    # Calm: nothing is wanted any more; every host finishes its work.
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0), UnitItem(id="d2", resource="vcs", count=0)]))

    def calm() -> bool:
        cluster.join_running()
        cluster.idle_all()
        p = cluster.state()
        hosts_done = all(i.state in ("returned", "lost", "failed") for i in p.instances.values())
        grants_done = all(g.state in ("returned", "failed") for g in p.grants.values())
        # A request still open may yet bring a host the facts learn of at its next status: not calm yet.
        requests_done = all(r.state in REQUEST.terminal for r in p.requests.values())
        return hosts_done and grants_done and requests_done

    wait_until(calm, timeout=60, what="everything given back after the storm")
    cluster.check()
    held = [m for m in cluster.sim_state("hosts")["machines"].values() if m["state"] in ("pending", "running")]
    assert held == [], "nothing is left running at the provider"
