"""Unchanged decisions write nothing, however many items the demand holds."""

from __future__ import annotations

from messages.demand import DemandSnapshot, HostItem
from messages.facts import make_fact
from policy.catalog import Catalog
from policy.rounds import outcome, propose
from policy.settings import PlanSettings
from state.projection import Projection
from tests.support.policy import T0, hosts


def _round(p: Projection, demand: DemandSnapshot, now: float) -> list:
    proposal = propose(demand, p, now, PlanSettings(), 600.0, Catalog(p.providers))
    written = outcome(proposal, proposal.orders, [], p.decided)
    for i, (provider, payload) in enumerate(written):
        p.apply(make_fact(payload, provider=provider, now=now).model_copy(update={"seq": p.seq + 1}))
    return [payload for _, payload in written if payload.kind == "decision"]


def test_a_steady_demand_of_many_items_writes_its_decisions_once():
    """Past 1,000 items the decisions were compared with the last 1,000 only: 2,000 items wrote ~1,000 a round."""
    p = Projection()
    p.providers["gpu"] = hosts("gpu", ncpus=8)
    # Nothing fits (no template has 64 cores): every round decides the same for every item.
    demand = DemandSnapshot(seq=1, items=[HostItem(id=f"job-{i}", count=1, select={"ncpus": ">=64"})
                                          for i in range(2_500)])
    assert len(_round(p, demand, T0)) == 2_500
    for k in range(1, 4):
        assert _round(p, demand, T0 + 60 * k) == [], f"round {k + 1} wrote decisions that did not change"
