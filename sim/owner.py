"""A simulated provider owner: the facts ``actors/provider.py`` writes, driven by events instead of ticks.

An order becomes an intent (``request_planned``), the intent a call to the
simulated provider (``Cloud``), its answer ``request_submitted`` (or a
retry with backoff, or a failure the cooldowns read), and status polls
turn what the provider did into instance and grant facts. Polls and
reclaim scans happen only when the provider has news, at the moment the
live owner's periodic poll would have seen it (the next multiple of
``poll_every``), so a quiet provider costs nothing.

A failover drops the lease and whatever calls were in flight; after the
lease TTL the new owner resumes each record by the restart rules declared
beside the state machines (``messages/states.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from config.models import PolicyConfig, ResourceConfig
from messages.facts import (
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    LeaseChanged,
    Payload,
    RequestChanged,
    RequestPlanned,
    ResourceTotalChanged,
    UsageObserved,
)
from messages.grant_returns import return_lost
from messages.records import RequestRecord
from messages.return_intents import return_intent
from messages.states import INSTANCE, REQUEST, OnRestart
from messages.status_facts import status_facts
from policy.reclaim import portions
from policy.retry import backoff, try_again
from policy.returns import returns_due
from sim.cloud import Answer, Cloud

if TYPE_CHECKING:
    from sim.engine import Engine

#: Instance states from which a return may be planned.
RETURNABLE = frozenset(s for s, dsts in INSTANCE.edges.items() if "return_planned" in dsts)
#: The owner looks for reclaims every this many polls.
SCAN_EVERY_POLLS = 12


class Owner:
    def __init__(self, engine: Engine, cloud: Cloud, policy: PolicyConfig, resources: Sequence[ResourceConfig]) -> None:
        self.e = engine
        self.cloud = cloud
        self.name = cloud.desc.name
        self.kind = cloud.desc.kind
        self.tokens = cloud.behaviour.tokens
        self.policy = policy
        self.resources = [r for r in resources if r.provider == self.name]
        self.fence = 0
        self.acting = False
        #: Bumped by every failover: answers of calls made before it are lost.
        self.epoch = 0
        #: request id -> epoch of the call in flight for it
        self.calling: dict[str, int] = {}
        self.polls: set[float] = set()
        self.scans: set[float] = set()
        #: host events that arrived while no owner held the lease: (instance key, event)
        self.queued: list[tuple[str, str]] = []
        self.failovers = 0

    # --- lease ------------------------------------------------------------------------------

    def write(self, payloads: list[Payload], ids: list[str | None] | None = None) -> None:
        self.e.write(self.name, payloads, ids, lease=(f"provider:{self.name}", self.fence))

    def acquire(self) -> None:
        self.fence += 1
        self.acting = True
        self.e.write(self.name, [LeaseChanged(kind="lease_acquired", name=f"provider:{self.name}",
                                              holder=f"owner-{self.fence}", fence=self.fence)],
                     lease=(f"provider:{self.name}", self.fence))

    def fail_over(self) -> None:
        """The owner dies: its lease lapses, its calls' answers are lost; a standby takes over after the TTL."""
        if not self.acting:
            return
        self.failovers += 1
        self.acting = False
        self.epoch += 1
        self.calling.clear()
        self.e.write(self.name, [LeaseChanged(kind="lease_lost", name=f"provider:{self.name}",
                                              holder=f"owner-{self.fence}", fence=self.fence)],
                     lease=(f"provider:{self.name}", self.fence))
        self.e.at(self.e.now + self.e.cfg.lease.ttl, self.take_over)

    def take_over(self) -> None:
        self.acquire()
        p = self.e.p
        for req in self._open():
            rule = REQUEST.on_restart[req.state]
            if rule is OnRestart.REPEAT_OR_FAIL and not self.tokens and req.action == "request" and req.attempts == 0:
                self._fail(req, "failed", "unknown outcome after restart: LSF-style scripts take no idempotency "
                           "token, so the request is not repeated; the orphan search finds what it made", None)
                self.e.at(self._scan_time(self.e.now + self.policy.request_timeout), self.find_orphans, req.id)
            elif rule in (OnRestart.REPEAT, OnRestart.REPEAT_OR_FAIL):
                self.call(req.id)
            elif rule is OnRestart.POLL:
                self.poll_at(self.e.now)
        for inst in p.instances_in("returning", provider=self.name):
            if INSTANCE.on_restart["returning"] is OnRestart.POLL:
                self.poll_at(self.e.now)
        for order in p.open(self.name)[0]:
            self.take(order.id)
        queued, self.queued = self.queued, []
        for key, event in queued:
            self.host_event(key, event)

    # --- orders --------------------------------------------------------------------------------

    def take(self, order_id: str) -> None:
        """An order becomes an intent, then a call (``ProviderActor._take_order``)."""
        if not self.acting:
            return
        p = self.e.p
        order = p.orders[order_id]
        if p.requests_of(order_id):
            return
        o = order.order
        if o.action == "request":
            status = p.providers[self.name].status
            if status != "active" or self.e.now - order.at > self.policy.request_timeout:
                return
            rid = f"{order_id}.1"
            self.write([RequestPlanned(action="request", supply=o.supply, order_id=order_id, item_id=o.item_id,
                                       template=o.template, resource=o.resource, count=o.count)], [rid])
            self.call(rid)
            return
        if o.supply == "hosts":
            machines = [m for m in o.machines if (i := p.instances.get(f"{self.name}/{m}")) is not None
                        and i.state in RETURNABLE and (i.state != "busy" or o.reason.startswith("operator"))]
            self.plan_return(machines, {}, o.reason, order_id)
        else:
            held = {g: gr.count for g in o.grants if (gr := p.grants.get(g)) is not None
                    and gr.state in ("granted", "orphaned")}
            self.plan_return([], portions(held, o.count, held), o.reason, order_id)

    def plan_return(self, machines: list[str], grants: dict[str, int], reason: str, order_id: str = "") -> None:
        """A return's intent, its hosts or grants moved to ``return_planned``; ``grants``: units each gives back."""
        if not machines and not grants:
            return
        p = self.e.p
        rid = f"{order_id}.{len(p.requests_of(order_id)) + 1}" if order_id else self.e.new_id("return")
        payloads = return_intent(p.grants, machines, grants, rid, order_id, reason)
        self.write(payloads, [rid] + [None] * (len(payloads) - 1))
        for m in machines:
            self.e.scheduler_leaves(f"{self.name}/{m}")
        self.call(rid)

    # --- calls ---------------------------------------------------------------------------------

    def call(self, rid: str) -> None:
        """Run the request or return script now; its answer arrives after the provider's call time."""
        if not self.acting or rid in self.calling:
            return
        req = self.e.p.requests[rid]
        now = self.e.now
        if req.action == "request":
            answer = self.cloud.request(rid, req.template or req.resource or "", req.count, now)
        else:
            grants = {g: self.e.p.grants[g].returning or self.e.p.grants[g].count for g in req.grants
                      if g in self.e.p.grants}
            answer = self.cloud.give_back(rid, list(req.machines), grants, now)
        self.calling[rid] = self.epoch
        self.e.at(now + self.cloud.behaviour.call_time.draw(self.cloud.rng), self.answered, rid, answer, self.epoch)

    def answered(self, rid: str, answer: Answer, epoch: int) -> None:
        if epoch != self.epoch or self.calling.get(rid) != epoch:
            return  # the owner that made the call died meanwhile
        del self.calling[rid]
        p = self.e.p
        req = p.requests[rid]
        if req.state == "planned":
            if answer.outcome == "ok":
                self._submitted(req, answer.provider_request_id)
            elif try_again(answer.outcome, self.tokens, req.action, req.attempts):
                self.write([RequestChanged(kind="request_status", request_id=rid, state="planned",
                                           reason=answer.reason, outcome=answer.outcome)])
                self.e.at(self.e.now + backoff(req.attempts, self.policy.backoff_max), self.call, rid)
            else:
                self._fail(req, "failed", answer.reason, answer.outcome)
        self.expire(rid)

    def _submitted(self, req: RequestRecord, provider_request_id: str) -> None:
        p = self.e.p
        payloads: list[Payload] = [RequestChanged(kind="request_submitted", request_id=req.id, state="submitted",
                                                  provider_request_id=provider_request_id)]
        if req.action == "return" and req.supply == "hosts":
            payloads += [InstanceChanged(kind="instance_returning", machine_id=m, state="returning",
                                         request_id=req.id)
                         for m in req.machines if (i := p.instances.get(f"{self.name}/{m}")) is not None
                         and i.state == "return_planned"]
        elif req.action == "return":
            payloads += [GrantChanged(kind="grant_returning", grant_id=g, resource=p.grants[g].resource,
                                      state="returning", request_id=req.id, count=p.grants[g].returning)
                         for g in req.grants if g in p.grants and p.grants[g].state == "return_planned"]
        self.write(payloads)
        self.poll_at(self.e.now)
        call = self.cloud.calls[provider_request_id]
        if req.action == "return" or self.kind == "units":
            self.poll_at(call.ready_at)
        for mid in call.machines:
            m = self.cloud.machines[mid]
            if req.action == "request":
                self.poll_at(m.ready_at)
                if m.reclaim_at is not None:
                    self.e.at(m.reclaim_at, self.e.reclaimed, f"{self.name}/{mid}")
                    self.scan_at(m.reclaim_at)
        self.e.at(req.created_at + self.policy.request_timeout + self.e.quantum, self.expire, req.id)

    def expire(self, rid: str) -> None:
        """Fail a request not done within request_timeout (``ProviderActor._expire``)."""
        req = self.e.p.requests[rid]
        if not self.acting or req.state in REQUEST.terminal or rid in self.calling:
            return
        if self.e.now - req.created_at > self.policy.request_timeout:
            self._fail(req, "timed_out", f"not done within request_timeout {self.policy.request_timeout:.0f}s", None)

    def _fail(self, req: RequestRecord, state: str, reason: str, outcome: str | None) -> None:
        p = self.e.p
        kind = "request_failed" if state == "failed" else "request_timed_out"
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
            payloads += [InstanceChanged(kind="instance_orphan_found", machine_id=m, state="orphaned",
                                         request_id=req.id, reason=why)
                         for m in req.machines if (i := p.instances.get(f"{self.name}/{m}")) is not None
                         and i.return_request_id == req.id and i.state in ("return_planned", "returning")]
            payloads += [return_lost(p.grants[g], req.id, why)
                         for g in req.grants if g in p.grants and p.grants[g].return_request_id == req.id
                         and p.grants[g].state in ("return_planned", "returning")]
        self.write(payloads)
        if req.action == "return":
            self.return_again()
            self.e.at(self.e.now + self.policy.cooldown / 4, self.return_again)

    def return_again(self) -> None:
        """Give back again what a failed return left behind, failed machines and orphans, as live owners do."""
        if not self.acting:
            return
        p = self.e.p
        machines, grants = returns_due(
            p.instances_in("return_planned", "failed", "orphaned", provider=self.name),
            p.open(self.name)[3],
            p.requests, self.e.now, self.policy.cooldown / 4, self.policy.orphans == "return")
        for reason, ids in sorted(machines.items()):
            self.plan_return(ids, {}, reason)
        for (_, reason), parts in sorted(grants.items()):
            self.plan_return([], parts, reason)

    # --- polls -----------------------------------------------------------------------------------

    def poll_at(self, t: float) -> None:
        at = self.e.grid(max(t, self.e.now), self.policy.poll_every)
        if at not in self.polls:
            self.polls.add(at)
            self.e.at(at, self.poll, at)

    def scan_at(self, t: float) -> None:
        at = self._scan_time(t)
        if at not in self.scans:
            self.scans.add(at)
            self.e.at(at, self.scan, at)

    def _scan_time(self, t: float) -> float:
        return self.e.grid(max(t, self.e.now), self.policy.poll_every * SCAN_EVERY_POLLS)

    def poll(self, at: float) -> None:
        """A status poll of every open call and every machine still coming (``ProviderActor._status``)."""
        self.polls.discard(at)
        if not self.acting:
            return
        p = self.e.p
        now = self.e.now
        asked = {r.id: r for r in self._open() if r.provider_request_id and r.state in ("submitted", "running")}
        for inst in p.instances_in("requested", "provisioning", provider=self.name):
            req = p.requests.get(inst.request_id)
            if req is not None and req.provider_request_id:
                asked[req.id] = req
        payloads: list[Payload] = []
        for req in asked.values():
            st = self.cloud.status(req.provider_request_id or "", now)
            if st is None:
                continue
            payloads += status_facts(self.name, p.instances, p.grants, req, st.status, st.message, st.machines,
                                     st.granted)
        if payloads:
            self.write(payloads)
            if self.resources:
                self.totals()

    def scan(self, at: float) -> None:
        """The reclaims check: hosts the provider took back are lost (``ProviderActor._reclaimed``)."""
        self.scans.discard(at)
        if not self.acting:
            self.scan_at(self.e.now + self.e.cfg.lease.ttl)
            return
        payloads: list[Payload] = []
        for inst in self.e.p.instances_in("running", "joined", "idle", "busy", provider=self.name):
            m = self.cloud.machines.get(inst.machine_id)
            if m is not None and m.reclaim_at is not None and m.reclaim_at <= self.e.now:
                payloads.append(InstanceChanged(kind="instance_lost", machine_id=inst.machine_id, state="lost",
                                                reason="taken back by the provider"))
        if payloads:
            self.write(payloads)

    def find_orphans(self, rid: str) -> None:
        """The orphan search finds what an abandoned request made (``_unknown_machines``)."""
        if not self.acting:
            return
        p = self.e.p
        found: list[Payload] = [
            InstanceSeen(machine_id=m.machine_id, name=m.name, template=m.template, state="orphaned",
                         launched_at=m.launched_at, reason="held by the provider, unknown to the facts")
            for m in self.cloud.machines_of(rid)
            if f"{self.name}/{m.machine_id}" not in p.instances and m.held(self.e.now)]
        if found:
            self.write(found)
            self.return_again()

    # --- the cluster's side ----------------------------------------------------------------------

    def host_event(self, key: str, event: str) -> None:
        """A host event from the scheduler, as the owner turns it into a fact (``_host_events``)."""
        if not self.acting:
            self.queued.append((key, event))
            return
        inst = self.e.p.instances.get(key)
        if inst is None:
            return
        steps = ["joined", event] if inst.state == "provisioning" and event in ("idle", "busy") else [event]
        state = inst.state
        payloads: list[Payload] = []
        for step in steps:
            if step == state or not INSTANCE.allowed(state, step):
                continue
            payloads.append(InstanceChanged(kind=f"instance_{step}", machine_id=inst.machine_id, state=step,
                                            reason=f"host event {event}"))
            state = step
        if payloads:
            self.write(payloads)

    def observe_use(self, resource: str, in_use: int) -> None:
        """The license server's use, as the owner's usage poll reports it."""
        if not self.acting:
            return
        rec = self.e.p.resources.get(resource)
        if rec is None or rec.in_use != in_use:
            self.write([UsageObserved(resource=resource, in_use=in_use)])

    def totals(self) -> None:
        """Publish each elastic resource's total when its borrowed part changed (``_totals``)."""
        for res in self.resources:
            borrowed = sum(g.count for g in self.e.p.open(self.name)[3]
                           if g.resource == res.name and g.state in ("granted", "return_planned", "returning"))
            rec = self.e.p.resources.get(res.name)
            if rec is not None and rec.borrowed == borrowed and rec.base == res.base:
                continue
            if rec is None and borrowed == 0 and res.base == 0:
                continue
            self.write([ResourceTotalChanged(resource=res.name, base=res.base, borrowed=borrowed,
                                             total=res.base + borrowed)])

    def _open(self) -> list[RequestRecord]:
        return self.e.p.open(self.name)[1]

