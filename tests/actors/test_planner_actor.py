"""The PlannerActor drives the policy: caps it is given shape its orders; budget cuts show in decisions."""

from __future__ import annotations

import threading

import pytest

from actors.planner import PlannerActor
from config.models import BudgetConfig, PolicyConfig, ProviderConfig
from lease.port import Lease
from messages.commands import Append, CaughtUp, DemandChanged, Review, Reviewed
from messages.demand import HostItem
from messages.facts import Decision, LeaseChanged, ProviderDescribed, make_fact
from tests.support.facts import shared_of
from tests.support.fakes import Inbox
from tests.support.policy import T0, demand, hosts


def _facts(*records):
    rows = []
    for rec in records:
        rows.append(make_fact(ProviderDescribed(description=rec.description), provider=rec.name, now=T0))
        rows.append(make_fact(LeaseChanged(kind="lease_acquired", name=f"provider:{rec.name}", holder="a", fence=1),
                              provider=rec.name, now=T0))
    return [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(rows)]


@pytest.fixture
def planner():
    refs = []

    def start(records, **kw):
        journal, budget = Inbox(), Inbox()
        lease = Lease(name="planner", holder="a", fence=1, expires_at=T0 + 60)
        facts = _facts(*records)
        ref = PlannerActor.start(lease, threading.Event(), journal, budget, Inbox(), PolicyConfig(), shared_of(facts),
                                 clock=lambda: T0, **kw)
        refs.append(ref)
        ref.tell(CaughtUp(seq=len(facts)))
        ref.tell(DemandChanged(demand=demand(HostItem(id="d", count=6), seq=1)))
        return ref, journal, budget

    yield start
    for ref in refs:
        ref.stop()


def test_given_the_caps_the_planner_spills_under_them_itself(planner):
    dear, cheap = hosts("dear", priority=9, price=4.0), hosts("cheap", price=1.0)
    cfg = ProviderConfig.model_validate({"name": "cheap", "kind": "hosts", "script": {"style": "v2", "path": "x"},
                                         "policy": {"rate": {"count": 1, "per": "1m"}}})
    _, _, budget = planner([dear, cheap], caps=BudgetConfig(max_cost_per_hour=10.0), provider_configs=[cfg])
    review = budget.get(Review)
    assert [(p, o.count) for p, o in review.orders] == [("dear", 2), ("cheap", 1)]


def test_an_order_the_budget_cut_is_a_budget_rejection_in_its_decision(planner):
    ref, journal, budget = planner([hosts("a", priority=9), hosts("b")])
    review = budget.get(Review)
    assert [(p, o.count) for p, o in review.orders] == [("a", 6)]
    provider, order = review.orders[0]
    ref.tell(Reviewed(orders=[(provider, order.model_copy(update={"count": 2}))],
                      clamps=[("max_hosts", "a: order for d clamped from 6 to 2")]))
    written = journal.get(Append).facts
    decision = next(f.payload for f in written if isinstance(f.payload, Decision))
    assert [(c.provider, c.count) for c in decision.chosen] == [("a", 2)]
    assert any(r.provider == "a" and r.reason.startswith("budget") for r in decision.rejected)
    assert [f.payload.count for f in written if f.kind == "order"] == [2]
    assert [f.payload.limit for f in written if f.kind == "budget_event"] == ["max_hosts"]


def test_orders_of_unknown_outcome_are_sent_again_unchanged_before_anything_new(planner):
    from messages.commands import Appended, Tick

    ref, journal, budget = planner([hosts("a")])
    review = budget.get(Review)
    ref.tell(Reviewed(orders=review.orders, clamps=[]))
    first = journal.get(Append)
    # The controller could not confirm the commit: it may or may not have happened.
    ref.tell(Appended(tag="plan", error="controller unreachable"))
    ref.tell(Tick(now=T0 + 1_000))
    again = journal.get(Append)
    assert [f.id for f in again.facts] == [f.id for f in first.facts], "the same facts, so a committed copy dedupes"
    assert budget.q.empty(), "no new planning round while the last one's outcome is unknown"
    ref.tell(Appended(tag="plan", accepted=[f.id for f in again.facts]))
    ref.tell(Tick(now=T0 + 2_000))
    assert budget.get(Review).orders, "planning resumes once the write is confirmed"
