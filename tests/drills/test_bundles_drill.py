"""Drill: kill -9 between a packed order and its request; the restarted daemon packs nothing more."""

from __future__ import annotations

import signal

import pytest

from messages.demand import BundleItem, DemandSnapshot
from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow

#: Ten bundles of 2 CPUs on the drills' 8-CPU hosts: one packed order of three hosts (4 + 4 + 2).
SNAPSHOT = DemandSnapshot(items=[BundleItem(id="j", count=10, resources={"ncpus": 2}, select={"type": "X86_64"})])


def _packed(p) -> list:
    return [o for o in p.orders.values() if o.order.loads]


@pytest.mark.parametrize("failpoint,intents", [("request.before_intent", 0), ("request.after_intent", 1)])
def test_a_kill_between_order_and_request_does_not_pack_the_bundles_again(cluster, failpoint, intents):
    daemon = cluster.start("a", failpoints=failpoint)
    cluster.c.put_demand(SNAPSHOT)
    assert daemon.wait_dead(timeout=30) == -signal.SIGKILL
    assert f"failpoint {failpoint}:" in daemon.text()
    p = cluster.state()
    (order,) = _packed(p)
    assert order.order.count == 3 and order.order.bundles == {"j": 10}
    assert len(p.requests) == intents, "the kill landed between the order and its request's call"

    cluster.start("a")
    wait_until(lambda: sum(i.state == "running" for i in cluster.state().instances.values()) == 3, timeout=60,
               what="the restarted daemon to carry the order out")
    # The scheduler repeats its snapshot: the restarted planner counts the bundles on the order's hosts.
    again = cluster.c.put_demand(SNAPSHOT)
    wait_until(lambda: any(r.decision.demand_seq == again.seq for r in cluster.state().decisions), timeout=30,
               what="the restarted planner's decision on the repeated snapshot")
    p = cluster.state()
    decision = next(r.decision for r in p.decisions if r.decision.demand_seq == again.seq)
    assert (decision.need, decision.in_flight, decision.chosen) == (0, 10, [])
    assert [o.id for o in _packed(p)] == [order.id], "the bundles were packed into more hosts"
    assert [r.order_id for r in p.requests.values()] == [order.id]
    cluster.check(hosts_wanted=3)
