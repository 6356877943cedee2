"""The scheduler's view of its hosts corrects lost host events, edge by edge."""

from __future__ import annotations

from messages.demand import SupplyHost, SupplySnapshot
from messages.facts import InstanceChanged, InstanceSeen
from owner.supply import Unlisted, correct
from tests.support.facts import T0, commit, projection
from tests.support.owners import settings

BUSY = [(None, InstanceSeen(machine_id="m", name="node-1", state="running")),
        (None, InstanceChanged(kind="instance_joined", machine_id="m", state="joined")),
        (None, InstanceChanged(kind="instance_busy", machine_id="m", state="busy"))]


def view(*hosts: tuple[str, str], at: float = T0 + 100) -> SupplySnapshot:
    return SupplySnapshot(seq=1, time=at, hosts=[SupplyHost(name=n, state=st) for n, st in hosts])


def test_a_host_the_view_lists_idle_is_idle_whatever_the_last_event_said(hosts):
    """Its idle event was lost (the demo stopped while it was busy): it stayed busy, and billed, for ever."""
    p = projection("p", BUSY)
    fx, _ = correct(p, hosts, view(("node-1", "idle")), T0 + 100, Unlisted())
    commit(p, "p", fx, T0 + 100)
    assert p.instances["p/m"].state == "idle" and "scheduler's view" in p.instances["p/m"].reason


def test_a_host_still_running_that_the_view_lists_busy_joined_unseen(hosts):
    p = projection("p", BUSY[:1])
    fx, _ = correct(p, hosts, view(("node-1", "busy")), T0 + 100, Unlisted())
    commit(p, "p", fx, T0 + 100)
    assert p.instances["p/m"].state == "busy"


def test_an_unlisted_joined_host_is_handled_as_idle_after_the_grace_when_orphans_return(hosts):
    p = projection("p", BUSY)
    fx, unlisted = correct(p, hosts, view(), T0 + 100, Unlisted())
    assert not fx.writes and unlisted.since == {"m": T0 + 100}, "not at once: a view may lag a join"
    fx, unlisted = correct(p, hosts, view(at=T0 + 200), T0 + 100 + hosts.policy.unlisted_grace, unlisted)
    commit(p, "p", fx, T0 + 100 + hosts.policy.unlisted_grace)
    assert p.instances["p/m"].state == "idle", "then idle: reclaim gives it back after idle_time and min hold"


def test_an_unlisted_joined_host_is_reported_as_an_orphan_when_orphans_report():
    report = settings(orphans="report")
    p = projection("p", BUSY)
    _, unlisted = correct(p, report, view(), T0 + 100, Unlisted())
    fx, _ = correct(p, report, view(at=T0 + 200), T0 + 100 + report.policy.unlisted_grace, unlisted)
    commit(p, "p", fx, T0 + 100 + report.policy.unlisted_grace)
    assert p.instances["p/m"].state == "orphaned"


def test_a_host_listed_again_is_no_longer_counted_missing_and_one_joined_after_the_view_is_not(hosts):
    p = projection("p", BUSY)
    _, unlisted = correct(p, hosts, view(), T0 + 100, Unlisted())
    _, unlisted = correct(p, hosts, view(("node-1", "busy")), T0 + 150, unlisted)
    assert unlisted.since == {}
    fx, unlisted = correct(p, hosts, view(at=T0 - 50), T0 + 10 * hosts.policy.unlisted_grace, Unlisted())
    assert not fx.writes and unlisted.since == {}, "the view was made before the host joined"


def test_a_host_being_returned_is_left_to_its_return(hosts):
    p = projection("p", [*BUSY, (None, InstanceChanged(kind="instance_return_planned", machine_id="m",
                                                      state="return_planned", request_id="r"))])
    fx, _ = correct(p, hosts, view(("node-1", "idle")), T0 + 100, Unlisted())
    assert not fx.writes
