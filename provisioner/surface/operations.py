"""What operators and the scheduler can see and do, in one place for the REST API and the CLI.

Reads come from a read model of the whole fact log. Actions are unfenced
facts (``lease == ""``): a request that the owner of the provider carries
out, whichever daemon it reached. How facts are committed is the caller's:
through the daemon's journal (REST) or straight to the controller (CLI).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any, Callable, Literal, Mapping, NamedTuple

from config.models import Config
from lease.port import LeaseRecord
from messages.demand import DemandSnapshot, HostEventKind, SupplySnapshot
from messages.facts import Fact, Order, Payload, ProviderAdmin, make_fact
from messages.states import GRANT, INSTANCE, REQUEST, StateMachine
from persistence.port import Controller
from policy.explain import unservable
from policy.settings import plan_settings
from provisioner.audit.log import AuditLog
from provisioner.read import holders, views
from provisioner.read.model import ReadModel
from provisioner.surface.bulk import Bulk, BulkFilter, orders, select, summary
from provisioner.surface.protocol import Steer
from state.host_names import live_providers
from state.projection import Projection

STEER_KINDS: dict[str, Literal["provider_paused", "provider_resumed", "provider_drained"]] = {
    "pause": "provider_paused", "resume": "provider_resumed", "drain": "provider_drained",
}
#: States from which the state machines allow a return to be planned.
HOST_RETURNABLE = frozenset(s for s, dsts in INSTANCE.edges.items() if "return_planned" in dsts)
GRANT_RETURNABLE = frozenset(s for s, dsts in GRANT.edges.items() if "return_planned" in dsts)

log = logging.getLogger(__name__)

#: Warnings about a demand's items that no provider can serve, at most (the rest counted).
WARNED = 20

#: Commits facts and returns them as accepted, or raises ``CommitFailed``.
Commit = Callable[[list[Fact]], list[Fact]]


class NotFound(LookupError):
    """Nothing by that name or id."""


class Conflict(Exception):
    """The thing exists but the action does not apply to it now."""


class TooLarge(ValueError):
    """An input over a configured limit: refused whole."""


class CommitFailed(Exception):
    """The facts could not be committed; nothing was written."""


class Scope(NamedTuple):
    """What a view may need beyond the projection."""

    #: The lease table, for the views that show who holds what.
    leases: list[LeaseRecord]
    now: float
    #: Seconds per billed unit, per provider (absent: billed per second).
    billing_units: Mapping[str, float]
    #: Units of each resource the scheduler's running jobs hold, as its latest supply view says.
    scheduler_in_use: Mapping[str, int] = {}


class View(NamedTuple):
    """One list: its cursor key, the fields it can be filtered on, and how to compute its rows.

    ``choices``: the values a filter can take, where they are a closed set (states, kinds): a
    misspelt one is an error listing them, never an empty list that looks like "none".
    """

    key: str
    filters: tuple[str, ...]
    rows: Callable[[Projection | None, Scope], list[dict[str, Any]]]
    choices: Mapping[str, tuple[str, ...]] = {}
    #: Whether its rows come from the facts (a projection of them) or from the lease table alone.
    facts: bool = True
    #: Whether it reads the lease table.
    leases: bool = False


def _states(machine: StateMachine) -> tuple[str, ...]:
    """A state machine's states in the order its table declares them (its life, mostly)."""
    seen = dict.fromkeys(machine.edges)
    for dsts in machine.edges.values():
        seen.update(dict.fromkeys(dsts))
    return tuple(seen)


KINDS = ("hosts", "units")
VIEWS: dict[str, View] = {
    "providers": View("name", ("kind", "status", "owner"), lambda p, s: views.provider_details(p, s.leases, s.now),
                      {"kind": KINDS,
                       "status": ("active", "degraded", "owner_lapsed", "paused", "drained", "disabled")},
                      leases=True),
    "requests": View("id", ("provider", "state", "action", "kind"), lambda p, s: views.requests(p),
                     {"state": _states(REQUEST), "action": ("request", "return"), "kind": KINDS}),
    "instances": View("id", ("provider", "state", "template"), lambda p, s: views.instances(p, s.now),
                      {"state": _states(INSTANCE)}),
    "resources": View("name", ("provider",), lambda p, s: views.resources(p, s.scheduler_in_use)),
    "costs": View("provider", ("provider",), lambda p, s: views.costs(p, s.now, s.billing_units)),
    "decisions": View("seq", ("item",), lambda p, s: views.decisions(p)),
    "orphans": View("id", ("provider", "kind", "state"), lambda p, s: views.orphans(p, s.now),
                    {"kind": ("instance", "grant", "request"), "state": ("orphaned", "timed_out", "failed")}),
    "daemons": View("instance", ("state",), lambda p, s: holders.daemons(s.leases, s.now), {"state": holders.STATES},
                    facts=False, leases=True),
}


class BadFilter(ValueError):
    """A filter value outside its closed set; ``field`` names the filter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_filters(view: str, where: Mapping[str, Any]) -> None:
    """Refuse a filter value the view's rows can never have, listing the ones they can."""
    for name, allowed in VIEWS[view].choices.items():
        value = where.get(name)
        if value is not None and str(value) not in allowed:
            raise BadFilter(name, f"{name} {value!r}: {view} have no such {name}; one of: {', '.join(allowed)}")


class Operations:
    def __init__(self, read_model: ReadModel, controller: Controller, commit: Commit, audit: AuditLog | None,
                 clock: Callable[[], float] = time.time, billing_units: Mapping[str, float] | None = None,
                 refused_events: Counter[str] | None = None, max_demand_items: int = 100_000) -> None:
        """``refused_events``: counts host events refused (``unknown``, ``ambiguous``), for the metrics.
        ``max_demand_items``: a demand snapshot with more items is refused whole (``policy.max_demand_items``)."""
        self.max_demand_items = max_demand_items
        self.refused_events: Counter[str] = refused_events if refused_events is not None else Counter()
        self.read_model = read_model
        self.controller = controller
        self.commit = commit
        self.audit_log = audit
        self.clock = clock
        self.billing_units = billing_units or {}

    def reconfigure(self, cfg: Config) -> None:
        """A reload's new settings: the billing units costs are counted in, the cap on demand items."""
        self.billing_units = plan_settings(cfg.policy, cfg.budget, cfg.providers).billing_units
        self.max_demand_items = cfg.policy.max_demand_items

    # --- reading -------------------------------------------------------------------

    def list(self, view: str, *, where: dict[str, Any] | None = None, after: str | None = None,
             limit: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """A page of one view's rows; raises ``views.BadCursor`` for an unknown ``after``."""
        v = VIEWS[view]
        check_filters(view, where or {})
        supply = self.controller.get_supply() if view == "resources" else None
        scope = Scope(self.controller.leases.table() if v.leases else [], self.clock(), self.billing_units,
                      supply.resources if supply is not None else {})
        if not v.facts:
            rows = v.rows(None, scope)
        else:
            with self.read_model.current() as p:
                rows = v.rows(p, scope)
        return views.page(rows, v.key, after=after, limit=limit, where=where)

    def provider(self, name: str) -> dict[str, Any]:
        rows, _ = self.list("providers", where={"name": name})
        if not rows:
            raise NotFound(f"no provider named {name!r}")
        return rows[0]

    def demand(self) -> DemandSnapshot | None:
        return self.controller.get_demand()

    # --- the scheduler's inputs ------------------------------------------------------

    def put_demand(self, snapshot: DemandSnapshot) -> DemandSnapshot:
        if len(snapshot.items) > self.max_demand_items:
            raise TooLarge(f"demand: {len(snapshot.items)} items, more than policy.max_demand_items "
                           f"({self.max_demand_items}); nothing stored")
        return self.controller.put_demand(snapshot)

    def demand_warnings(self, snapshot: DemandSnapshot) -> list[str]:
        """Items no configured provider can ever serve, as their descriptions say (the first ``WARNED``)."""
        with self.read_model.current() as p:
            found = unservable(snapshot, p.providers)
        if len(found) > WARNED:
            found = found[:WARNED] + [f"{len(found) - WARNED} more items no provider can serve"]
        return found

    def host_event(self, name: str, event: HostEventKind, provider: str | None = None) -> dict[str, Any]:
        """Record a host event, once it is clear whose host it is.

        A name no live host has is an error (the event would vanish); a name live at several
        providers, with no provider named, is refused (applied to both, one join would mark two
        hosts joined). Either way nothing is stored, the refusal is logged and counted.
        """
        with self.read_model.current() as p:
            where = live_providers(p, [name])[name]
        if provider is not None and provider not in where:
            self.refused_events["unknown"] += 1
            log.warning("host event %s %s refused: no live host of that name at provider %s", name, event, provider)
            raise NotFound(f"no live host named {name!r} at provider {provider!r}"
                           + (f" (it is live at {', '.join(where)})" if where else ""))
        if provider is None and not where:
            self.refused_events["unknown"] += 1
            log.warning("host event %s %s refused: no live host has that name", name, event)
            raise NotFound(f"no live host named {name!r} (see: provisioner instances)")
        if provider is None and len(where) > 1:
            self.refused_events["ambiguous"] += 1
            log.error("host event %s %s refused: the name is live at providers %s", name, event, ", ".join(where))
            raise Conflict(f"host name {name!r} is live at providers {', '.join(sorted(where))}: name the provider "
                           "(--provider, or \"provider\" in the body)")
        return self.controller.post_host_event(name, event, self.clock(), provider=provider).to_dict()

    def supply(self) -> SupplySnapshot | None:
        return self.controller.get_supply()

    def put_supply(self, view: SupplySnapshot) -> SupplySnapshot:
        return self.controller.put_supply(view)

    # --- operators' actions ------------------------------------------------------------

    def steer(self, provider: str, action: Steer, reason: str, by: str) -> dict[str, Any]:
        with self.read_model.current() as p:
            if provider not in p.providers:
                raise NotFound(f"no provider named {provider!r}")
        payload = ProviderAdmin(kind=STEER_KINDS[action], reason=_because(reason, by, action))
        return self._write(payload, provider, f"{action} of {provider} recorded; its owner applies it")

    def return_instance(self, ident: str, reason: str, by: str) -> dict[str, Any]:
        with self.read_model.current() as p:
            inst = _find_instance(p, ident)
            if inst.state in ("return_planned", "returning"):
                raise Conflict(f"instance {inst.key} is {inst.state}: it is being returned already")
            if inst.state not in HOST_RETURNABLE:
                raise Conflict(f"instance {inst.key} is {inst.state}: nothing to return")
            order = Order(action="return", supply="hosts", machines=[inst.machine_id], count=1,
                          reason=_because(reason, by, "return"))
            provider, key, state = inst.provider, inst.key, inst.state
        later = " now, busy as it is (to wait for its work to end: provisioner instances drain)" \
            if state == "busy" else ""
        return self._write(order, provider, f"return of {key} ordered; the owner of {provider} gives it back{later}")

    def return_orphan(self, ident: str, reason: str, by: str) -> dict[str, Any]:
        rows, _ = self.list("orphans")
        row = next((r for r in rows if r["id"] == ident), None)
        if row is None:
            raise NotFound(f"no orphan with id {ident!r} (see the orphans list)")
        if row["kind"] == "instance":
            return self.return_instance(ident, reason, by)
        if row["kind"] == "request":
            raise Conflict(f"request {ident} ended with an unknown outcome: nothing known to return ({row['reason']})")
        with self.read_model.current() as p:
            grant = p.grants[ident]
            if grant.state not in GRANT_RETURNABLE:
                raise Conflict(f"grant {ident} is {grant.state}: nothing to return")
            order = Order(action="return", supply="units", grants=[ident], resource=grant.resource,
                          count=grant.count or grant.requested, reason=_because(reason, by, "return"))
            provider = grant.provider
        return self._write(order, provider, f"return of grant {ident} ordered; the owner of {provider} gives it back")

    def bulk(self, action: Bulk, f: BulkFilter, reason: str, by: str, dry_run: bool = False) -> dict[str, Any]:
        """Return or drain every host ``f`` matches (``provisioner.surface.bulk``); with ``dry_run``, write nothing."""
        with self.read_model.current() as p:
            chosen = select(p.instances.values(), f, self.clock())
            rows = {r["id"]: r for r in views.instances(p, self.clock())}
        hosts = [rows[i.key] for i in chosen.hosts]
        accepted: list[Fact] = []
        if chosen.hosts and not dry_run:
            now = self.clock()
            accepted = self.commit([make_fact(order, provider=provider, now=now)
                                    for provider, order in orders(action, chosen.hosts, _because(reason, by, action))])
        return {"action": action, "dry_run": dry_run, "matched": len(hosts), "hosts": hosts,
                "skipped": chosen.skipped, "facts": [f.id for f in accepted],
                "message": summary(action, chosen, dry_run)}

    def _write(self, payload: Payload, provider: str, message: str) -> dict[str, Any]:
        fact = make_fact(payload, provider=provider, now=self.clock())
        accepted = self.commit([fact])
        stored = accepted[0] if accepted else fact
        return {"fact": stored.id, "seq": stored.seq, "kind": stored.kind, "provider": provider,
                "message": message}

    # --- the audit log -----------------------------------------------------------------

    def audit(self, after: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        if self.audit_log is None:
            return []
        return self.audit_log.read(after=after, limit=limit)

    def audit_verify(self) -> dict[str, Any]:
        if self.audit_log is None:
            return {"ok": True, "lines": 0, "problem": None, "starts_after_rotation": False}
        return self.audit_log.verify(self.controller).to_dict()


def _because(reason: str, by: str, action: str) -> str:
    """The fact's reason: always starts with "operator" (owners treat such orders as an operator's)."""
    text = " ".join(reason.split()) or f"{action} by an operator"
    return f"operator: {text} (by {by})"


def _find_instance(p: Projection, ident: str) -> Any:
    """By ``provider/machine_id``, or by a machine id or host name that names exactly one instance."""
    inst = p.instances.get(ident)
    if inst is not None:
        return inst
    found = [i for i in p.instances.values() if ident in (i.machine_id, i.name)]
    if not found:
        raise NotFound(f"no instance {ident!r} (give PROVIDER/MACHINE_ID, a machine id or a host name)")
    if len(found) > 1:
        raise Conflict(f"{ident!r} names {len(found)} instances ({', '.join(sorted(i.key for i in found))}): "
                       "give PROVIDER/MACHINE_ID")
    return found[0]
