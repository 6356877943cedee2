"""Sizing: caps, rate limits, budgets and spill-over, with the reason for every rejection."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from messages.demand import HostItem
from messages.facts import InstanceSeen, Order, RequestPlanned
from policy.budget import BudgetLimits, period_start
from policy.limits import ProviderLimits
from policy.planning import PlanSettings, plan
from policy.supply import in_flight
from state.projection import Projection
from tests.support.policy import T0, demand, failed_request, feed, hosts, view

D = demand(HostItem(id="d", count=6))


def _orders(out):
    return [(p, o.count) for p, o in out.orders]


def _reasons(out):
    return {r.provider: r.reason for r in out.decisions[0].rejected}


def test_a_rate_limit_counts_recent_orders_and_spills_the_rest():
    p = Projection()
    feed(p, "a", Order(action="request", supply="hosts", item_id="old", template="a-t", count=3), now=T0 - 30)
    provs = {"a": hosts("a", priority=9), "b": hosts("b")}
    cfg = PlanSettings(providers={"a": ProviderLimits(rate_count=4, rate_per=60)})
    out = plan(D, provs, view(p), T0, cfg)
    assert _orders(out) == [("a", 1), ("b", 5)]
    out = plan(D, provs, view(p), T0 + 31, cfg)
    assert _orders(out)[0] == ("a", 4), "the old order left the window"
    full = PlanSettings(providers={"a": ProviderLimits(rate_count=3, rate_per=60)})
    assert _reasons(plan(D, provs, view(p), T0, full))["a"] == "rate: at most 3 per 60s"


def test_a_provider_cost_cap_spills_to_the_next():
    provs = {"a": hosts("a", priority=9, price=2.0), "b": hosts("b", price=1.0)}
    cfg = PlanSettings(providers={"a": ProviderLimits(max_cost_per_hour=5.0)})
    assert _orders(plan(D, provs, view(Projection()), T0, cfg)) == [("a", 2), ("b", 4)]


def test_global_cost_cap_spills_to_a_cheaper_provider_and_counts_hold_the_line():
    provs = {"dear": hosts("dear", priority=9, price=4.0), "cheap": hosts("cheap", price=1.0)}
    cfg = PlanSettings(budget=BudgetLimits(max_cost_per_hour=10.0))
    out = plan(D, provs, view(Projection()), T0, cfg)
    assert _orders(out) == [("dear", 2), ("cheap", 2)]
    assert out.decisions[0].note == "2 could not be placed"
    cfg = PlanSettings(budget=BudgetLimits(max_hosts=3))
    out = plan(D, provs, view(Projection()), T0, cfg)
    assert _orders(out) == [("dear", 3)] and _reasons(out)["cheap"] == "budget: max_hosts"


def test_a_clamp_keeps_the_providers_granularity():
    provs = {"a": hosts("a", min_request=2, step=2)}
    out = plan(D, provs, view(Projection()), T0, PlanSettings(budget=BudgetLimits(max_hosts=5)))
    assert _orders(out) == [("a", 4)], "5 allowed, but the provider takes 2, 4, 6 ..."


def test_spend_so_far_this_period_stops_new_orders():
    p = Projection()
    feed(p, "a", RequestPlanned(action="request", supply="hosts", template="a-t", count=1), ids=["r1"], now=T0)
    feed(p, "a", InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running", launched_at=T0,
                              template="a-t"), now=T0)
    provs = {"a": hosts("a", price=10.0, min_hold_s=3600)}
    start = period_start(T0, "month")
    cfg = PlanSettings(budget=BudgetLimits(max_spend=35.0))
    # Held 2 h since launch: 20 spent; a new host commits at least its 1 h min hold: room for 1.
    out = plan(D, provs, view(p), T0 + 7200, cfg)
    assert T0 > start and _orders(out) == [("a", 1)]
    out = plan(D, provs, view(p), T0 + 4 * 3600, cfg)
    assert _orders(out) == [] and _reasons(out)["a"] == "budget: max_spend"


def test_period_start_is_the_utc_day_week_and_month():
    now = datetime(2026, 3, 19, 15, 30, tzinfo=UTC).timestamp()  # a Thursday
    assert period_start(now, "day") == datetime(2026, 3, 19, tzinfo=UTC).timestamp()
    assert period_start(now, "week") == datetime(2026, 3, 16, tzinfo=UTC).timestamp()
    assert period_start(now, "month") == datetime(2026, 3, 1, tzinfo=UTC).timestamp()
    with pytest.raises(ValueError, match="day, week or month"):
        period_start(now, "year")


def test_rejections_name_cooldown_paused_drained_and_capacity():
    p = Projection()
    failed_request(p, "cool", "cool-t", "r1", at=T0 - 10)
    paused, drained = hosts("paused", priority=9), hosts("drained", priority=9)
    paused.status, drained.status, drained.status_reason = "paused", "drained", "maintenance"
    provs = {"cool": hosts("cool", priority=9), "paused": paused, "drained": drained,
             "full": hosts("full", priority=5, max_number=0), "small": hosts("small", ncpus=2)}
    out = plan(demand(HostItem(id="d", count=2, select={"ncpus": ">=8"})), provs, view(p), T0,
               PlanSettings(cooldown=60))
    reasons = _reasons(out)
    assert re.fullmatch(r"cooling down until \d\d:\d\d:\d\d UTC after capacity error on cool-t", reasons["cool"])
    assert reasons["paused"] == "paused" and reasons["drained"] == "drained: maintenance"
    assert reasons["full"] == "capacity: room for 0" and reasons["small"] == "ncpus 2 < 8"
    assert out.orders == [] and out.decisions[0].note == "2 could not be placed"
    assert plan(demand(HostItem(id="d", count=2, select={"ncpus": ">=8"})), provs, view(p), T0 + 1,
                PlanSettings(cooldown=60)).decisions == out.decisions, "reasons stay the same between rounds"


def test_an_unknown_outcome_holds_the_need_until_request_timeout():
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="timeout", count=4)
    v = view(p)
    assert in_flight(v, T0 + 10, join_grace=30, order_timeout=600) == {"d": 4}
    assert _orders(plan(demand(HostItem(id="d", count=4)), {"b": hosts("b")}, v, T0 + 10, PlanSettings())) == []
    assert in_flight(v, T0 + 601, join_grace=30, order_timeout=600) == {}
    # Other failures are known outcomes: nothing is on its way.
    q = Projection()
    failed_request(q, "a", "a-t", "r1", at=T0, outcome="capacity", count=4)
    assert in_flight(view(q), T0 + 10, join_grace=30, order_timeout=600) == {}


def test_an_order_counts_while_its_owner_may_still_take_it():
    p = Projection()
    feed(p, "a", Order(action="request", supply="hosts", item_id="d", template="a-t", count=2), now=T0)
    assert in_flight(view(p), T0 + 600, join_grace=30, order_timeout=600) == {"d": 2}
    assert in_flight(view(p), T0 + 600.5, join_grace=30, order_timeout=600) == {}
