"""A persistent provider's health as facts: written on a change only, shown, and planned around."""

from __future__ import annotations

from messages.demand import HostItem
from messages.facts import ProviderAdmin
from owner.effects import Notes
from owner.health import DEGRADED_DESCRIBE_EVERY, DESCRIBE_EVERY, describe_again, health, why_degraded
from policy.planning import PlanSettings, plan
from provisioner.read.views import provider_details
from state.projection import Projection
from tests.support.facts import T0, commit, kinds, projection
from tests.support.policy import demand, view
from tests.support.policy import hosts as offering

WHY = "cannot start: the provider process did not say hello within 30s"


def test_a_change_of_health_is_written_once_and_a_healthy_port_writes_nothing(hosts):
    p = projection("p", [])
    assert not health(p, hosts, "", busy=())
    fx = health(p, hosts, WHY, busy=())
    assert [n.text for n in fx.notes] == [f"provider p: degraded: {WHY}"]
    assert not health(p, hosts, WHY, busy={Notes("health")}), "not twice while the first is being written"
    assert kinds(commit(p, "p", fx, T0 + 1)) == ["provider_degraded"]
    assert p.provider("p").degraded == WHY
    assert not health(p, hosts, WHY, busy=())
    assert kinds(commit(p, "p", health(p, hosts, "", busy=()), T0 + 2)) == ["provider_recovered"]
    assert p.provider("p").degraded == ""


def test_a_degraded_provider_shows_degraded_unless_an_operator_steered_it(hosts):
    p = projection("p", [])
    commit(p, "p", health(p, hosts, WHY, busy=()), T0 + 1)
    (row,) = provider_details(p, [], T0 + 2)
    assert (row["status"], row["status_reason"]) == ("degraded", WHY)
    paused = projection("p", [(None, ProviderAdmin(kind="provider_paused", reason="ops"))])
    commit(paused, "p", health(paused, hosts, WHY, busy=()), T0 + 1)
    (row,) = provider_details(paused, [], T0 + 2)
    assert (row["status"], row["status_reason"]) == ("paused", "ops")


def test_the_planner_orders_elsewhere_while_a_provider_is_degraded():
    provs = {"a": offering("a", priority=9), "b": offering("b")}
    provs["a"].degraded = WHY
    out = plan(demand(HostItem(id="d", count=2)), provs, view(Projection()), T0, PlanSettings())
    assert [(name, o.count) for name, o in out.orders] == [("b", 2)]
    assert {r.provider: r.reason for r in out.decisions[0].rejected}["a"] == f"degraded: {WHY}"


def test_describe_is_asked_again_hourly_sooner_after_failures_and_each_minute_while_they_degrade():
    failed, wait = describe_again((0, ""), ok=True, reason="", backoff_max=600.0)
    assert failed == (0, "") and wait == DESCRIBE_EVERY
    waits = []
    for _ in range(3):
        failed, wait = describe_again(failed, ok=False, reason="timeout", backoff_max=600.0)
        waits.append(wait)
    assert failed == (3, "timeout") and why_degraded("", *failed) == "describe keeps failing: timeout"
    assert waits[0] < waits[1] <= DESCRIBE_EVERY, "backing off after each failure"
    assert waits[2] <= DEGRADED_DESCRIBE_EVERY, "while degraded, at least once a minute"
    assert describe_again(failed, ok=True, reason="", backoff_max=600.0) == ((0, ""), DESCRIBE_EVERY)
