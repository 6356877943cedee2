"""Status polls: what is asked, and the edges a status answer moves records along."""

from __future__ import annotations

from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, RequestChanged, RequestPlanned
from messages.scripts import Machine, RequestStatus, StatusReport
from owner.calls import Poll
from owner.effects import Notes
from owner.polls import poll, polled
from owner.requests import replan_returns
from owner.units import totals
from policy.returns import AGAIN, returns_due
from tests.support.facts import T0, commit, kinds, projection
from tests.support.owners import result

SUBMITTED = [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2)),
             (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                                   provider_request_id="req-1"))]


def status(pid: str, state: str, machines=(), granted=None, message="") -> object:
    return result("status", output=StatusReport(requests=[RequestStatus(
        request_id=pid, status=state, machines=list(machines), granted=granted, message=message)]))


def test_a_poll_asks_about_requests_under_way_and_machines_still_coming(hosts):
    p = projection("p", [*SUBMITTED, (None, RequestChanged(kind="request_completed", request_id="r",
                                                           state="complete")),
                         (None, InstanceSeen(machine_id="m", name="n", request_id="r", state="provisioning")),
                         ("s", RequestPlanned(action="request", supply="hosts", template="t", count=1))])
    (c,) = poll(p, hosts, busy=()).calls
    assert c.purpose == Poll({"req-1": "r"}) and c.document == {"requests": [{"requestId": "req-1"}]}


def test_nothing_under_way_is_no_poll(hosts):
    assert not poll(projection("p", []), hosts, busy=())


def test_edges_machines_seen_then_running_and_the_request_complete(hosts):
    p = projection("p", SUBMITTED)
    up = [Machine(machine_id="m1", name="n1", result="executing"), Machine(machine_id="m2", name="n2",
                                                                          result="succeed")]
    written = commit(p, "p", polled(p, hosts, {"req-1": "r"}, status("req-1", "running", up)), T0 + 9)
    assert kinds(written) == ["instance_seen", "instance_seen", "request_status"]
    assert (p.instances["p/m1"].state, p.instances["p/m2"].state) == ("provisioning", "running")
    done = [Machine(machine_id="m1", name="n1", result="succeed"), Machine(machine_id="m2", name="n2",
                                                                          result="succeed")]
    written = commit(p, "p", polled(p, hosts, {"req-1": "r"}, status("req-1", "complete", done)), T0 + 19)
    assert kinds(written) == ["instance_running", "request_completed"] and p.requests["r"].state == "complete"


def test_a_failed_status_call_writes_nothing_and_says_why(hosts):
    p = projection("p", SUBMITTED)
    fx = polled(p, hosts, {"req-1": "r"}, result("status", "transient", reason="throttled"))
    assert not fx.writes and "throttled" in fx.notes[0].text


def test_a_units_grant_is_granted_by_its_request_completing(units):
    p = projection("p", [("g", RequestPlanned(action="request", supply="units", resource="vcs", count=3)),
                         (None, RequestChanged(kind="request_submitted", request_id="g", state="submitted",
                                               provider_request_id="lic-1"))])
    commit(p, "p", polled(p, units, {"lic-1": "g"}, status("lic-1", "complete", granted=3)), T0 + 9)
    assert p.grants["g"].state == "granted" and p.grants["g"].count == 3


def test_a_units_return_complete_with_error_plans_the_grant_again_after_a_pause(units):
    p = projection("p", [
        ("g", RequestPlanned(action="request", supply="units", resource="vcs", count=2)),
        (None, GrantChanged(kind="grant_granted", grant_id="g", resource="vcs", state="granted", count=2,
                            request_id="g")),
        ("r", RequestPlanned(action="return", supply="units", resource="vcs", count=2, grants=["g"])),
        (None, GrantChanged(kind="grant_return_planned", grant_id="g", resource="vcs", state="return_planned",
                            count=2, request_id="r")),
        (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                              provider_request_id="ret-1")),
        (None, GrantChanged(kind="grant_returning", grant_id="g", resource="vcs", state="returning", count=2,
                            request_id="r")),
    ])
    commit(p, "p", polled(p, units, {"ret-1": "r"}, status("ret-1", "complete_with_error",
                                                          message="the pool refused it")), T0 + 9)
    assert p.requests["r"].state == "complete_with_error" and p.grants["g"].state == "return_planned"
    pause = units.policy.cooldown / 4
    assert not replan_returns(p, units, T0 + 9 + pause / 2, busy=()), "planned again only after a pause"
    assert returns_due([], p.open().grants, p.requests, T0 + 9 + pause, pause, orphans_go=False)[1] == \
        {("vcs", AGAIN): {"g": 2}}


def test_a_host_return_complete_with_error_is_planned_again(hosts):
    p = projection("p", [
        (None, InstanceSeen(machine_id="m", name="n", state="running")),
        ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
        (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                               request_id="r")),
        (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                              provider_request_id="ret-1")),
        (None, InstanceChanged(kind="instance_returning", machine_id="m", state="returning", request_id="r")),
    ])
    failed = [Machine(machine_id="m", name="n", result="fail", message="m: still attached")]
    commit(p, "p", polled(p, hosts, {"ret-1": "r"}, status("ret-1", "complete_with_error", failed)), T0 + 9)
    assert p.instances["p/m"].state == "return_planned" and p.requests["r"].state == "complete_with_error"
    later = T0 + 9 + hosts.policy.cooldown
    (w,) = replan_returns(p, hosts, later, busy=()).writes
    assert w.payloads[0].machines == ["m"]


def test_edge_returning_to_returned_when_the_return_completes(hosts):
    p = projection("p", [
        (None, InstanceSeen(machine_id="m", name="n", state="running")),
        ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
        (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                               request_id="r")),
        (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                              provider_request_id="ret-1")),
        (None, InstanceChanged(kind="instance_returning", machine_id="m", state="returning", request_id="r")),
    ])
    commit(p, "p", polled(p, hosts, {"ret-1": "r"}, status("ret-1", "complete")), T0 + 9)
    assert p.instances["p/m"].state == "returned" and p.requests["r"].state == "complete"


def test_a_grant_and_the_total_it_causes_are_one_write(units):
    """The total a scheduler reads changes atomically with the grant that causes it, under the same fence."""
    p = projection("p", [("g", RequestPlanned(action="request", supply="units", resource="vcs", count=3)),
                         (None, RequestChanged(kind="request_submitted", request_id="g", state="submitted",
                                               provider_request_id="lic-1"))])
    (w,) = polled(p, units, {"lic-1": "g"}, status("lic-1", "complete", granted=3)).writes
    assert kinds(w.payloads) == ["grant_granted", "request_completed", "resource_total_changed"]
    total = w.payloads[-1]
    assert (total.base, total.borrowed, total.total) == (2, 3, 5)
    commit(p, "p", polled(p, units, {"lic-1": "g"}, status("lic-1", "complete", granted=3)), T0 + 9)
    assert p.resources["vcs"].total == 5 and not totals(p, units, busy=()), "nothing left to publish apart"


def test_no_poll_while_the_last_answer_is_still_being_written(hosts):
    """An answer read before the last one's facts are in would record the same edges twice (a part of a
    grant given back twice, a total too low by as much): the next poll waits for that write."""
    p = projection("p", SUBMITTED)
    assert not poll(p, hosts, busy={Notes("status")})
    (c,) = poll(p, hosts, busy={Poll}).calls
    assert c.purpose == Poll({"req-1": "r"})
