"""State rebuilt from facts: the same code serves replay after a restart and live updates.

``apply`` never raises for a bad fact (an illegal transition in the log means a
bug or a corrupt log, and the daemon must live on): it records an anomaly and
skips the fact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from sys import intern
from typing import Any, Callable, Iterable, Iterator, Mapping

from messages.facts import (
    USE_READ,
    BudgetEvent,
    Decision,
    Fact,
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    LeaseChanged,
    LicensePublished,
    NodesChanged,
    Order,
    ProviderAdmin,
    ProviderDescribed,
    ProviderHealth,
    ProviderReconfigured,
    RequestChanged,
    RequestPlanned,
    ResourceTotalChanged,
    UsageObserved,
    make_fact,
)
from messages.records import (
    DecisionRecord,
    GrantRecord,
    InstanceRecord,
    NodeRecord,
    OrderRecord,
    ProviderRecord,
    RequestRecord,
    ResourceRecord,
)
from messages.states import GRANT, INSTANCE, REQUEST, RETURNING, SERVING, History, IllegalTransition
from state.decisions import ItemDecisions

log = logging.getLogger(__name__)

_ADMIN_STATUS = {
    "provider_paused": "paused",
    "provider_resumed": "active",
    "provider_drained": "drained",
    "provider_disabled": "disabled",
}


_bulk_lock = threading.Lock()
_bulk_depth = 0
_bulk_restore = False


def pause_gc() -> None:
    """Pause the cyclic garbage collector while a replay builds many long-lived objects.

    Replay allocates records that all live on; the collector's repeated scans
    of them cost more than the replay itself (measured: 3x). Nothing built
    here forms cycles that need collecting sooner. Several actors replay at
    once on their own threads, so pauses are counted: the collector resumes
    when the last one ends (``resume_gc``).
    """
    global _bulk_depth, _bulk_restore
    with _bulk_lock:
        if _bulk_depth == 0:
            _bulk_restore = gc.isenabled()
            gc.disable()
        _bulk_depth += 1


def resume_gc() -> None:
    global _bulk_depth
    with _bulk_lock:
        _bulk_depth -= 1
        if _bulk_depth == 0 and _bulk_restore:
            gc.enable()


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    pause_gc()
    try:
        yield
    finally:
        resume_gc()


@dataclass(slots=True)
class Part:
    """One provider's indexes: what is still in motion there, in the order it got
    there, and its requests.

    An owner reconciles from its own part, so a projection of every provider
    serves a thousand owners without any of them scanning the others' records.
    Dicts serve as ordered sets: iteration follows the log.
    """

    #: orders no request has taken up yet
    open_orders: dict[str, None] = field(default_factory=dict)
    #: requests not in a terminal state
    open_requests: dict[str, None] = field(default_factory=dict)
    #: instance keys and grant ids not in a terminal state
    live_instances: dict[str, None] = field(default_factory=dict)
    live_grants: dict[str, None] = field(default_factory=dict)
    #: every request, ended or not (LSF-style owners ask each one for its machines)
    requests: dict[str, None] = field(default_factory=dict)
    #: how many of the live instances are in each state (a state none is in has no entry): a question
    #: about states none of them is in, which most of an owner's ticks ask, is answered without a scan
    live_states: dict[str, int] = field(default_factory=dict)

    def live_added(self, state: str) -> None:
        self.live_states[state] = self.live_states.get(state, 0) + 1

    def live_left(self, state: str) -> None:
        n = self.live_states[state] - 1
        if n:
            self.live_states[state] = n
        else:
            del self.live_states[state]


class Open:
    """What is still in motion at a provider, each in the order of the log: untaken orders, requests not in
    a terminal state, live instances and grants (unpacks as those four).

    Each list is made when it is read: an owner reads its open requests or its grants at every tick, and
    making its hundreds of live instances along with them cost more than the rest of the tick.
    """

    __slots__ = ("_p", "_parts")

    def __init__(self, p: Projection, parts: list[Part]) -> None:
        self._p, self._parts = p, parts

    @property
    def orders(self) -> list[OrderRecord]:
        """Orders no request has taken up yet."""
        return _records(self._p.orders, self._parts, _OPEN_ORDERS)

    @property
    def requests(self) -> list[RequestRecord]:
        return _records(self._p.requests, self._parts, _OPEN_REQUESTS)

    @property
    def instances(self) -> list[InstanceRecord]:
        return _records(self._p.instances, self._parts, _LIVE_INSTANCES)

    @property
    def grants(self) -> list[GrantRecord]:
        return _records(self._p.grants, self._parts, _LIVE_GRANTS)

    def __iter__(self) -> Iterator[list]:
        return iter((self.orders, self.requests, self.instances, self.grants))


_OPEN_ORDERS, _OPEN_REQUESTS = attrgetter("open_orders"), attrgetter("open_requests")
_LIVE_INSTANCES, _LIVE_GRANTS = attrgetter("live_instances"), attrgetter("live_grants")


def _records(table: Mapping[Any, Any], parts: list[Part], keys: Callable[[Part], Iterable[Any]]) -> list:
    """The records of ``table`` that one index of each part names, part by part, in each index's order."""
    return [table[k] for part in parts for k in keys(part)]


#: The part of a provider with nothing in motion: read, never written.
_NO_PART = Part()


class Projection:
    """Everything the facts say, optionally only for some providers."""

    def __init__(self, only: Callable[[Fact], bool] | None = None, keep_decisions: int = 1000) -> None:
        self._only = only
        self.seq = 0
        self.providers: dict[str, ProviderRecord] = {}
        self.planner: tuple[str, int] = ("", 0)
        self.orders: dict[str, OrderRecord] = {}
        self.requests: dict[str, RequestRecord] = {}
        #: keyed by ``provider/machine_id``
        self.instances: dict[str, InstanceRecord] = {}
        #: per provider: the last host event seq its owner turned into a fact
        self.host_event_seq: dict[str, int] = {}
        self.grants: dict[str, GrantRecord] = {}
        self.resources: dict[str, ResourceRecord] = {}
        #: a scheduler's named nodes, by name (``nodes_*`` facts)
        self.nodes: dict[str, NodeRecord] = {}
        #: provider -> what of it is still in motion (see ``Part``)
        self.parts: dict[str, Part] = {}
        #: the last decisions, whatever their item (for people: the decisions view)
        self.decisions: deque[DecisionRecord] = deque(maxlen=keep_decisions)
        #: per item, the decisions a planning round reads (``state.decisions``)
        self.item_decisions = ItemDecisions()
        self.budget_events: deque[tuple[float, BudgetEvent]] = deque(maxlen=keep_decisions)
        self.anomalies: deque[str] = deque(maxlen=100)

    # --- feeding ----------------------------------------------------------------

    def apply_all(self, facts: Iterable[Fact]) -> int:
        """Apply committed facts in order; returns how many were applied (the others were skipped:
        already seen, filtered, of no concern here, or bad)."""
        # One loop, the steps written out, serves ``apply`` too: a replay runs it for every fact of the log.
        only, handlers = self._only, _HANDLERS
        applied = 0
        for fact in facts:
            seq = fact.seq
            if seq is not None:
                if seq <= self.seq:
                    continue
                self.seq = seq
            if only is not None and not only(fact):
                continue
            payload = fact.payload
            handler = handlers.get(type(payload))
            if handler is None:
                continue
            try:
                handler(self, fact, payload)
            except (IllegalTransition, KeyError, ValueError) as exc:
                self._skipped(fact, exc)
                continue
            applied += 1
        return applied

    def apply(self, fact: Fact) -> bool:
        """Apply one committed fact; False when it was skipped (already seen, filtered, bad)."""
        return self.apply_all((fact,)) == 1

    def _skipped(self, fact: Fact, exc: Exception) -> None:
        note = f"fact {fact.seq} {fact.id} ({fact.kind}, provider {fact.provider!r}) skipped: {exc}"
        self.anomalies.append(note)
        log.warning(note)

    # --- lookups ------------------------------------------------------------------

    @property
    def decided(self) -> list[DecisionRecord]:
        """Per demand item, the decisions a planning round reads, in log order (``policy.rounds.PlanState``)."""
        return self.item_decisions.records()

    def provider(self, name: str) -> ProviderRecord:
        rec = self.providers.get(name)
        if rec is None:
            rec = self.providers[name] = ProviderRecord(name=intern(name))
        return rec

    def resource(self, name: str) -> ResourceRecord:
        rec = self.resources.get(name)
        if rec is None:
            rec = self.resources[name] = ResourceRecord(name=name)
        return rec

    def live_by_name(self, provider: str) -> dict[str, InstanceRecord]:
        """``provider``'s live instances by host name (the last seen under a name wins).

        Made when asked, not kept: host events and reclaims, which name hosts, come
        in batches, and an index kept for good cost some 40 bytes per instance.
        """
        instances = self.instances
        return {rec.host: rec for k in self.part(provider).live_instances if (rec := instances[k]).host}

    def part(self, provider: str) -> Part:
        """What of ``provider`` is still in motion (an empty part if nothing ever was)."""
        return self.parts.get(provider, _NO_PART)

    def _part(self, provider: str) -> Part:
        part = self.parts.get(provider)
        if part is None:
            part = self.parts[intern(provider)] = Part()
        return part

    def _parts(self, provider: str | None) -> list[Part]:
        return list(self.parts.values()) if provider is None else [self.part(provider)]

    def open(self, provider: str | None = None) -> "Open":
        """What is still in motion at ``provider`` (None: at every provider, one after another):
        untaken orders, open requests, live instances and grants, each in the order of the log."""
        return Open(self, self._parts(provider))

    def instances_in(self, *states: str, provider: str | None = None) -> list[InstanceRecord]:
        """Live instances of ``provider`` (None: of every provider) now in any of ``states``, in the order of the log.

        A scan of the live instances, not an index by state: an owner reads its
        own hundreds, and such an index cost some 40 bytes per instance.
        """
        ended = INSTANCE.terminal.intersection(states)
        if ended:
            raise ValueError(f"instances_in reads live instances only, not {sorted(ended)}")
        # The state read as ``InstanceRecord.state`` reads it, without a property call per record; a
        # part with no live instance in any of the states is not scanned at all. An owner asks this
        # of its hundreds of live instances several times at every tick.
        look = self.instances.__getitem__
        return [rec for part in self._parts(provider) if any(map(part.live_states.__contains__, states))
                for rec in map(look, part.live_instances) if (rec.history.state or "requested") in states]

    def requests_by(self, provider: str) -> list[RequestRecord]:
        """Every request of ``provider``, ended or not, in the order of the log."""
        return [self.requests[r] for r in self.part(provider).requests]

    def live_keys(self) -> Iterable[str]:
        """The keys of every live instance."""
        return chain.from_iterable(part.live_instances for part in self.parts.values())

    def live_grant_ids(self) -> Iterable[str]:
        """The ids of every live grant."""
        return chain.from_iterable(part.live_grants for part in self.parts.values())

    def grants_after(self, provider: str, payloads: Iterable[object]) -> list[GrantRecord]:
        """``provider``'s live grants as they will be once ``payloads`` are written and applied.

        The payloads are applied, by this projection's own rules, to copies: an owner that writes a
        grant and the total it causes in one batch computes that total by the arithmetic the facts
        will follow. This projection is left as it is.
        """
        scratch = Projection()
        part = scratch._part(provider)
        for g in self.open(provider).grants:
            scratch.grants[g.id] = dataclasses.replace(g, given_back=list(g.given_back))
            part.live_grants[g.id] = None
        for payload in payloads:
            if isinstance(payload, GrantChanged):
                scratch.apply(make_fact(payload, provider=provider))
        return list(scratch.grants.values())

    def requests_of(self, order_id: str) -> list[RequestRecord]:
        order = self.orders.get(order_id)
        return [self.requests[r] for r in order.request_ids if r in self.requests] if order else []

    # --- handlers -------------------------------------------------------------------

    def _described(self, fact: Fact, p: ProviderDescribed) -> None:
        rec = self.provider(fact.provider)
        rec.description = p.description
        rec.described_at = fact.time

    def _admin(self, fact: Fact, p: ProviderAdmin) -> None:
        rec = self.provider(fact.provider)
        rec.status = _ADMIN_STATUS[p.kind]
        rec.status_reason = p.reason
        if p.kind == "provider_resumed":  # an operator says the cause is fixed: its failures count no more
            self._clear_strikes(rec, fact.time)

    def _reconfigured(self, fact: Fact, p: ProviderReconfigured) -> None:
        self._clear_strikes(self.provider(fact.provider), fact.time)

    def _clear_strikes(self, rec: ProviderRecord, at: float) -> None:
        """Every request of ``rec`` that ended before this fact counts no strike: from the fact's time, or
        the latest end recorded before it where a clock ran ahead (the log's order is what counts)."""
        ended = (r.history.since(r.state) or 0.0 for r in self.requests_by(rec.name) if r.state in REQUEST.terminal)
        rec.strikes_cleared_at = max(rec.strikes_cleared_at, at, max(ended, default=0.0))

    def _health(self, fact: Fact, p: ProviderHealth) -> None:
        self.provider(fact.provider).degraded = p.reason if p.kind == "provider_degraded" else ""

    def _lease(self, fact: Fact, p: LeaseChanged) -> None:
        holder = p.holder if p.kind == "lease_acquired" else ""
        if p.name == "planner":
            self.planner = (holder, p.fence)
        elif p.name.startswith("provider:"):
            rec = self.provider(p.name.split(":", 1)[1])
            if p.kind == "lease_acquired" or rec.fence == p.fence:
                rec.owner, rec.fence = holder, p.fence

    def _order(self, fact: Fact, p: Order) -> None:
        provider = fact.provider
        self.orders[fact.id] = OrderRecord(id=fact.id, provider=intern(provider), order=p, at=fact.time)
        self._part(provider).open_orders[fact.id] = None
        for name in p.names:
            if (node := self.nodes.get(name)) is not None:
                node.order = fact.id

    def _decision(self, fact: Fact, p: Decision) -> None:
        rec = DecisionRecord(seq=fact.seq or 0, at=fact.time, decision=p)
        self.decisions.append(rec)
        self.item_decisions.add(rec)

    def _budget(self, fact: Fact, p: BudgetEvent) -> None:
        self.budget_events.append((fact.time, p))

    def _planned(self, fact: Fact, p: RequestPlanned) -> None:
        rid, at = fact.id, fact.time
        if rid in self.requests:
            return
        rec = RequestRecord(
            id=rid,
            provider=intern(fact.provider),
            action=p.action,
            supply=p.supply,
            history=History.begin(REQUEST, "planned", at),
            created_at=at,
            order_id=p.order_id,
            item_id=p.item_id,
            template=p.template and intern(p.template),
            resource=p.resource and intern(p.resource),
            count=p.count,
            machines=list(p.machines),
            grants=list(p.grants),
            names=list(p.names),
            seq=fact.seq or 0,
        )
        self.requests[rid] = rec
        for name in p.names:
            if (node := self.nodes.get(name)) is not None:
                node.request = rid
        part = self._part(fact.provider)
        part.open_requests[rid] = None
        part.requests[rid] = None
        order = self.orders.get(p.order_id) if p.order_id else None
        if order is not None:
            order.request_ids.append(rid)
            self._part(order.provider).open_orders.pop(order.id, None)
        if p.action == "request" and p.supply == "units" and (resource := rec.resource):
            self.grants[rid] = GrantRecord(
                provider=rec.provider,
                id=rid,
                resource=resource,
                history=History.begin(GRANT, "requested", at),
                requested=p.count,
                item_id=p.item_id,
            )
            part.live_grants[rid] = None

    def _request_changed(self, fact: Fact, p: RequestChanged) -> None:
        rec = self.requests[p.request_id]
        attempt = bool(p.outcome) and p.outcome != USE_READ  # a use read that passed called nothing yet
        changed = p.state != rec.state
        if not changed:
            # A note on the same state: a retried attempt, or a status with news.
            if attempt:
                rec.attempts += 1
                rec.last_attempt_at = fact.time
        else:
            rec.history = rec.history.advance(REQUEST, p.state, fact.time, p.reason)
            if p.state in REQUEST.terminal:
                self._part(rec.provider).open_requests.pop(rec.id, None)
            if attempt:
                rec.attempts += 1
                rec.last_attempt_at = fact.time
        if p.provider_request_id:
            rec.provider_request_id = p.provider_request_id
        if p.reason or changed:
            # A new state's reason replaces the old one, even when it gives none: a request that
            # completed must not keep saying "4 of 4 machines launching".
            rec.reason = p.reason
        if p.outcome:
            rec.outcome = p.outcome

    def _instance_seen(self, fact: Fact, p: InstanceSeen) -> None:
        # One string per instance: the record keeps it, and every index holds the same one.
        provider, state = fact.provider, p.state
        key = f"{provider}/{p.machine_id}"
        if key in self.instances:
            return
        req = self.requests.get(p.request_id)
        template = p.template or (req.template if req else None)
        rec = InstanceRecord(
            # What repeats across records is one string each (interned), however the facts were decoded.
            provider=intern(provider),
            key=key,
            name=p.name,
            history=History.begin(INSTANCE, state, fact.time, p.reason),
            # The request's own id string: a hundred instances of one request share it.
            request_id=req.id if req else p.request_id,
            template=template and intern(template),
            item_id=req.item_id if req else "",
            launched_at=p.launched_at,
            private_ip=p.private_ip,
            node=p.node,
        )
        part = self._part(provider)
        if state not in INSTANCE.terminal:
            part.live_instances[key] = None
            part.live_added(state)
        self.instances[key] = rec
        if p.node and (node := self.nodes.get(p.node)) is not None:
            node.instance = key

    def _instance_changed(self, fact: Fact, p: InstanceChanged) -> None:
        provider, state = fact.provider, p.state
        rec = self.instances[f"{provider}/{p.machine_id}"]
        if p.event_seq is not None:
            self.host_event_seq[provider] = max(self.host_event_seq.get(provider, 0), p.event_seq)
        was = rec.state
        if state == was:
            # A failed return planned again: the record follows the new return request, or the
            # owner would take the old failure for a fresh one and plan the return once more.
            if state == "return_planned" and p.request_id and p.request_id != rec.return_request_id:
                rec.returns += 1
            if state in RETURNING and p.request_id:
                rec.return_request_id = p.request_id
            return
        ended = was in INSTANCE.terminal
        rec.history = rec.history.advance(INSTANCE, state, fact.time, p.reason)
        if state in SERVING:
            if state == "joined" or rec.joined_at is None:
                rec.joined_at = fact.time
        elif state in RETURNING and p.request_id:
            if state == "return_planned" and p.request_id != rec.return_request_id:
                rec.returns += 1
            rec.return_request_id = p.request_id
        part = self._part(provider)
        if not ended:
            part.live_left(was)
        if state in INSTANCE.terminal:
            part.live_instances.pop(rec.key, None)
        else:
            if ended:
                # The provider showed the end was none (listed again): it is ours again.
                part.live_instances[rec.key] = None
            part.live_added(state)

    def _grant_changed(self, fact: Fact, p: GrantChanged) -> None:
        if p.kind == "grant_orphan_found" and p.grant_id not in self.grants:
            # Held at the provider under a token no fact knows: a record starts here.
            self.grants[p.grant_id] = GrantRecord(
                provider=intern(fact.provider), id=p.grant_id, resource=intern(p.resource),
                history=History.begin(GRANT, "orphaned", fact.time, p.reason), count=p.count, reason=p.reason,
            )
            self._part(fact.provider).live_grants[p.grant_id] = None
            return
        rec = self.grants[p.grant_id]
        ended = rec.state in GRANT.terminal
        if p.state == "return_planned" and p.request_id and p.request_id != rec.return_request_id:
            rec.returns += 1
        if p.state != rec.state:
            rec.history = rec.history.advance(GRANT, p.state, fact.time, p.reason)
        if ended and p.state not in GRANT.terminal:
            # Still held long after its return completed: ours again, to give back again.
            rec.ended_at = None
            self._part(rec.provider).live_grants[rec.id] = None
        if p.kind in ("grant_part_returned", "grant_return_called_off"):
            # Units went back, or the return was never made: what is left is a grant like any other,
            # and the returns that may fail before it is left to an operator are counted afresh.
            rec.returns = 0
        if p.kind == "grant_part_returned":
            # The rest stays granted since the grant began; the part stops costing now.
            given = min(p.count, rec.count)
            rec.count -= given
            rec.given_back.append((fact.time, given))
        elif p.kind == "grant_granted" or (p.state == "orphaned" and p.count):
            rec.count = p.count
            rec.granted_at = fact.time
        if p.state in ("return_planned", "returning"):
            rec.returning = p.count or rec.count
            if p.request_id:
                rec.return_request_id = p.request_id
        else:
            rec.returning = 0
        if p.state in GRANT.terminal:
            rec.ended_at = fact.time
            self._part(rec.provider).live_grants.pop(rec.id, None)
        if p.reason:
            rec.reason = p.reason

    def _usage(self, fact: Fact, p: UsageObserved) -> None:
        self.resource(p.resource).observe(fact.time, p.in_use)

    def _published(self, fact: Fact, p: LicensePublished) -> None:
        rec = self.resource(p.resource)
        rec.scheduler_in_use = p.in_use
        if p.kind == "license_shown":
            rec.shown_free = p.count - p.reserved

    def _nodes(self, fact: Fact, p: NodesChanged) -> None:
        wanted = p.kind == "nodes_resumed"
        for name in p.names:
            old = self.nodes.get(name)
            if old is None and not wanted:
                continue  # let go of a name never wanted: nothing stands for it
            if wanted or old is None:
                rec = NodeRecord(name=name, provider=intern(fact.provider), template=p.template and intern(p.template),
                                 wanted=True,
                                 since=fact.time, join_timeout=p.join_timeout, reason=p.reason)
            else:  # let go: where it was made stays, for its host to be given back
                rec = NodeRecord(name=name, provider=old.provider, template=old.template, wanted=False,
                                 since=fact.time, join_timeout=old.join_timeout, reason=p.reason)
            if old is not None:
                # What was made for it stays bound: a name let go has its host given back, one wanted again
                # while its host still stands is served by it.
                rec.order, rec.request, rec.instance = old.order, old.request, old.instance
            self.nodes[name] = rec

    def _total(self, fact: Fact, p: ResourceTotalChanged) -> None:
        rec = self.resource(p.resource)
        rec.provider = fact.provider or rec.provider
        rec.base, rec.borrowed, rec.total = p.base, p.borrowed, p.total


_HANDLERS: dict[type, Callable[[Projection, Fact, Any], None]] = {
    ProviderDescribed: Projection._described,
    ProviderAdmin: Projection._admin,
    ProviderHealth: Projection._health,
    ProviderReconfigured: Projection._reconfigured,
    LeaseChanged: Projection._lease,
    Order: Projection._order,
    Decision: Projection._decision,
    BudgetEvent: Projection._budget,
    RequestPlanned: Projection._planned,
    RequestChanged: Projection._request_changed,
    InstanceSeen: Projection._instance_seen,
    InstanceChanged: Projection._instance_changed,
    GrantChanged: Projection._grant_changed,
    UsageObserved: Projection._usage,
    ResourceTotalChanged: Projection._total,
    NodesChanged: Projection._nodes,
    LicensePublished: Projection._published,
}
