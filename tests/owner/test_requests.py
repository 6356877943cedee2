"""The owner's request decisions, edge by edge: orders to intents, intents to calls, answers to facts."""

from __future__ import annotations

from messages.facts import (
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    NodesChanged,
    Order,
    ProviderAdmin,
    RequestChanged,
    RequestPlanned,
)
from messages.scripts import RequestStatus, StatusReport
from owner.calls import Carry
from owner.effects import OrderTaken, RequestSettled
from owner.polls import polled
from owner.requests import NO_TOKEN, carried, carry_out, expire, fail, replan_returns, take_order
from owner.scans import scan
from policy.retry import MAX_ATTEMPTS
from policy.returns import MAX_RETURNS, given_up
from tests.support.facts import T0, commit, kinds, projection
from tests.support.owners import accepted, result, settings

REQUEST_ORDER = ("o", Order(action="request", supply="hosts", template="t", count=2, item_id="i"))


def test_a_request_order_becomes_its_intent_named_after_the_order(hosts):
    p = projection("p", [REQUEST_ORDER])
    fx = take_order(p, hosts, p.orders["o"], T0 + 1, busy=())
    (w,) = fx.writes
    assert w.slot == OrderTaken("o") and w.ids == ("o.1",)
    (intent,) = w.payloads
    assert (intent.action, intent.template, intent.count, intent.item_id) == ("request", "t", 2, "i")
    assert not fx.calls, "the call waits for the intent to be committed"


def test_an_order_being_written_or_already_taken_is_not_taken_again(hosts):
    p = projection("p", [REQUEST_ORDER])
    assert not take_order(p, hosts, p.orders["o"], T0 + 1, busy={OrderTaken("o")})
    commit(p, "p", take_order(p, hosts, p.orders["o"], T0 + 1, busy=()), T0 + 1)
    assert not take_order(p, hosts, p.orders["o"], T0 + 2, busy=())


def test_a_request_order_is_refused_by_a_provider_not_active_or_once_too_old(hosts):
    p = projection("p", [REQUEST_ORDER, (None, ProviderAdmin(kind="provider_paused"))])
    assert not take_order(p, hosts, p.orders["o"], T0 + 2, busy=())
    p = projection("p", [REQUEST_ORDER])
    assert not take_order(p, hosts, p.orders["o"], T0 + hosts.policy.request_timeout + 1, busy=())


def test_a_return_order_gives_back_only_hosts_still_returnable_and_busy_ones_only_for_an_operator(hosts):
    facts = [(None, InstanceSeen(machine_id=m, name=m, state="running")) for m in ("a", "b", "c")]
    facts += [(None, InstanceChanged(kind="instance_idle", machine_id="a", state="idle")),
              (None, InstanceChanged(kind="instance_busy", machine_id="b", state="busy"))]
    for reason, expected in (("idle", ["a", "c"]), ("operator: drain", ["a", "b", "c"])):
        p = projection("p", [*facts, ("o", Order(action="return", supply="hosts", machines=["a", "b", "c", "gone"],
                                                 count=4, reason=reason))])
        (w,) = take_order(p, hosts, p.orders["o"], T0 + 9, busy=()).writes
        assert w.payloads[0].machines == expected and w.ids[0] == "o.1"
        assert kinds(w.payloads[1:]) == ["instance_return_planned"] * len(expected)


def test_a_units_return_order_takes_its_units_from_the_grants_it_names(units):
    p = projection("p", [
        ("g", RequestPlanned(action="request", supply="units", resource="vcs", count=5)),
        (None, GrantChanged(kind="grant_granted", grant_id="g", resource="vcs", state="granted", count=5)),
        ("o", Order(action="return", supply="units", resource="vcs", grants=["g"], count=3, reason="idle")),
    ])
    (w,) = take_order(p, units, p.orders["o"], T0 + 9, busy=()).writes
    intent, part, total = w.payloads
    assert (intent.count, intent.grants) == (3, ["g"]) and (part.grant_id, part.count) == ("g", 3)
    assert (total.kind, total.borrowed, total.total) == ("resource_total_changed", 2, 4), \
        "the total the scheduler reads drops with the intent: 2 of the 5 stay, with the 2 of base"


def test_an_intent_is_called_with_its_id_as_token_and_our_tags(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    (c,) = carry_out(p, hosts, p.requests["r"], T0 + 1, busy=(), inherited=False).calls
    assert c.purpose == Carry("r") and c.action == "request" and c.token == "r"
    assert c.document == {"token": "r", "count": 2, "template": "t",
                          "tags": {"provisioner-provider": "p", "provisioner-request": "r"}}


def test_an_intent_whose_call_or_answer_is_under_way_is_not_called_again(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    assert not carry_out(p, hosts, p.requests["r"], T0 + 1, busy={Carry("r").slot}, inherited=False)
    assert not carry_out(p, hosts, p.requests["r"], T0 + 1, busy={RequestSettled("r")}, inherited=False)


def test_after_a_failed_attempt_the_call_waits_out_its_backoff(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    commit(p, "p", carried(p, hosts, "r", result("request", "transient", reason="throttled")), T0 + 5)
    assert p.requests["r"].state == "planned" and p.requests["r"].attempts == 1
    assert not carry_out(p, hosts, p.requests["r"], T0 + 5.5, busy=(), inherited=False)
    assert carry_out(p, hosts, p.requests["r"], T0 + 6, busy=(), inherited=False).calls


def test_restart_rule_an_inherited_intent_is_repeated_where_the_provider_takes_a_token(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    assert carry_out(p, hosts, p.requests["r"], T0 + 1, busy=(), inherited=True).calls


def test_restart_rule_an_inherited_intent_without_a_token_is_failed_and_reported_for_an_operator():
    """An LSF-style provider has no list, and its orphan search asks only the requests it answered: what an
    unanswered call made is for an operator to find, and the reason says what to look for."""
    lsf = settings(style="lsf")
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    fx = carry_out(p, lsf, p.requests["r"], T0 + 1, busy=(), inherited=True)
    assert not fx.calls
    (w,) = fx.writes
    reason = w.payloads[0].reason
    assert w.payloads[0].state == "failed" and reason.startswith(NO_TOKEN)
    assert "orphan search finds" not in reason
    assert "is in no fact: check the provider for 2 of template t asked for from 1970-01-12 13:46:40 UTC" in reason
    assert [(n.level, n.text) for n in fx.notes] == [("error", f"provider p: request r failed: {reason}")]
    assert carry_out(p, lsf, p.requests["r"], T0 + 1, busy=(), inherited=False).calls, "its own intent is called"


def test_restart_rule_a_submitted_request_is_polled_not_called_again(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2)),
                         (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                                               provider_request_id="x"))])
    assert not carry_out(p, hosts, p.requests["r"], T0 + 9, busy=(), inherited=True)


def test_a_host_return_is_called_with_its_machines_names(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="node-1", state="running")),
                         ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"]))])
    (c,) = carry_out(p, hosts, p.requests["r"], T0 + 9, busy=(), inherited=False).calls
    assert c.action == "return" and c.document == {"token": "r", "machines": [{"name": "node-1", "machineId": "m"}]}


def test_edge_planned_to_submitted_moves_returned_hosts_to_returning(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="running")),
                         ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
                         (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                                                request_id="r"))])
    written = commit(p, "p", carried(p, hosts, "r", accepted("ret-1", "return")), T0 + 9)
    assert kinds(written) == ["request_submitted", "instance_returning"]
    assert p.requests["r"].provider_request_id == "ret-1" and p.instances["p/m"].state == "returning"


def test_edge_planned_to_failed_after_the_last_attempt(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    for n in range(MAX_ATTEMPTS - 1):
        commit(p, "p", carried(p, hosts, "r", result("request", "failed", reason="boom")), T0 + 100 * (n + 1))
        assert p.requests["r"].state == "planned"
    commit(p, "p", carried(p, hosts, "r", result("request", "failed", reason="boom")), T0 + 1000)
    assert p.requests["r"].state == "failed" and p.requests["r"].attempts == MAX_ATTEMPTS


def test_edge_planned_to_failed_at_once_on_capacity(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    commit(p, "p", carried(p, hosts, "r", result("request", "capacity", reason="no room")), T0 + 5)
    assert p.requests["r"].state == "failed" and p.requests["r"].outcome == "capacity"


def test_a_timed_out_call_of_a_provider_without_token_is_not_repeated_and_says_so():
    lsf = settings(style="lsf")
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    commit(p, "p", carried(p, lsf, "r", result("request", "timeout", reason="p request: timed out")), T0 + 5)
    reason = p.requests["r"].reason
    assert p.requests["r"].state == "failed" and reason.startswith("p request: timed out (unknown outcome")
    assert "is in no fact: check the provider for 2 of template t" in reason


def test_a_late_answer_records_its_request_id_on_the_ended_request_for_the_orphan_search(hosts):
    """An answer kept while the controller refused its record may find its request failed by a successor (an
    unknown outcome): the provider's request id is recorded on it, so the orphan search asks what it made."""
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2)),
                         (None, RequestChanged(kind="request_failed", request_id="r", state="failed",
                                               reason=NO_TOKEN))])
    written = commit(p, "p", carried(p, hosts, "r", accepted("late-1")), T0 + 9)
    assert kinds(written) == ["request_status"]
    req = p.requests["r"]
    assert (req.state, req.provider_request_id) == ("failed", "late-1")
    assert req.reason.startswith("a late answer: the provider accepted it as late-1")
    assert not carried(p, hosts, "r", accepted("late-1")), "recorded once"
    lsf = settings(style="lsf")
    (c,) = scan(p, lsf, T0 + 10, busy=()).calls
    assert c.document == {"requests": [{"requestId": "late-1"}]}, "the orphan search asks about it"


def test_a_late_failure_or_an_answer_for_a_request_with_its_own_id_changes_nothing(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2)),
                         (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                                               provider_request_id="x"))])
    assert not carried(p, hosts, "r", accepted("late"))
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2)),
                         (None, RequestChanged(kind="request_failed", request_id="r", state="failed"))])
    assert not carried(p, hosts, "r", result("request", "failed", reason="boom"))


def test_edge_to_timed_out_not_while_its_call_runs(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=2))])
    late = T0 + hosts.policy.request_timeout + 1
    assert not expire(p, hosts, late, busy={Carry("r").slot})
    (w,) = expire(p, hosts, late, busy=()).writes
    assert w.payloads[0].state == "timed_out"


def named_request(*let_go: str, host: bool = False) -> list:
    facts = [(None, NodesChanged(kind="nodes_resumed", names=["c1", "c2"], template="t")),
             ("r", RequestPlanned(action="request", supply="hosts", template="t", count=2, names=["c1", "c2"])),
             (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                                   provider_request_id="pr"))]
    if host:
        facts.append((None, InstanceSeen(machine_id="m1", name="c1", node="c1", request_id="r", state="running")))
    if let_go:
        facts.append((None, NodesChanged(kind="nodes_resume_failed", names=list(let_go),
                                         reason="ResumeFailProgram")))
    return facts


def test_edge_submitted_to_called_off_once_the_scheduler_let_go_of_every_name_before_a_host_came(hosts):
    soon = T0 + 5  # well within request_timeout
    assert not expire(projection("p", named_request()), hosts, soon, busy=()), "its nodes are still wanted"
    assert not expire(projection("p", named_request("c1")), hosts, soon, busy=()), "c2 still waits for it"
    assert not expire(projection("p", named_request("c1", "c2", host=True)), hosts, soon, busy=()), \
        "a host came of it: the request goes on, and the host is returned as its node's"
    p = projection("p", named_request("c1", "c2"))
    assert not expire(p, hosts, soon, busy={RequestSettled("r")})
    (w,) = expire(p, hosts, soon, busy=()).writes
    (change,) = w.payloads
    assert (change.kind, change.state) == ("request_called_off", "called_off")
    assert "c1, c2" in change.reason and "ResumeFailProgram" in change.reason
    commit(p, "p", expire(p, hosts, soon, busy=()), soon)
    assert p.requests["r"].state == "called_off" and not p.open("p").requests


def test_a_timed_out_units_request_leaves_its_grant_orphaned_and_a_failed_one_failed(units):
    for state, grant in (("timed_out", "orphaned"), ("failed", "failed")):
        p = projection("p", [("g", RequestPlanned(action="request", supply="units", resource="vcs", count=2))])
        commit(p, "p", fail(p, units, p.requests["g"], state, "why", None), T0 + 9)
        assert p.grants["g"].state == grant


def test_a_return_that_never_completes_leaves_its_hosts_orphaned(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="running")),
                         ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
                         (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                                                request_id="r"))])
    commit(p, "p", fail(p, hosts, p.requests["r"], "timed_out", "late", None), T0 + 9)
    assert p.instances["p/m"].state == "orphaned"


def test_a_failed_return_is_planned_again_once_under_a_new_request(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="running")),
                         (None, InstanceChanged(kind="instance_idle", machine_id="m", state="idle")),
                         ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
                         (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                                                request_id="r")),
                         (None, RequestChanged(kind="request_failed", request_id="r", state="failed"))])
    later = T0 + 3600
    written = commit(p, "p", replan_returns(p, hosts, later, busy=()), later)
    planned = written[0]
    assert isinstance(planned, RequestPlanned) and planned.machines == ["m"]
    assert p.instances["p/m"].return_request_id not in ("r", "")
    assert not replan_returns(p, hosts, later + 3600, busy=()), "not again while its new return is under way"


def test_a_return_that_makes_no_progress_backs_off_and_stops_after_a_bound(units):
    """An orphan grant the provider will not take back must not be returned for ever (it was, every pause)."""
    p = projection("p", [(None, GrantChanged(kind="grant_orphan_found", grant_id="tok-9", resource="vcs",
                                             state="orphaned", count=3))])
    now, pauses = T0 + 10, []
    for attempt in range(1, MAX_RETURNS + 1):
        fx = replan_returns(p, units, now, busy=())
        (w,) = fx.writes
        rid = w.ids[0]
        commit(p, "p", fx, now)
        (call,) = carry_out(p, units, p.requests[rid], now, busy=(), inherited=False).calls
        assert call.document["grants"] == ["tok-9"], "the grant is named as the provider knows it"
        commit(p, "p", carried(p, units, rid, accepted(f"ret-{attempt}", "return")), now)
        # The provider: "returned 0 of 3".
        commit(p, "p", polled(p, units, {f"ret-{attempt}": rid}, result("status", output=StatusReport(requests=[
            RequestStatus(request_id=f"ret-{attempt}", status="complete_with_error", message="returned 0 of 3")]))),
               now)
        assert p.grants["tok-9"].returns == attempt
        wait = 0.0
        while not replan_returns(p, units, now + wait, busy=()) and wait < 10 * units.policy.backoff_max:
            wait += 1.0
        pauses.append(wait)
        now += wait
    assert pauses[-1] >= 10 * units.policy.backoff_max, f"no return after the {MAX_RETURNS}th: {pauses}"
    assert pauses[0] < pauses[1] < pauses[2], "each pause longer than the last"
    assert p.grants["tok-9"].state == "return_planned" and given_up(p.grants["tok-9"].returns)
