"""Drill: the wall clock steps a day ahead for 6 s while hosts go idle (issue 28, case 3).

NTP after a suspend does this. The daemon's wall clock, as its Python reads
it, is the system's plus an offset the drill writes to a file while the
daemon runs (``tests/support/wallstep``); the monotonic clocks are left
alone, as a real step leaves them. Two joined hosts go idle during the step:
the daemon must give them back about ``idle_time`` after, not a day after,
by their stamps.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from messages.demand import DemandSnapshot, HostItem
from tests.support.daemons import wait_until
from tests.support.drills import Cluster

pytestmark = pytest.mark.slow

WALLSTEP = Path(__file__).resolve().parents[1] / "support" / "wallstep"
DAY = 86_400
IDLE_TIME = 5.0


@pytest.fixture
def stepped(tmp_path):
    c = Cluster(tmp_path, idle_time=f"{IDLE_TIME:.0f}s")
    yield c
    c.close()
    print(c.tails())


def test_hosts_that_went_idle_during_a_day_long_clock_step_are_returned_after_idle_time(stepped, tmp_path):
    offset = tmp_path / "wall-offset"
    offset.write_text("0\n")
    path = os.pathsep.join(filter(None, [str(WALLSTEP), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, "WALLSTEP_FILE": str(offset)}
    daemon = stepped.start("a", env=env)
    stepped.c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=2)]))
    wait_until(lambda: sum(i.state == "running" for i in stepped.state().instances.values()) == 2, timeout=60,
               what="two hosts running")
    stepped.join_running()
    wait_until(lambda: sum(i.state == "joined" for i in stepped.state().instances.values()) == 2, timeout=30,
               what="two hosts joined")
    stepped.c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0)]))
    offset.write_text(f"{DAY}\n")  # the daemon's wall clock is now a day ahead
    stepped.idle_all()
    wait_until(lambda: sum(i.state == "idle" for i in stepped.state().instances.values()) == 2, timeout=30,
               what="two hosts idle, during the step")
    time.sleep(6)  # the step lasts 6 s: the fault itself, not a wait for the daemon
    offset.write_text("0\n")
    back = time.monotonic()
    wait_until(lambda: all(i.state in ("return_planned", "returning", "returned")
                           for i in stepped.state().instances.values()), timeout=IDLE_TIME + 40,
               what="the idle hosts to be given back after idle_time, not a day later")
    assert time.monotonic() - back < IDLE_TIME + 40
    assert "the wall clock is +86" in daemon.text(), "the step was not noticed"
    assert "given up" not in daemon.text(), "the step ended the daemon's leases"
    wait_until(lambda: all(i.state == "returned" for i in stepped.state().instances.values()), timeout=30,
               what="every host returned")
    stepped.check(hosts_wanted=2)
