"""A return the provider finishes "complete with error": what it left behind is given back again."""

from __future__ import annotations

import threading

from actors.provider import ProviderActor
from config.models import PolicyConfig, ProviderConfig
from lease.port import Lease
from messages.commands import Append
from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, RequestChanged, RequestPlanned, make_fact
from messages.scripts import RequestState, ScriptResult, StatusReport
from persistence.projection import Projection
from policy.returns import AGAIN, FAILED, returns_due, settled
from tests.fakes import Inbox

T0 = 1_000_000.0


def _owner(tmp_path, kind: str, facts: list) -> tuple[ProviderActor, Inbox, list[float]]:
    cfg = ProviderConfig.model_validate({"name": "p", "kind": kind, "script": {"style": "v2", "path": "x"}})
    now = [T0]
    journal = Inbox()
    actor = ProviderActor(cfg, Lease(name="provider:p", holder="a", fence=1, expires_at=T0 + 60), threading.Event(),
                          journal, Inbox(), None, PolicyConfig(), [], tmp_path, lambda *a: None, clock=lambda: now[0])
    actor.view.projection = Projection()
    actor.p.apply_all([make_fact(payload, provider="p", now=T0 + i, fact_id=fid).model_copy(update={"seq": i + 1})
                       for i, (fid, payload) in enumerate(facts)])
    return actor, journal, now


def _status(request_id: str, message: str) -> ScriptResult:
    return ScriptResult(provider="p", action="status", outcome="ok", output=StatusReport(requests=[
        RequestState(request_id=request_id, status="complete_with_error", message=message)]))


def _written(actor: ProviderActor, journal: Inbox) -> list:
    facts = journal.get(Append).facts
    actor.p.apply_all([f.model_copy(update={"seq": actor.p.seq + 1 + i}) for i, f in enumerate(facts)])
    return [f.payload for f in facts]


def test_a_units_return_complete_with_error_plans_the_grant_again(tmp_path):
    actor, journal, now = _owner(tmp_path, "units", [
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
    actor._status({"ret-1": "r"}, _status("ret-1", "the pool refused it"))
    written = _written(actor, journal)
    assert any(isinstance(p, GrantChanged) and p.state == "return_planned" for p in written)
    assert actor.p.requests["r"].state == "complete_with_error"
    assert actor.p.grants["g"].state == "return_planned"
    assert not settled(actor.p.requests, "r", now[0], pause=5.0), "planned again only after a pause"
    now[0] += 10
    assert settled(actor.p.requests, "r", now[0], pause=5.0), "a return that ended with an error is settled"
    machines, grants = returns_due([], actor.p.open()[3], actor.p.requests, now[0], 5.0, orphans_go=False)
    assert grants == {("vcs", AGAIN): {"g": 2}}


#: A host that went idle, and the return r planned for it.
IDLE_HOST_RETURN_PLANNED = [
    ("q", RequestPlanned(action="request", supply="hosts", template="t", count=1)),
    (None, InstanceSeen(machine_id="m", name="n", request_id="q", state="running")),
    (None, InstanceChanged(kind="instance_idle", machine_id="m", state="idle")),
    ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
    (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                           request_id="r")),
]


def test_a_host_return_complete_with_error_is_planned_again_after_a_pause(tmp_path):
    actor, journal, now = _owner(tmp_path, "hosts", [
        *IDLE_HOST_RETURN_PLANNED,
        (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                              provider_request_id="ret-1")),
        (None, InstanceChanged(kind="instance_returning", machine_id="m", state="returning", request_id="r")),
    ])
    actor._status({"ret-1": "r"}, _status("ret-1", "m: still attached"))
    _written(actor, journal)
    inst = actor.p.instances["p/m"]
    assert inst.state == "return_planned" and actor.p.requests["r"].state == "complete_with_error"
    now[0] += 10
    machines, _ = returns_due(actor.p.open()[2], [], actor.p.requests, now[0], 5.0, orphans_go=False)
    assert machines == {AGAIN: ["m"]}


def test_a_machine_that_failed_to_start_is_given_back_once_its_request_ended(tmp_path):
    """It may still be held and billed; left alone it would count as held and cost for ever."""
    actor, _, now = _owner(tmp_path, "hosts", [
        ("q", RequestPlanned(action="request", supply="hosts", template="t", count=2)),
        (None, RequestChanged(kind="request_submitted", request_id="q", state="submitted",
                              provider_request_id="req-1")),
        (None, InstanceSeen(machine_id="m1", name="n1", request_id="q", state="running")),
        (None, InstanceSeen(machine_id="m2", name="n2", request_id="q", state="failed")),
    ])

    def due() -> dict:
        return returns_due(actor.p.open()[2], [], actor.p.requests, now[0], 5.0, orphans_go=False)[0]

    assert due() == {}, "not while its request may still report on it"
    actor.p.apply(make_fact(RequestChanged(kind="request_completed", request_id="q", state="complete_with_error"),
                            provider="p", now=now[0]).model_copy(update={"seq": actor.p.seq + 1}))
    now[0] += 10
    assert due() == {FAILED: ["m2"]}, "the failed machine goes back; the running one stays"


def test_a_host_return_planned_again_names_the_new_request_so_it_is_planned_once(tmp_path):
    actor, journal, now = _owner(tmp_path, "hosts", [
        *IDLE_HOST_RETURN_PLANNED,
        (None, RequestChanged(kind="request_failed", request_id="r", state="failed", reason="refused")),
    ])
    now[0] += 3600
    actor._replan_returns(now[0])
    written = _written(actor, journal)
    planned = next(p for p in written if isinstance(p, RequestPlanned))
    inst = actor.p.instances["p/m"]
    assert planned.machines == ["m"] and inst.return_request_id not in ("r", "")
    machines, _ = returns_due(actor.p.open()[2], [], actor.p.requests, now[0], 5.0, orphans_go=False)
    assert machines == {}, "while its new return is under way the host is not planned again"

