"""ProviderActor: the owner's hands on one provider.

It reads the daemon's shared projection of every fact (``persistence.shared``:
the journal keeps it fed, and the owner reads its provider's part under its
lock) or, built without one, a projection of its own fed with its provider's
facts. After every change and on every tick it reconciles: orders become
intent facts, committed intents become script calls, script results become
facts. Effects are driven only by committed facts, so a live run and a
restart take the same path: an intent found in the log is simply carried out
(with its token), as the restart rules beside the state machines say.

In-memory state is only what is in flight right now (which script runs for
which record, which write awaits its reply); losing it loses nothing.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

from actors.base import Actor, handles
from actors.journal import Restored
from actors.pooled import PooledActor
from config.models import PolicyConfig, ProviderConfig, ResourceConfig
from lease.port import Lease
from messages.commands import (
    Append,
    Appended,
    CaughtUp,
    Committed,
    DemandChanged,
    HostEvents,
    LeaseRevoked,
    ScriptDone,
    Subscribe,
    Tick,
    Unsubscribe,
)
from messages.facts import (
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    Payload,
    ProviderAdmin,
    ProviderDescribed,
    RequestChanged,
    RequestPlanned,
    ResourceTotalChanged,
    UsageObserved,
    make_fact,
    new_id,
)
from messages.grant_returns import return_lost
from messages.records import InstanceRecord, OrderRecord, RequestRecord
from messages.return_intents import return_intent
from messages.scripts import Accepted, Holdings, Reclaims, ScriptResult, StatusReport, Usage
from messages.states import INSTANCE, REQUEST
from messages.status_facts import status_facts
from persistence.failpoints import failpoint
from persistence.port import Controller, ResourceTotal
from persistence.projection import Projection
from persistence.shared import SharedProjection
from policy.reclaim import portions
from policy.retry import backoff, retryable, try_again
from policy.returns import returns_due
from providers.contract import supports
from providers.describe import merge_description

log = logging.getLogger(__name__)

#: Outcomes that mean the provider cannot work until an operator steps in.
DISABLING = frozenset({"credentials", "config", "spawn_error"})
#: Instance states from which a return may be planned.
RETURNABLE = frozenset(s for s, dsts in INSTANCE.edges.items() if "return_planned" in dsts)
#: Instances the provider must still hold; one missing from its list is lost.
HELD = frozenset({"running", "joined", "idle", "busy"})
#: Orphan searches and reclaim checks run this many status polls apart.
SCAN_EVERY_POLLS = 12


class ProviderActor(PooledActor, Actor):
    """The owner of one provider; a thousand of them take turns on a few threads (``actors.pooled``)."""

    def __init__(
        self,
        cfg: ProviderConfig,
        lease: Lease,
        revoked: Any,
        journal: Any,
        lease_actor: Any,
        controller: Controller,
        policy: PolicyConfig,
        resources: list[ResourceConfig],
        work_dir: Path,
        runner_factory: Callable[..., Any],
        clock: Callable[[], float] = time.time,
        shared: SharedProjection | None = None,
        scan_after: float = 0.0,
    ) -> None:
        """``shared``: the journal's projection of every fact, read instead of keeping one here.

        ``scan_after``: seconds after it starts acting before its first orphan search and reclaims
        check (at most one scan period). A daemon that takes up many providers at once paces their
        first scans, rather than asking every provider what it holds in the same moment.
        """
        super().__init__()
        # At most 29 attributes in all (pykka's four included): beyond that Python gives each
        # instance a dict of its own, a kilobyte more per provider.
        self.cfg = cfg
        self.lease = lease
        self.revoked = revoked
        self.journal = journal
        self.lease_actor = lease_actor
        self.controller = controller
        self.policy = policy
        self.resources = [r for r in resources if r.provider == cfg.name]
        self.make_runner = partial(runner_factory, cfg, work_dir)
        self.clock = clock
        self.scan_after = scan_after
        self.view = shared or SharedProjection()
        self.shared = shared is not None
        #: (resource, base, borrowed) committed and not yet published (published outside the lock)
        self.totals_due: list[tuple[str, int, int]] = []
        self.ready = False
        self.inherited_upto = 0
        #: key -> since: scripts running and writes awaiting their reply
        self.busy: dict[str, float] = {}
        self.last_poll = 0.0
        self.last_usage = 0.0
        self.describe_due = 0.0
        self.describe_failures = 0
        self.last_scan = 0.0
        #: machine id -> when the orphan search first found it unknown to the facts
        self.unknown_since: dict[str, float] = {}
        #: machine id -> scans in a row that did not list a machine we hold
        self.missing: dict[str, int] = {}
        self.runner: Any = None

    @property
    def name(self) -> str:
        return self.cfg.name

    # --- lifecycle -----------------------------------------------------------------

    def on_start(self) -> None:
        self.runner = self.make_runner(self._script_done)
        self.runner.may_act = lambda: not self.revoked.is_set()
        self.journal.tell(Subscribe(ref=self.actor_ref, providers=[self.name], shared=self.shared))
        log.info("provider %s: acting under fence %d", self.name, self.lease.fence)

    def on_stop(self) -> None:
        self.journal.tell(Unsubscribe(ref=self.actor_ref))
        if self.runner is not None:
            self.runner.stop(kill=True)
        log.info("provider %s: stopped", self.name)

    def _script_done(self, result: ScriptResult, tag: Any) -> None:
        # Called on a runner thread: hand it to the actor's own thread.
        if self.actor_ref.is_alive():
            self.actor_ref.tell(ScriptDone(result=result, tag=tag))

    @property
    def _tags(self) -> dict[str, str]:
        """What marks supply as ours at the provider: every request carries it, ``list`` asks by it."""
        return {"provisioner-provider": self.name}

    @property
    def p(self) -> Projection:
        """The projection read, held still by ``view.lock`` while a message is handled."""
        return self.view.projection

    @property
    def acting(self) -> bool:
        return self.ready and not self.revoked.is_set()

    # --- feed ------------------------------------------------------------------------

    def _dispatch(self, message: Any) -> Any:
        # Every handler reads the projection: the journal applies no batch meanwhile. A controller
        # call under the lock would stall every other reader, so totals are published after it.
        with self.view.lock:
            out = super()._dispatch(message)
        while self.totals_due:
            self._publish_total(*self.totals_due.pop(0))
        return out

    @handles(Restored)
    def _restored(self, msg: Restored) -> None:
        self.view.restore(msg.snapshot)

    @handles(Committed)
    def _committed(self, msg: Committed) -> None:
        # From a shared projection the facts are news only: the journal applied them already.
        if not self.shared:
            self.view.apply_all(msg.facts)
        if self.ready:
            self._reconcile(self.clock())

    @handles(CaughtUp)
    def _caught_up(self, msg: CaughtUp) -> None:
        self.ready = True
        self.inherited_upto = msg.seq
        now = self.clock()
        if self.scan_after > 0:
            period = self.policy.poll_every * SCAN_EVERY_POLLS
            self.last_scan = now - period + min(self.scan_after, period)
        self._reconcile(now)

    @handles(DemandChanged)
    def _demand(self, _: DemandChanged) -> None:
        """Demand is the planner's business."""

    @handles(Tick)
    def _tick(self, msg: Tick) -> None:
        if self.ready:
            self._reconcile(msg.now)

    @handles(HostEvents)
    def _host_events(self, msg: HostEvents) -> None:
        if not self.acting:
            return
        done = self.p.host_event_seq.get(self.name, 0)
        expected: dict[str, str] = {}
        payloads: list[Payload] = []
        by_name = self.p.live_by_name(self.name)
        for ev in msg.events:
            if ev.seq is not None and ev.seq <= done:
                continue
            inst = by_name.get(ev.name)
            if inst is None:
                continue
            state = expected.get(inst.machine_id, inst.state)
            steps = [ev.event]
            if state == "provisioning" and ev.event in ("idle", "busy"):
                steps = ["joined", ev.event]
            for step in steps:
                if step == state or not INSTANCE.allowed(state, step):
                    continue
                payloads.append(
                    InstanceChanged(
                        kind=f"instance_{step}", machine_id=inst.machine_id, state=step,
                        reason=f"host event {ev.event}", event_seq=ev.seq,
                    )
                )
                state = step
            expected[inst.machine_id] = state
        if payloads:
            self._write(payloads, tag="host-events")

    # --- writing ---------------------------------------------------------------------

    def _write(self, payloads: list[Payload], tag: str, ids: list[str | None] | None = None) -> None:
        if self.revoked.is_set():
            return
        now = self.clock()
        facts = [
            make_fact(
                p, provider=self.name, lease=self.lease.name, fence=self.lease.fence,
                fact_id=(ids[i] if ids else None), now=now,
            )
            for i, p in enumerate(payloads)
        ]
        self.busy[f"write:{tag}"] = now
        self.journal.tell(Append(facts=facts, reply_to=self.actor_ref, tag=tag))

    @handles(Appended)
    def _appended(self, msg: Appended) -> None:
        self.busy.pop(f"write:{msg.tag}", None)
        if msg.refused:
            _, lease, reason = msg.refused[0]
            if lease == self.lease.name and not self.revoked.is_set():
                log.error("provider %s: writes refused, lease lost: %s", self.name, reason)
                self.revoked.set()
                self.lease_actor.tell(LeaseRevoked(name=self.lease.name, reason=reason))
            return
        if msg.error:
            return  # nothing committed; the next reconcile tries again
        if msg.tag.startswith("total:"):
            _, resource, base, borrowed = msg.tag.split(":")
            self.totals_due.append((resource, int(base), int(borrowed)))
        if self.ready:
            self._reconcile(self.clock())

    def _publish_total(self, resource: str, base: int, borrowed: int) -> None:
        try:
            self.controller.set_resource_total(
                ResourceTotal(name=resource, base=base, borrowed=borrowed, total=base + borrowed, time=self.clock())
            )
        except Exception as exc:  # the fact is the record; the next change republishes
            log.error("provider %s: could not publish total of %s: %s", self.name, resource, exc)

    # --- reconcile -------------------------------------------------------------------

    def _reconcile(self, now: float) -> None:
        if not self.acting:
            return
        rec = self.p.provider(self.name)
        if now >= self.describe_due and "describe" not in self.busy:
            self._run("describe", {}, tag=("describe",), key="describe")
        orders, requests, _, _ = self.p.open(self.name)
        for order in orders:
            self._take_order(order, rec.status, now)
        for req in requests:
            if req.state == "planned":
                self._carry_out(req, now)
        self._expire(now)
        self._watch_joins(now)
        self._replan_returns(now)
        if now - self.last_poll >= self.policy.poll_every and "status" not in self.busy:
            self._poll(now)
        if now - self.last_scan >= self.policy.poll_every * SCAN_EVERY_POLLS:
            self._scan(now)
        if self.cfg.kind == "units" and now - self.last_usage >= self.policy.poll_every:
            self._usage(now)
        self._totals()

    def _take_order(self, order: OrderRecord, status: str, now: float) -> None:
        o = order.order
        key = f"write:order:{order.id}"
        if key in self.busy:
            return
        reqs = self.p.requests_of(order.id)
        if any(r.state not in REQUEST.terminal for r in reqs):
            return
        if o.action == "request":
            if reqs or status != "active" or now - order.at > self.policy.request_timeout:
                return
            failpoint("request.before_intent")
            payloads: list[Payload] = [
                RequestPlanned(
                    action="request", supply=o.supply, order_id=order.id, item_id=o.item_id,
                    template=o.template, resource=o.resource, count=o.count,
                )
            ]
            self._write(payloads, tag=f"order:{order.id}", ids=[f"{order.id}.1"])
            return
        # A return: give back what of it is still ours to give (failed returns are re-planned
        # by ``_replan_returns``, whoever asked for them).
        if reqs:
            return
        if o.supply == "hosts":
            machines = [m for m in o.machines
                        if (inst := self.p.instances.get(f"{self.name}/{m}")) is not None
                        and inst.state in RETURNABLE and (inst.state != "busy" or o.reason.startswith("operator"))]
            self._plan_return(machines, [], o.reason, order_id=order.id)
        else:
            held = {g: gr.count for g in o.grants if (gr := self.p.grants.get(g)) is not None
                    and gr.state in ("granted", "orphaned")}
            self._plan_return([], portions(held, o.count, held), o.reason, order_id=order.id)

    def _plan_return(self, machines: list[str], grants: Mapping[str, int], reason: str, order_id: str = "") -> None:
        """Write a return's intent with its instances or grants moved to ``return_planned``, in one batch.

        ``grants`` maps each grant to the units it gives back: all it holds, or part of it.
        """
        if not machines and not grants:
            return
        tag = f"order:{order_id}" if order_id else f"return:{','.join(sorted([*machines, *grants]))}"
        if f"write:{tag}" in self.busy:
            return
        failpoint("return.before_intent")
        if order_id:
            request_id = f"{order_id}.{len(self.p.requests_of(order_id)) + 1}"
        else:
            request_id = new_id("return")
        payloads = return_intent(self.p.grants, machines, grants, request_id, order_id, reason)
        ids: list[str | None] = [request_id] + [None] * (len(payloads) - 1)
        self._write(payloads, tag=tag, ids=ids)

    def _replan_returns(self, now: float) -> None:
        """Give back again what a failed return left behind, machines that failed to start, and orphans."""
        machines, grants = returns_due(
            self.p.instances_in("return_planned", "failed", "orphaned", provider=self.name),
            self.p.open(self.name)[3],
            self.p.requests, now, self.policy.cooldown / 4, self.policy.orphans == "return")
        for reason, ids in sorted(machines.items()):
            self._plan_return(ids, {}, reason)
        for (_, reason), parts in sorted(grants.items()):
            self._plan_return([], parts, reason)

    def _watch_joins(self, now: float) -> None:
        """A host that never joins within join_timeout is an orphan: paid for, serving no one."""
        payloads: list[Payload] = []
        for inst in self.p.instances_in("provisioning", "running", provider=self.name):
            if now - inst.seen_at > self.policy.join_timeout:
                payloads.append(InstanceChanged(
                    kind="instance_orphan_found", machine_id=inst.machine_id, state="orphaned",
                    reason=f"never joined within join_timeout {self.policy.join_timeout:.0f}s"))
        if payloads:
            self._write(payloads, tag="join-timeouts")

    def _active(self, request_id: str) -> bool:
        req = self.p.requests.get(request_id)
        return req is not None and req.state not in REQUEST.terminal

    def _carry_out(self, req: RequestRecord, now: float) -> None:
        key = f"req:{req.id}"
        if key in self.busy or f"write:{key}" in self.busy:
            return
        inherited = req.seq <= self.inherited_upto
        if inherited and req.action == "request" and req.attempts == 0 and self.cfg.script.style == "lsf":
            # Its call may have happened; an LSF script takes no token to dedupe a repeat.
            self._fail(req, "failed", "unknown outcome after restart: LSF-style scripts take no idempotency "
                       "token, so the request is not repeated; the orphan search finds what it made", None)
            return
        if req.last_attempt_at is not None and now - req.last_attempt_at < backoff(req.attempts, self.policy.backoff_max):
            return
        if req.action == "request":
            doc: dict[str, Any] = {"token": req.id, "count": req.count,
                                   "tags": {**self._tags, "provisioner-request": req.id}}
            doc["template" if req.supply == "hosts" else "resource"] = req.template or req.resource
        elif req.supply == "hosts":
            doc = {"token": req.id, "machines": [
                {"name": self.p.instances[f"{self.name}/{m}"].name, "machineId": m}
                for m in req.machines if f"{self.name}/{m}" in self.p.instances
            ]}
        else:
            doc = {"token": req.id, "resource": req.resource, "count": req.count,
                   "grants": [self._grant_ref(g) for g in req.grants]}
        failpoint(f"{req.action}.after_intent")
        self._run("request" if req.action == "request" else "return", doc, tag=("request", req.id), key=key,
                  token=req.id)

    def _grant_ref(self, grant_id: str) -> str | dict[str, Any]:
        """A grant as a units return names it: its token, with the count when only part goes back."""
        grant = self.p.grants.get(grant_id)
        if grant is not None and grant.partial_return:
            return {"token": grant_id, "count": grant.returning}
        return grant_id

    def _expire(self, now: float) -> None:
        for req in self.p.open(self.name)[1]:
            if f"write:req:{req.id}" in self.busy:
                continue
            if now - req.created_at > self.policy.request_timeout and f"req:{req.id}" not in self.busy:
                self._fail(req, "timed_out", f"not done within request_timeout {self.policy.request_timeout:.0f}s",
                           None)

    def _fail(self, req: RequestRecord, state: str, reason: str, outcome: str | None) -> None:
        kind = "request_failed" if state == "failed" else "request_timed_out"
        payloads: list[Payload] = [RequestChanged(kind=kind, request_id=req.id, state=state, reason=reason,
                                                  outcome=outcome)]
        lost_track = state == "timed_out"
        if req.action == "request" and req.supply == "units" and req.id in self.p.grants:
            g = self.p.grants[req.id]
            if g.state == "requested":
                # A timed-out grant may exist after all: an orphan until the provider says otherwise.
                payloads.append(GrantChanged(
                    kind="grant_orphan_found" if lost_track else "grant_failed", grant_id=g.id,
                    resource=g.resource, state="orphaned" if lost_track else "failed", request_id=req.id,
                    reason=reason))
        elif req.action == "return" and lost_track:
            why = f"its return {req.id} never completed"
            payloads += [InstanceChanged(kind="instance_orphan_found", machine_id=m, state="orphaned",
                                         request_id=req.id, reason=why)
                         for m in req.machines
                         if (i := self.p.instances.get(f"{self.name}/{m}")) is not None
                         and i.return_request_id == req.id and i.state in ("return_planned", "returning")]
            payloads += [return_lost(self.p.grants[g], req.id, why) for g in req.grants
                         if g in self.p.grants and self.p.grants[g].return_request_id == req.id
                         and self.p.grants[g].state in ("return_planned", "returning")]
        log.warning("provider %s: request %s %s: %s", self.name, req.id, state, reason)
        self._write(payloads, tag=f"req:{req.id}")

    def _poll(self, now: float) -> None:
        ids: dict[str, str] = {}
        for req in self.p.open(self.name)[1]:
            if req.provider_request_id and req.state in ("submitted", "running"):
                ids[req.provider_request_id] = req.id
        # A finished request may still have machines on their way up: follow them through it.
        for inst in self.p.instances_in("requested", "provisioning", provider=self.name):
            req = self.p.requests.get(inst.request_id)
            if req is not None and req.provider_request_id:
                ids[req.provider_request_id] = req.id
        self.last_poll = now
        if ids:
            self._run("status", {"requests": [{"requestId": pid} for pid in ids]}, tag=("status", ids),
                      key="status")

    def _scan(self, now: float) -> None:
        """Ask the provider what it holds and what it takes back; compare with the facts.

        v2 scripts answer ``list``; LSF-style scripts cannot, so every request
        they ever accepted is asked for its machines instead.
        """
        self.last_scan = now
        style = self.cfg.script.style
        if supports(style, "list") and "list" not in self.busy:
            self._run("list", {"tags": self._tags}, tag=("list", now), key="list")
        elif not supports(style, "list") and "scan-status" not in self.busy:
            ids = {r.provider_request_id: r.id for r in self.p.requests_by(self.name)
                   if r.action == "request" and r.provider_request_id}
            if ids:
                self._run("status", {"requests": [{"requestId": pid} for pid in ids]}, tag=("scan-status", ids),
                          key="scan-status")
        held = [{"name": i.name, "machineId": i.machine_id}
                for i in self.p.instances_in(*sorted(HELD), provider=self.name)]
        if self.cfg.kind == "hosts" and held and supports(style, "reclaims") and "reclaims" not in self.busy:
            self._run("reclaims", {"machines": held}, tag=("reclaims",), key="reclaims")

    def _usage(self, now: float) -> None:
        self.last_usage = now
        for res in self.resources:
            key = f"usage:{res.name}"
            if key not in self.busy:
                self._run("usage", {"resource": res.name}, tag=("usage", res.name), key=key)

    def _totals(self) -> None:
        for res in self.resources:
            borrowed = sum(
                g.count for g in self.p.open(self.name)[3]
                if g.resource == res.name and g.state in ("granted", "return_planned", "returning")
            )
            rec = self.p.resources.get(res.name)
            if rec is not None and rec.borrowed == borrowed and rec.base == res.base:
                continue
            if rec is None and borrowed == 0 and res.base == 0:
                continue
            tag = f"total:{res.name}:{res.base}:{borrowed}"
            if f"write:{tag}" in self.busy:
                continue
            self._write([ResourceTotalChanged(resource=res.name, base=res.base, borrowed=borrowed,
                                              total=res.base + borrowed)], tag=tag)

    def _run(self, action: str, doc: dict, tag: tuple, key: str, token: str | None = None) -> None:
        if not self.acting:
            return
        self.busy[key] = self.clock()
        self.runner.submit(action, doc, token=token, tag=(key,) + tag)

    # --- script results ----------------------------------------------------------------

    @handles(ScriptDone)
    def _script(self, msg: ScriptDone) -> None:
        key, kind, *rest = msg.tag
        self.busy.pop(key, None)
        result: ScriptResult = msg.result
        if not self.acting:
            log.info("provider %s: result of %s after losing the lease ignored", self.name, result.action)
            return
        if result.outcome == "not_started":
            # Not run: the mandate lapsed between submit and start (it may be renewed by now). Nothing
            # happened at the provider, so there is nothing to record; the next reconcile decides again.
            log.info("provider %s: %s", self.name, result.reason)
            return
        if result.outcome in DISABLING:
            self._disable(result)
        if kind == "describe":
            self._described(result)
        elif kind == "request":
            self._requested(rest[0], result)
        elif kind == "status":
            self._status(rest[0], result)
        elif kind == "usage":
            self._used(rest[0], result)
        elif kind == "list":
            self._listed(rest[0], result)
        elif kind == "scan-status":
            self._scanned(result)
        elif kind == "reclaims":
            self._reclaimed(result)

    def _disable(self, result: ScriptResult) -> None:
        if self.p.provider(self.name).status != "disabled" and "write:disable" not in self.busy:
            log.error("provider %s: disabled: %s", self.name, result.reason)
            self._write([ProviderAdmin(kind="provider_disabled", reason=result.reason)], tag="disable")

    def _described(self, result: ScriptResult) -> None:
        now = self.clock()
        if not result.ok:
            self.describe_failures += 1
            self.describe_due = now + backoff(self.describe_failures, self.policy.backoff_max, base=5.0)
            log.warning("provider %s: describe failed: %s", self.name, result.reason)
            return
        self.describe_failures = 0
        self.describe_due = now + 3600.0
        try:
            desc = merge_description(self.cfg, result.output)  # type: ignore[arg-type]
        except ValueError as exc:
            log.error("provider %s: description unusable: %s", self.name, exc)
            return
        if desc != self.p.provider(self.name).description:
            self._write([ProviderDescribed(description=desc)], tag="describe")

    def _requested(self, request_id: str, result: ScriptResult) -> None:
        req = self.p.requests.get(request_id)
        if req is None or req.state != "planned":
            return
        failpoint(f"{req.action}.after_script")
        if result.ok and isinstance(result.output, Accepted):
            payloads: list[Payload] = [RequestChanged(kind="request_submitted", request_id=req.id, state="submitted",
                                                      provider_request_id=result.output.provider_request_id)]
            if req.action == "return" and req.supply == "hosts":
                payloads += [InstanceChanged(kind="instance_returning", machine_id=m, state="returning",
                                             request_id=req.id)
                             for m in req.machines
                             if self.p.instances.get(f"{self.name}/{m}") is not None
                             and self.p.instances[f"{self.name}/{m}"].state == "return_planned"]
            elif req.action == "return":
                payloads += [GrantChanged(kind="grant_returning", grant_id=g, resource=self.p.grants[g].resource,
                                          state="returning", request_id=req.id, count=self.p.grants[g].returning)
                             for g in req.grants if g in self.p.grants
                             and self.p.grants[g].state == "return_planned"]
            self._write(payloads, tag=f"req:{req.id}")
            return
        takes_token = self.cfg.script.style == "v2"
        if try_again(result.outcome, takes_token, req.action, req.attempts):
            # Same state, one more attempt: the next try repeats the same token.
            self._write([RequestChanged(kind="request_status", request_id=req.id, state="planned",
                                        reason=result.reason, outcome=result.outcome)], tag=f"req:{req.id}")
            return
        reason = result.reason
        if result.outcome == "timeout" and not retryable(result.outcome, takes_token, req.action):
            reason += " (unknown outcome: LSF-style scripts take no token, so it is not repeated; " \
                      "the orphan search finds what it made)"
        self._fail(req, "failed", reason, result.outcome)

    def _status(self, ids: dict[str, str], result: ScriptResult) -> None:
        if not result.ok or not isinstance(result.output, StatusReport):
            log.warning("provider %s: status failed: %s", self.name, result.reason)
            return
        payloads: list[Payload] = []
        for st in result.output.requests:
            req = self.p.requests.get(ids.get(st.request_id, ""))
            if req is None:
                continue
            payloads += status_facts(self.name, self.p.instances, self.p.grants, req, st.status, st.message,
                                     st.machines, st.granted)
        if payloads:
            self._write(payloads, tag="status")

    def _listed(self, started: float, result: ScriptResult) -> None:
        if not result.ok or not isinstance(result.output, Holdings):
            log.warning("provider %s: orphan search failed: %s", self.name, result.reason)
            return
        now = self.clock()
        held = result.output
        payloads = _unknown_machines(self, held.machines, now)
        listed = {m.machine_id for m in held.machines}
        mine = self.p.instances_in(*sorted(HELD), provider=self.name)
        self.missing = {k: n for k, n in self.missing.items() if k not in listed and any(
            i.machine_id == k for i in mine)}
        for inst in mine:
            if inst.machine_id in listed:
                continue
            if inst.seen_at >= started:
                continue  # recorded after the list was taken
            # Absent from two lists in a row: the provider no longer has it.
            self.missing[inst.machine_id] = self.missing.get(inst.machine_id, 0) + 1
            if self.missing[inst.machine_id] >= 2:
                payloads.append(InstanceChanged(kind="instance_lost", machine_id=inst.machine_id, state="lost",
                                                reason="no longer held by the provider"))
                del self.missing[inst.machine_id]
        for g in held.grants:
            key = g.token or g.request_id
            grant = self.p.grants.get(key)
            if grant is None:
                orphan_id = f"orphan-{key}" if key else new_id("orphan")
                if orphan_id not in self.p.grants:
                    payloads.append(GrantChanged(kind="grant_orphan_found", grant_id=orphan_id, resource=g.resource,
                                                 state="orphaned", count=g.count,
                                                 reason="held by the provider, unknown to the facts"))
            elif grant.state == "failed":
                payloads.append(GrantChanged(kind="grant_orphan_found", grant_id=grant.id, resource=grant.resource,
                                             state="orphaned", count=g.count,
                                             reason="recorded as failed, yet the provider still holds it"))
            elif grant.state == "granted" and g.count < grant.count and grant.history.changes[-1].at < started:
                # A partial return that timed out went back after all: the units stop counting and costing.
                payloads.append(GrantChanged(kind="grant_part_returned", grant_id=grant.id, resource=grant.resource,
                                             state="granted", count=grant.count - g.count,
                                             reason="the provider holds fewer units than recorded"))
        if payloads:
            self._write(payloads, tag="orphans")

    def _scanned(self, result: ScriptResult) -> None:
        if not result.ok or not isinstance(result.output, StatusReport):
            log.warning("provider %s: orphan search by status failed: %s", self.name, result.reason)
            return
        machines = [m for st in result.output.requests for m in st.machines if m.result != "fail"]
        payloads = _unknown_machines(self, machines, self.clock())
        if payloads:
            self._write(payloads, tag="orphans")

    def _reclaimed(self, result: ScriptResult) -> None:
        if not result.ok or not isinstance(result.output, Reclaims):
            log.warning("provider %s: reclaims check failed: %s", self.name, result.reason)
            return
        payloads: list[Payload] = []
        by_name: dict[str, InstanceRecord] | None = None
        for r in result.output.machines:
            inst = self.p.instances.get(f"{self.name}/{r.machine_id}") if r.machine_id else None
            if inst is None and r.name:
                by_name = self.p.live_by_name(self.name) if by_name is None else by_name
                inst = by_name.get(r.name)
            if inst is not None and inst.state not in INSTANCE.terminal and INSTANCE.allowed(inst.state, "lost"):
                payloads.append(InstanceChanged(kind="instance_lost", machine_id=inst.machine_id, state="lost",
                                                reason="taken back by the provider"))
        if payloads:
            self._write(payloads, tag="reclaims")

    def _used(self, resource: str, result: ScriptResult) -> None:
        if not result.ok or not isinstance(result.output, Usage):
            if result.outcome != "ok":
                log.warning("provider %s: usage failed: %s", self.name, result.reason)
            return
        rec = self.p.resources.get(resource)
        if rec is None or rec.in_use != result.output.in_use:
            self._write([UsageObserved(resource=resource, in_use=result.output.in_use, total=result.output.total)],
                        tag=f"usage:{resource}")



# The orphan search and reclaims are long enough to read on their own.
def _unknown_machines(actor: ProviderActor, machines: list, now: float) -> list[Payload]:
    """Machines the provider holds for us that no fact knows, once they stay unknown long enough.

    A machine of a request whose answer is not recorded yet is unknown for a
    moment; it becomes an orphan only when no request of ours is unresolved,
    or when it has stayed unknown for request_timeout.
    """
    unresolved = any(r.action == "request" for r in actor.p.open(actor.name)[1])
    out: list[Payload] = []
    listed = set()
    for m in machines:
        listed.add(m.machine_id)
        inst = actor.p.instances.get(f"{actor.name}/{m.machine_id}")
        if inst is not None:
            if inst.state == "failed" and m.result != "fail":
                out.append(InstanceChanged(kind="instance_orphan_found", machine_id=m.machine_id, state="orphaned",
                                           reason="recorded as failed, yet the provider still holds it"))
            continue
        first = actor.unknown_since.setdefault(m.machine_id, now)
        if unresolved and now - first < actor.policy.request_timeout:
            continue
        out.append(InstanceSeen(machine_id=m.machine_id, name=m.name or m.machine_id, template=m.template,
                                state="orphaned", launched_at=m.launched_at, private_ip=m.private_ip,
                                reason="held by the provider, unknown to the facts"))
    for machine_id in list(actor.unknown_since):
        if machine_id not in listed or f"{actor.name}/{machine_id}" in actor.p.instances:
            del actor.unknown_since[machine_id]
    return out
