"""Drill 1 on etcd: two daemon processes share one etcd; the owner dies or freezes, the standby finishes.

The daemons are real ``provisioner run`` processes with the simulated
clouds (``tests.support.drills``), and every drill ends with the durability
invariants: the clouds hold exactly what the facts say, nothing was made twice.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Iterator

import pytest

from tests.support import drills as drills
from tests.support.daemons import wait_until
from tests.support.drills import Cluster as Drill
from tests.support.etcd.cluster import Cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def drill(tmp_path, etcd_cluster: Cluster) -> Iterator[Drill]:
    d = Drill(tmp_path, url=etcd_cluster.url(f"drill-{uuid.uuid4().hex}"))
    yield d
    d.close()
    print(d.tails())


def test_kill_9_the_owner_and_the_standby_takes_over_within_ttl_plus_1s(drill: Drill) -> None:
    a = drill.start("a")
    a.wait(lambda: drills.owned_by(drill, "a") == drills.ROLES, "a to own everything")
    b = drill.start("b")
    b.wait(lambda: "daemon b started" in b.text(), "b to start")  # a standby, not a process still importing
    drill.c.put_demand(drills.DEMAND)
    wait_until(lambda: any(r.state in ("submitted", "running") for r in drill.state().requests.values()),
               what="a request in flight")
    a.signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: drills.owned_by(drill, "b") == drills.ROLES, timeout=drill.ttl + 5,
               what="b to take over")
    took_over = time.monotonic() - killed
    print(f"etcd failover: the standby held every role {took_over:.2f}s after kill -9 (TTL {drill.ttl:g}s)")
    assert took_over <= drill.ttl + 1.0, f"takeover took {took_over:.2f}s, TTL is {drill.ttl}s"
    wait_until(lambda: drills.met(drill), what="the standby to meet the demand")
    drill.check(hosts_wanted=4, units_wanted=3)
    assert b.alive()


def test_a_frozen_owner_wakes_fenced_out_and_acts_no_more(drill: Drill) -> None:
    drills.pause_the_owner(drill)


def test_a_second_process_with_the_same_instance_id_waits_and_the_demand_is_met_once(drill: Drill) -> None:
    drills.same_id_twice(drill)


def test_a_daemon_started_before_its_etcd_waits_for_it(tmp_path) -> None:
    """A host that boots the daemon before etcd is up: it says it waits, then serves, with no restart."""
    etcd = Cluster()
    try:
        drill = Drill(tmp_path, url=etcd.url("late"))
        try:
            a = drill.start("a")
            a.wait(lambda: "controller unavailable" in a.text(), "a to say it waits for etcd")
            assert a.alive(), a.text()
            etcd.start()
            a.wait(lambda: drills.owned_by(drill, "a") == drills.ROLES, "a to own everything once etcd is up")
            assert a.alive()
        finally:
            drill.close()
            print(drill.tails())
    finally:
        etcd.stop()
