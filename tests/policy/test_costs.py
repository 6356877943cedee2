"""Costs so far: launch and return times times price, per second or per billed unit."""

from __future__ import annotations

import pytest

from messages.facts import GrantChanged, InstanceChanged, RequestPlanned
from policy.costs import accrued, costs
from state.projection import Projection
from tests.support.policy import T0, feed, hosts, idle_host, units


def test_per_second_and_per_billed_unit():
    assert accrued(0, 1800, 2.0) == pytest.approx(1.0)
    assert accrued(0, 1800, 2.0, billing_unit=3600) == pytest.approx(2.0), "a started hour is paid in full"
    assert accrued(0, 3601, 2.0, billing_unit=3600) == pytest.approx(4.0)
    assert accrued(0, 0, 2.0, billing_unit=3600) == 0.0
    assert accrued(0, 7200, 1.0, since=3600) == pytest.approx(1.0), "only what accrued since counts"


def test_costs_per_provider_and_total_from_the_facts():
    p = Projection()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)
    idle_host(p, "a", "m2", "a-t", launched=T0, idle_at=T0 + 10)
    feed(p, "a", InstanceChanged(kind="instance_return_planned", machine_id="m2", state="return_planned"),
         InstanceChanged(kind="instance_returning", machine_id="m2", state="returning"),
         InstanceChanged(kind="instance_returned", machine_id="m2", state="returned"), now=T0 + 1800)
    feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=3), ids=["g1"], now=T0)
    feed(p, "u", GrantChanged(kind="grant_granted", grant_id="g1", resource="vcs", state="granted", count=3),
         now=T0 + 600)
    provs = {"a": hosts("a", price=2.0), "u": units("u", price=0.5), "idle": hosts("idle")}
    now = T0 + 3600
    out = costs(provs, p.instances, p.grants, now)
    # m1: 1 h at 2.0; m2: 0.5 h at 2.0; 3 units for 50 min at 0.5
    assert out.by_provider["a"].cost_so_far == pytest.approx(3.0)
    assert out.by_provider["u"].cost_so_far == pytest.approx(3 * 0.5 * 3000 / 3600)
    assert out.by_provider["idle"].cost_so_far == 0.0
    assert out.total == pytest.approx(3.0 + 1.25)
    assert out.by_provider["a"].cost_per_hour_now == 2.0, "only m1 is still held"
    assert out.cost_per_hour_now == pytest.approx(2.0 + 1.5)
    hourly = costs(provs, p.instances, p.grants, now, billing_units={"a": 3600})
    assert hourly.by_provider["a"].cost_so_far == pytest.approx(4.0), "m2's half hour is billed as a whole one"


def test_a_partial_return_accrues_each_period_at_the_count_held_then():
    p = Projection()
    feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=6), ids=["g1"], now=T0)
    feed(p, "u", GrantChanged(kind="grant_granted", grant_id="g1", resource="vcs", state="granted", count=6), now=T0)
    for kind, state in (("grant_return_planned", "return_planned"), ("grant_returning", "returning")):
        feed(p, "u", GrantChanged(kind=kind, grant_id="g1", resource="vcs", state=state, count=4), now=T0 + 1800)
    provs = {"u": units("u", price=1.0)}
    during = costs(provs, p.instances, p.grants, T0 + 3600)
    assert during.by_provider["u"].cost_so_far == pytest.approx(6.0), "units on their way back are still paid"
    feed(p, "u", GrantChanged(kind="grant_part_returned", grant_id="g1", resource="vcs", state="granted", count=4),
         now=T0 + 3600)
    now = T0 + 7200
    out = costs(provs, p.instances, p.grants, now)
    # 6 units for the first hour, then 2 for the second.
    assert out.by_provider["u"].cost_so_far == pytest.approx(6.0 + 2.0)
    assert out.by_provider["u"].cost_per_hour_now == pytest.approx(2.0)
    assert costs(provs, p.instances, p.grants, now, since=T0 + 3600).total == pytest.approx(2.0)
    # Billed per started hour, each unit from the grant's start: the 4 given back at 1 h pay one hour,
    # the one given back 30 s later two, the last one (held for 2 h 1 s) three.
    feed(p, "u", GrantChanged(kind="grant_part_returned", grant_id="g1", resource="vcs", state="granted", count=1),
         now=T0 + 3630)
    hourly = costs(provs, p.instances, p.grants, now + 1, billing_units={"u": 3600})
    assert p.grants["g1"].count == 1
    assert hourly.by_provider["u"].cost_so_far == pytest.approx(4 * 1 + 1 * 2 + 1 * 3)
