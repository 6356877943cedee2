"""The BudgetActor clamps the planner's orders to the global caps."""

from __future__ import annotations

import pytest

from actors.budget import BudgetActor
from config.models import BudgetConfig
from messages.commands import Review, Reviewed
from messages.description import ProviderDescription, Template
from messages.facts import InstanceSeen, Order, ProviderDescribed, RequestPlanned, make_fact
from tests.support.facts import shared_of
from tests.support.fakes import Inbox


def _facts():
    desc = ProviderDescription(name="p", kind="hosts", cost_per_hour=1.0,
                               templates=[Template(id="t", max_number=100, cost_per_hour=2.0)])
    rows = [make_fact(ProviderDescribed(description=desc), provider="p"),
            make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=3), provider="p",
                      fact_id="r1"),
            make_fact(InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running"), provider="p")]
    return [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(rows)]


@pytest.fixture
def review():
    refs = []

    def run(budget: BudgetConfig, orders):
        ref = BudgetActor.start(budget, shared_of(_facts()))
        refs.append(ref)
        reply = Inbox()
        ref.tell(Review(orders=orders, reply_to=reply))
        return reply.get(Reviewed)

    yield run
    for ref in refs:
        ref.stop()


ORDER = Order(action="request", supply="hosts", item_id="d", template="t", count=10)


def test_host_cap_counts_held_and_in_flight(review):
    # 1 instance seen + 2 more of r1 on their way = 3 held; cap 8 leaves 5.
    out = review(BudgetConfig(max_hosts=8), [("p", ORDER)])
    assert [(p, o.count) for p, o in out.orders] == [("p", 5)]
    assert out.clamps and out.clamps[0][0] == "max_hosts" and "from 10 to 5" in out.clamps[0][1]


def test_cost_cap_uses_the_template_price(review):
    # 3 hosts at 2.0/h run at 6.0/h; a cap of 15/h leaves room for 4 more at 2.0/h.
    out = review(BudgetConfig(max_cost_per_hour=15.0), [("p", ORDER)])
    assert [o.count for _, o in out.orders] == [4]
    assert out.clamps[0][0] == "max_cost_per_hour"


def test_the_tighter_cap_wins_and_exhausted_caps_drop_the_order(review):
    out = review(BudgetConfig(max_hosts=20, max_cost_per_hour=10.0), [("p", ORDER), ("p", ORDER)])
    assert [o.count for _, o in out.orders] == [2]
    assert [c[0] for c in out.clamps] == ["max_cost_per_hour", "max_cost_per_hour"]


def test_no_caps_no_clamps(review):
    out = review(BudgetConfig(), [("p", ORDER)])
    assert [o.count for _, o in out.orders] == [10] and out.clamps == []


def test_spend_this_period_stops_new_orders_once_reached():
    """Costs so far accrue from the facts' times; the clock is injected, nothing sleeps."""
    t0 = 1_773_576_000.0  # 2026-03-15 12:00 UTC: the month began 14.5 days earlier
    desc = ProviderDescription(name="p", kind="hosts", templates=[Template(id="t", max_number=100, cost_per_hour=2.0)])
    rows = [make_fact(ProviderDescribed(description=desc), provider="p", now=t0),
            make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1), provider="p",
                      fact_id="r1", now=t0),
            make_fact(InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running", launched_at=t0),
                      provider="p", now=t0)]
    facts = [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(rows)]
    budget = BudgetConfig.model_validate({"max_spend": {"amount": 5.0, "per": "month"}})
    for hours, expected in ((2.0, [10]), (3.0, [])):  # 4.0 spent, then 6.0
        reply = Inbox()
        ref = BudgetActor.start(budget, shared_of(facts), clock=lambda h=hours: t0 + h * 3600)
        try:
            ref.tell(Review(orders=[("p", ORDER)], reply_to=reply))
            out = reply.get(Reviewed)
        finally:
            ref.stop()
        assert [o.count for _, o in out.orders] == expected
        assert [c[0] for c in out.clamps] == ([] if expected else ["max_spend"])
