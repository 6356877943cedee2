"""Drill 2: three hosts as network namespaces, a 3-member etcd cluster, provisioners on two hosts.

The owner's host is cut off the network: the standby takes over and finishes
the work; when the link comes back the old owner has stopped acting and what
it still tries to write is refused. Then the etcd leader is killed during a
demand round, and nothing is lost or made twice.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any, Callable, Iterator

import pytest

from lease.port import Lease
from messages.demand import DemandSnapshot, HostItem
from messages.errors import ControllerUnavailable
from persistence.controller import open_controller
from tests.support import drills as drills
from tests.support.controllers import usage
from tests.support.daemons import wait_until
from tests.support.drills import Cluster as Drill
from tests.support.drills import Daemon
from tests.support.etcd import netns
from tests.support.etcd.cluster import Cluster

TTL = 4.0
MORE = DemandSnapshot(items=[*drills.DEMAND.items, HostItem(id="d3", count=3)])

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


class HostDaemon(Daemon):
    """``provisioner run`` on one of the namespace hosts."""

    def __init__(self, drill: Drill, instance: str, run_in: list[str]) -> None:
        self.instance = instance
        self.log = drill.tmp / f"{instance}.log"
        self.proc = subprocess.Popen(
            [*run_in, sys.executable, "-m", "provisioner.cli", "--config", str(drill.config(instance)), "run"],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        drill.procs.append(self)


@pytest.fixture
def network() -> Iterator[netns.Network]:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"drill 2 needs network namespaces: {reason}")
    network = netns.Network(3).create()
    yield network
    network.destroy()


@pytest.fixture
def etcd(network: netns.Network) -> Iterator[Cluster]:
    cluster = Cluster(size=3, hosts=network.addresses, prefixes=[network.run_in(i) for i in range(3)])
    yield cluster.start()
    cluster.stop()


@pytest.fixture
def drill(tmp_path, etcd: Cluster) -> Iterator[Drill]:
    # Short calls: an unreachable member costs 0.4 s, well within the lease's renewal slack.
    # The owner's host is listed last, as a client elsewhere would; its member is cut off with it.
    members = [*etcd.members[1:], etcd.members[0]]
    url = etcd.url("drill", members)
    d = Drill(tmp_path, ttl=TTL, url=url + "?timeout=0.4")
    # The test itself watches with patience: an election may hold a read up for a second or two.
    d.c.close()
    d.c = open_controller(url + "?timeout=5")
    yield d
    d.close()
    print(d.tails())


def _meanwhile(check: Callable[[], Any]) -> Callable[[], Any]:
    """An observation that counts as "not yet" while etcd elects a new leader."""
    def probe() -> Any:
        try:
            return check()
        except ControllerUnavailable:
            return False
    return probe


def _hosts(drill: Drill, state: str) -> int:
    return sum(1 for i in drill.state().instances.values() if i.state == state)


def test_cut_the_owner_off_then_lose_the_etcd_leader(network: netns.Network, etcd: Cluster, drill: Drill) -> None:
    a = HostDaemon(drill, "a", network.run_in(0))
    wait_until(lambda: drills.owned_by(drill, "a") == drills.ROLES, what="a to own everything")
    b = HostDaemon(drill, "b", network.run_in(1))
    drill.c.put_demand(drills.DEMAND)
    wait_until(lambda: any(r.state in ("submitted", "running") for r in drill.state().requests.values()),
               what="a request in flight")

    # The cut is not also an etcd election: losing the leader is drilled on its own below.
    etcd.move_leader(etcd.members[1])
    network.cut(0)
    cut = time.monotonic()
    wait_until(_meanwhile(lambda: drills.owned_by(drill, "b") == drills.ROLES), timeout=TTL + 10,
               what="b to take over from the cut-off owner")
    took_over = time.monotonic() - cut
    print(f"etcd partition: the standby held every role {took_over:.2f}s after the owner's link was cut "
          f"(TTL {TTL:g}s)")
    taken = drill.c.last_seq()
    fences = {lease.name: lease.fence for lease in drill.c.leases.all()}
    wait_until(lambda: a.text().count("given up") >= 3, timeout=10, what="a to stop acting without its leases")
    assert "controller unreachable" in a.text(), "a says why it stopped"
    wait_until(_meanwhile(lambda: drills.met(drill)), timeout=60, what="the standby to meet the demand")

    network.restore(0)
    restored = time.time()
    settle = time.monotonic()
    wait_until(lambda: time.monotonic() - settle > 3.0, what="a to reconnect and try whatever it had queued")
    late = [f for f in drill.c.read(after=taken) if f.lease in fences and f.fence != fences[f.lease]]
    assert not late, f"writes under a lost fence were accepted: {[(f.kind, f.lease, f.fence) for f in late]}"
    for provider in ("hosts", "units"):
        after = [row for row in drill.calls(provider) if row[0] == "a" and row[3] >= restored]
        assert not after, f"a ran scripts after its link came back, without its lease: {after}"
    assert {lease.holder for lease in drill.c.leases.all() if lease.name in drills.ROLES} == {"b"}
    old = [f.payload for f in drill.c.read() if f.kind == "lease_acquired" and f.payload.holder == "a"]
    assert {grant.name for grant in old} == drills.ROLES
    for grant in old:
        stale = Lease(name=grant.name, holder="a", fence=grant.fence, expires_at=0)
        [refused] = drill.c.append([usage(1, lease=stale)]).refused
        assert f"under fence {fences[grant.name]}, fact has {grant.fence}" in refused.reason
    assert a.alive() and b.alive()
    drill.check(hosts_wanted=4, units_wanted=3)

    # A new demand round; the etcd leader dies while its requests are in flight.
    drill.c.put_demand(MORE)
    wait_until(lambda: any(r.item_id == "d3" for r in drill.state().requests.values()),
               timeout=20, what="the new round's request in flight")
    leader = etcd.leader()
    leader.kill()
    print(f"etcd partition: killed the etcd leader {leader.name} during the demand round")
    wait_until(_meanwhile(lambda: _hosts(drill, "running") == 7), timeout=60,
               what="the round to finish on two etcd members")
    drill.check(hosts_wanted=7, units_wanted=3)
    assert b.alive()
    b.signal(signal.SIGTERM)
    assert b.wait_dead() == 0, "the standby stops cleanly on the surviving members"
