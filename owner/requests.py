"""Orders become intents, intents become calls, call answers become facts; requests that go nowhere end.

A request is used in both directions: getting supply (``action: request``)
and giving it back (``action: return``). Its intent is written before its
call, and its call carries the intent's id as token, so a repeat after a
crash, a timeout or a failover is the same call to the provider.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any, Literal

from messages.facts import (
    UNKNOWN,
    USE_READ,
    USE_UNREAD,
    GrantChanged,
    InstanceChanged,
    Payload,
    RequestChanged,
    RequestPlanned,
    UsageObserved,
)
from messages.records import GrantRecord, OrderRecord, RequestRecord
from messages.scripts import Accepted, ScriptResult, Usage
from messages.states import GIVABLE, LEFT_BEHIND, REQUEST, RETURNABLE, GrantState, OnRestart
from owner.calls import Call, Carry, CheckUse
from owner.effects import NOTHING, Effects, OrderTaken, RequestSettled, ReturnPlanned, UsageSeen, note, write
from owner.returns import return_intent, return_lost
from owner.settings import OwnerSettings
from owner.units import going_back, lent, order_parts, total_after, with_totals
from policy.retry import backoff, retryable, try_again
from policy.returns import returns_due
from state.projection import Projection

#: Why an inherited request of a provider that takes no token is not repeated.
NO_TOKEN = "unknown outcome after restart: LSF-style scripts take no idempotency token, so the request is not repeated"


def unknown_outcome(s: OwnerSettings, req: RequestRecord, why: str) -> str:
    """``why`` a request of a provider without token ends with an unknown outcome, and what becomes of what its
    call may have made: found by the orphan search where the provider lists what it holds, else an operator's
    to look for (the orphan search of such a provider asks only the requests it answered)."""
    if s.can("list"):
        return f"{why}; the orphan search finds what it made"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(req.created_at))
    what = f"{req.count} of template {req.template}" if req.supply == "hosts" else \
        f"{req.count} units of {req.resource}"
    return (f"{why}; this provider cannot list what it holds, so what the call made, if it was made, is in no fact: "
            f"check the provider for {what} asked for from {when} on, and return what you find there")


def take_order(p: Projection, s: OwnerSettings, order: OrderRecord, now: float, busy: Collection[object]) -> Effects:
    """An order no request has taken up yet becomes its intent.

    A request order is refused while the provider is not active (paused,
    drained, disabled) and once it is older than request_timeout: the planner
    has stopped counting it and ordered elsewhere. A return gives back what of
    it is still ours to give.
    """
    if OrderTaken(order.id) in busy:
        return NOTHING
    reqs = p.requests_of(order.id)
    if reqs:
        return NOTHING  # taken up already; a failed return is planned again by ``replan_returns``
    o = order.order
    if o.action == "request":
        if p.provider(s.name).status != "active" or now - order.at > s.policy.request_timeout:
            return NOTHING
        intent = RequestPlanned(action="request", supply=o.supply, order_id=order.id, item_id=o.item_id,
                                template=o.template, resource=o.resource, count=o.count, names=o.names)
        return write(OrderTaken(order.id), [intent], (f"{order.id}.1",))
    if o.supply == "hosts":
        forced = o.reason.startswith("operator") and not o.when_idle  # a drain waits for the work to end
        machines = [m for m in o.machines if (inst := p.instances.get(f"{s.name}/{m}")) is not None
                    and inst.state in RETURNABLE and (inst.state != "busy" or forced)]
        return plan_return(p, s, machines, {}, o.reason, busy, order_id=order.id)
    return plan_return(p, s, [], order_parts(p, o), o.reason, busy, order_id=order.id)


def plan_return(p: Projection, s: OwnerSettings, machines: list[str], grants: Mapping[str, int], reason: str,
                busy: Collection[object], order_id: str = "") -> Effects:
    """A return's intent with its instances or grants moved to ``return_planned``, in one batch.

    ``grants`` maps each grant to the units it gives back: all it holds, or part of it.
    """
    if not machines and not grants:
        return NOTHING
    slot = OrderTaken(order_id) if order_id else ReturnPlanned(tuple(sorted([*machines, *grants])))
    if slot in busy:
        return NOTHING
    request_id = f"{order_id}.{len(p.requests_of(order_id)) + 1}" if order_id else s.new_id("return")
    payloads = return_intent(p.grants, machines, grants, request_id, order_id, reason)
    if grants:
        # The total the scheduler reads drops with the intent: it hands out none of these units from now on.
        resource = p.grants[next(iter(grants))].resource
        payloads += total_after(p, s, resource, {**going_back(p, busy, resource, but=order_id), **grants})
    return write(slot, payloads, (request_id,) + (None,) * (len(payloads) - 1))


def replan_returns(p: Projection, s: OwnerSettings, now: float, busy: Collection[object]) -> Effects:
    """Give back again what a failed return left behind, machines that failed to start, and orphans."""
    machines, grants = returns_due(
        p.instances_in(*LEFT_BEHIND, provider=s.name), p.open(s.name).grants, p.requests, now,
        s.policy.cooldown / 4, s.policy.orphans == "return", cap=s.policy.backoff_max)
    fx = NOTHING
    for reason, ids in sorted(machines.items()):
        fx += plan_return(p, s, ids, {}, reason, busy)
    for (_, reason), parts in sorted(grants.items()):
        fx += plan_return(p, s, [], parts, reason, busy)
    return fx


def carry_out(p: Projection, s: OwnerSettings, req: RequestRecord, now: float, busy: Collection[object],
              inherited: bool) -> Effects:
    """A committed intent becomes its call, once any backoff since its last failed attempt has passed.

    ``inherited``: the intent was in the log before this owner took the lease,
    so its call may or may not have happened. The restart rule of its state
    says what to do: repeat it with the same token, or, where the provider
    takes no token, fail it and leave what it made to the orphan search.
    """
    if Carry(req.id).slot in busy or RequestSettled(req.id) in busy:
        return NOTHING
    rule = REQUEST.on_restart[req.state]
    if inherited and rule is OnRestart.REPEAT_OR_FAIL and not s.takes_token and req.action == "request" \
            and req.attempts == 0:
        return fail(p, s, req, "failed", unknown_outcome(s, req, NO_TOKEN), UNKNOWN, level="error")
    if rule not in (OnRestart.REPEAT, OnRestart.REPEAT_OR_FAIL):
        return NOTHING
    if req.last_attempt_at is not None and now - req.last_attempt_at < backoff(req.attempts, s.policy.backoff_max):
        return NOTHING
    uncalled = req.outcome != USE_READ and (req.attempts == 0 or req.outcome == USE_UNREAD)
    if req.action == "return" and req.supply == "units" and req.resource and uncalled and any(
            (g := p.grants.get(gid)) is not None and _before_return(g) == "granted" for gid in req.grants):
        waits = _held_back_yet(p, s, req.resource)
        if waits:
            return note("info", f"provider {s.name}: return {req.id} waits: {waits}", repeats=f"held-back/{req.id}")
    if req.action == "return" and req.supply == "units" and req.resource and _reads_use(s, req.resource) \
            and uncalled and any(
                (g := p.grants.get(gid)) is not None and _before_return(g) == "granted" for gid in req.grants):
        # Units the scheduler could hand out: their use is read first, and the return is called once a read
        # that fits is written (``use_checked``), so a return whose read is not in the facts was never called,
        # by this owner or any before it. Once called, a call may have taken effect, and its repeat follows
        # unread. (An orphan's units were never in the total.)
        return Effects(calls=(Call(CheckUse(req.id, req.resource), "usage", {"resource": req.resource}),))
    return Effects(calls=(_call(p, s, req),))


def _held_back_yet(p: Projection, s: OwnerSettings, resource: str) -> str:
    """Why a return of ``resource``'s units may not be called yet: where a scheduler's bridge shows the resource
    to its scheduler (``s.shown``, once shown: ``license_shown``), the scheduler must be seen handing out no
    more than what stays after the return, else it could give a job a unit that has gone back to the pool.
    "" once it is, or with no bridge. The return's intent left the units out of what the bridge publishes;
    its next rounds send that and see it shown."""
    rec = p.resources.get(resource)
    if resource not in s.shown or rec is None or rec.shown_free is None:
        return ""
    base = next((r.base for r in s.resources if r.name == resource), 0)
    stays = base + lent(p, s, resource)
    if rec.shown_free <= stays:
        return ""
    return (f"the scheduler still hands out {rec.shown_free} units of {resource}, {stays} stay: the return is "
            "called once its bridge shows it holding the rest back")


def _reads_use(s: OwnerSettings, resource: str) -> bool:
    """Whether the owner reads this resource's use at its source (a resource it lends, a provider with usage)."""
    return s.can("usage") and any(r.name == resource for r in s.resources)


def _call(p: Projection, s: OwnerSettings, req: RequestRecord) -> Call:
    """The ``request`` or ``return`` call of an intent, under its id as token."""
    doc: dict[str, Any]
    if req.action == "request":
        doc = {"token": req.id, "count": req.count, "tags": {**s.tags, "provisioner-request": req.id}}
        doc["template" if req.supply == "hosts" else "resource"] = req.template or req.resource
        if req.names:
            doc["names"] = list(req.names)
    elif req.supply == "hosts":
        doc = {"token": req.id, "machines": [
            {"name": p.instances[f"{s.name}/{m}"].name, "machineId": m}
            for m in req.machines if f"{s.name}/{m}" in p.instances
        ]}
    else:
        doc = {"token": req.id, "resource": req.resource, "count": req.count,
               "grants": [_grant_ref(p, g) for g in req.grants]}
    return Call(Carry(req.id), "request" if req.action == "request" else "return", doc, req.id)


def use_checked(p: Projection, s: OwnerSettings, purpose: CheckUse, result: ScriptResult,
                busy: Collection[object] = ()) -> Effects:
    """The use read before a units return: the return is called if the use fits in what stays, else called off.

    The intent left its units out of the total the scheduler reads, and this read was taken after that total
    was published: use above what stays was handed out before the scheduler learned of the return (or after
    the planner's last read), and those units are in use. The return's call was never made, so it can be
    called off: the grants are held as before (units in use are never returned) and the total counts them
    again. A read that fits is written (``USE_READ``), and the call follows once it is committed; from then
    on the scheduler hands none of the units out, so a retry of the call, by this owner or a successor,
    needs no read. A read that failed counts as an attempt of the return (the same backoff, the same bound)
    that made no call (``USE_UNREAD``): the next attempt reads the use again.
    """
    req = p.requests.get(purpose.request_id)
    if req is None or req.state != "planned":
        return NOTHING
    if not result.ok or not isinstance(result.output, Usage):
        if not try_again(result.outcome, s.takes_token, req.action, req.attempts):
            return fail(p, s, req, "failed", result.reason, result.outcome, busy)
        # An attempt (backoff, bound) that made no call: the next one reads the use again.
        return write(RequestSettled(req.id), [RequestChanged(
            kind="request_status", request_id=req.id, state="planned", outcome=USE_UNREAD,
            reason=f"{result.reason} (the use read before the return; no return was called)")])
    in_use = result.output.in_use
    res = purpose.resource
    base = next((r.base for r in s.resources if r.name == res), 0)
    stays = base + lent(p, s, res)
    rec = p.resources.get(res)
    fx = NOTHING if rec is not None and rec.in_use == in_use else write(
        UsageSeen(res), [UsageObserved(resource=res, in_use=in_use, total=result.output.total)])
    # The scheduler's own count of what its jobs hold (its bridge's record), where it keeps one: a unit a job
    # holds stays, whatever the license server says.
    held = max(in_use, rec.scheduler_in_use or 0) if rec is not None else in_use
    if held <= stays:
        # Written before the call is made: a successor finds whether the call may have happened.
        return fx + write(RequestSettled(req.id), [RequestChanged(
            kind="request_status", request_id=req.id, state="planned", outcome=USE_READ,
            reason=f"{held} units of {res} in use, {stays} stay: the return is called")])
    why = f"called off: {held} units of {res} in use, {stays} would stay"
    payloads: list[Payload] = [RequestChanged(kind="request_failed", request_id=req.id, state="failed", reason=why)]
    for gid in req.grants:
        g = p.grants.get(gid)
        if g is not None and g.state == "return_planned" and g.return_request_id == req.id:
            before = _before_return(g)
            payloads.append(GrantChanged(kind="grant_return_called_off", grant_id=g.id, resource=g.resource,
                                         state=before, count=g.returning if before == "granted" else 0,
                                         request_id=req.id, reason=why))
    return fx + write(RequestSettled(req.id), with_totals(p, s, payloads, busy)) + note(
        "warning", f"provider {s.name}: return {req.id} {why}")


def _before_return(g: GrantRecord) -> GrantState:
    """What a grant was before its returns began: granted, or an orphan."""
    for change in reversed(g.history.changes):
        if change.state in GIVABLE:
            return "orphaned" if change.state == "orphaned" else "granted"
    return "granted"


def _grant_ref(p: Projection, grant_id: str) -> str | dict[str, Any]:
    """A grant as a units return names it: its token, with the count when only part goes back."""
    grant = p.grants.get(grant_id)
    if grant is not None and grant.partial_return:
        return {"token": grant_id, "count": grant.returning}
    return grant_id


def carried(p: Projection, s: OwnerSettings, request_id: str, result: ScriptResult,
            busy: Collection[object] = ()) -> Effects:
    """The answer of a request's call: submitted, another attempt with the same token, or failed.

    An answer whose request ended meanwhile (a successor gave it up as an unknown outcome while this
    process kept the answer, the controller refusing its record) is late: see ``late``.
    """
    req = p.requests.get(request_id)
    if req is None:
        return NOTHING
    if req.state != "planned":
        return late(s, req, result)
    if result.ok and isinstance(result.output, Accepted):
        payloads: list[Payload] = [RequestChanged(kind="request_submitted", request_id=req.id, state="submitted",
                                                  provider_request_id=result.output.provider_request_id)]
        if req.action == "return" and req.supply == "hosts":
            payloads += [InstanceChanged.to("returning", m, request_id=req.id)
                         for m in req.machines if (i := p.instances.get(f"{s.name}/{m}")) is not None
                         and i.state == "return_planned"]
        elif req.action == "return":
            payloads += [GrantChanged(kind="grant_returning", grant_id=g, resource=p.grants[g].resource,
                                      state="returning", request_id=req.id, count=p.grants[g].returning)
                         for g in req.grants if g in p.grants and p.grants[g].state == "return_planned"]
        return write(RequestSettled(req.id), payloads)
    if try_again(result.outcome, s.takes_token, req.action, req.attempts):
        # Same state, one more attempt: the next try repeats the same token after a backoff.
        return write(RequestSettled(req.id), [RequestChanged(kind="request_status", request_id=req.id,
                                                             state="planned", reason=result.reason,
                                                             outcome=result.outcome)])
    if result.outcome == "timeout" and not retryable(result.outcome, s.takes_token, req.action):
        why = f"{result.reason} (unknown outcome: LSF-style scripts take no token, so it is not repeated)"
        return fail(p, s, req, "failed", unknown_outcome(s, req, why), result.outcome, busy, level="error")
    return fail(p, s, req, "failed", result.reason, result.outcome, busy)


def late(s: OwnerSettings, req: RequestRecord, result: ScriptResult) -> Effects:
    """A provider's request id that came after its request ended, recorded on it: what it made is found.

    Only a request that ended without one can take it (a request submitted or polled since has its
    own). The orphan search asks the provider about every request it accepted, so what the call made
    is returned or reported like any orphan, instead of being billed in no fact.
    """
    if req.state not in ("failed", "timed_out") or req.provider_request_id or not result.ok \
            or not isinstance(result.output, Accepted):
        return NOTHING
    rid = result.output.provider_request_id
    why = f"a late answer: the provider accepted it as {rid} after it ended; the orphan search follows what it made"
    return write(RequestSettled(req.id), [RequestChanged(kind="request_status", request_id=req.id, state=req.state,
                                                         provider_request_id=rid, reason=why)]) + note(
        "warning", f"provider {s.name}: request {req.id}: {why}")


def expire(p: Projection, s: OwnerSettings, now: float, busy: Collection[object]) -> Effects:
    """Requests that are over (never while their call still runs): not done within request_timeout
    (``timed_out``), or made for named nodes the scheduler let go of before any host came of them
    (``called_off``)."""
    fx = NOTHING
    made: set[str] | None = None
    for req in p.open(s.name).requests:
        if RequestSettled(req.id) in busy or Carry(req.id).slot in busy:
            continue
        if now - req.created_at > s.policy.request_timeout:
            fx += fail(p, s, req, "timed_out", f"not done within request_timeout {s.policy.request_timeout:.0f}s",
                       None, busy)
        elif let_go(p, req):
            if made is None:
                made = {i.request_id for i in p.open(s.name).instances}
            if req.id not in made:
                fx += call_off(p, s, req, busy)
    return fx


def let_go(p: Projection, req: RequestRecord) -> bool:
    """Whether the scheduler no longer wants any of the names a submitted host request is for (it gave up
    on them at its ResumeTimeout, or suspended them): a request never submitted is carried out first, so
    that whatever its call made has a provider request id the orphan search can follow."""
    return bool(req.names) and req.state in ("submitted", "running") and all(
        (node := p.nodes.get(name)) is not None and not node.wanted for name in req.names)


def call_off(p: Projection, s: OwnerSettings, req: RequestRecord, busy: Collection[object]) -> Effects:
    """End a host request no one waits for: Slurm has put its nodes down and will resume them again with a
    new order; a machine the provider makes after all is unknown to the facts, so the orphan search finds
    it and gives it back (or reports it, ``policy.orphans``), as after a timeout. No cooldown strike: the
    scheduler's patience ran out, which says little about the provider."""
    gone = sorted({p.nodes[name].reason or "let go" for name in req.names})
    reason = f"called off: the scheduler let go of {', '.join(req.names)} ({'; '.join(gone)}) before a host came"
    return write(RequestSettled(req.id), [RequestChanged(kind="request_called_off", request_id=req.id,
                                                         state="called_off", reason=reason)]) + note(
        "warning", f"provider {s.name}: request {req.id} {reason}")


def fail(p: Projection, s: OwnerSettings, req: RequestRecord, state: Literal["failed", "timed_out"], reason: str,
         outcome: str | None, busy: Collection[object] = (),
         level: Literal["warning", "error"] = "warning") -> Effects:
    """A request ends ``failed`` or ``timed_out``, with what it leaves behind.

    A units request that timed out may have been granted after all: its grant
    is an orphan until the provider says otherwise. A return that never
    completed leaves its hosts and grants orphaned (a partial return's grant
    stays granted).
    """
    kind: Literal["request_failed", "request_timed_out"] = \
        "request_failed" if state == "failed" else "request_timed_out"
    payloads: list[Payload] = [RequestChanged(kind=kind, request_id=req.id, state=state, reason=reason,
                                              outcome=outcome)]
    lost_track = state == "timed_out"
    if req.action == "request" and req.supply == "units" and req.id in p.grants:
        g = p.grants[req.id]
        if g.state == "requested":
            payloads.append(GrantChanged(
                kind="grant_orphan_found" if lost_track else "grant_failed", grant_id=g.id, resource=g.resource,
                state="orphaned" if lost_track else "failed", request_id=req.id, reason=reason))
    elif req.action == "return" and lost_track:
        why = f"its return {req.id} never completed"
        payloads += [InstanceChanged.to("orphaned", m, request_id=req.id, reason=why)
                     for m in req.machines if (i := p.instances.get(f"{s.name}/{m}")) is not None
                     and i.return_request_id == req.id and i.state in ("return_planned", "returning")]
        payloads += [return_lost(p.grants[g], req.id, why)
                     for g in req.grants if g in p.grants and p.grants[g].return_request_id == req.id
                     and p.grants[g].state in ("return_planned", "returning")]
    return write(RequestSettled(req.id), with_totals(p, s, payloads, busy)) + note(
        level, f"provider {s.name}: request {req.id} {state}: {reason}")
