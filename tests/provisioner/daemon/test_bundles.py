"""Bundle items through the live daemon: packed orders become requests, and repeated snapshots order nothing more."""

from __future__ import annotations

import time

import pytest

from messages.demand import BundleItem, DemandSnapshot
from tests.support.daemons import HOSTS_SIM, make_config, sim_list, sim_provider

pytestmark = pytest.mark.slow

#: Ten bundles of 2 CPUs on hosts of 8: three hosts (4 + 4 + 2).
SNAPSHOT = DemandSnapshot(items=[BundleItem(id="j", count=10, resources={"ncpus": 2}, select={"type": "X86_64"})])


def _answer(d, seq: int):
    """The planner's decision for ``j`` answering the snapshot ``seq``, once written."""
    p = d.wait_state(lambda s: any(r.decision.demand_seq == seq for r in s.decisions),
                     f"the decision answering snapshot {seq}")
    return p, next(r.decision for r in p.decisions if r.decision.demand_seq == seq)


def test_a_repeated_bundles_snapshot_orders_nothing_more_before_and_after_the_hosts_join(tmp_path, start_daemon):
    d = start_daemon(make_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM)]))
    c = d.controller
    c.put_demand(SNAPSHOT)
    p = d.wait_state(lambda s: sum(i.state == "running" for i in s.instances.values()) == 3, "3 hosts running")
    (order,) = p.orders.values()
    assert order.order.count == 3 and order.order.bundles == {"j": 10} and not order.order.item_id
    (req,) = p.requests.values()
    assert req.order_id == order.id and req.item_id == "" and req.count == 3, \
        "the owner copied the packed order into its intent: found again through order_id"

    again = c.put_demand(SNAPSHOT)
    p, decision = _answer(d, again.seq)
    assert (decision.need, decision.in_flight, decision.chosen) == (0, 10, [])
    assert len(p.orders) == 1 and len(p.instances) == 3

    for inst in p.instances.values():
        c.post_host_event(inst.name, "joined", time.time())
    d.wait_state(lambda s: all(i.state == "joined" for i in s.instances.values()), "hosts joined")
    # Joined within join_grace: the scheduler's numbers may not show them yet, so they still count.
    third = c.put_demand(SNAPSHOT)
    p, decision = _answer(d, third.seq)
    assert (decision.need, decision.in_flight, decision.chosen) == (0, 10, [])
    assert len(p.orders) == 1 and len(p.requests) == 1
    assert len(sim_list(tmp_path / "hosts")) == 3
