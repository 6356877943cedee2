"""The operator's views, computed from a projection of the fact log.

The CLI builds them from a replay of the controller, the REST API from its
read model: the same rows either way, so scripts see one shape.
"""

from __future__ import annotations

from typing import Any, Mapping

from lease.port import PROVIDER, LeaseRecord
from messages.facts import UNKNOWN
from messages.states import GRANT, INSTANCE, REQUEST
from policy.consolidation import drains
from policy.costs import costs as policy_costs
from policy.costs import instance_cost as _instance_cost
from provisioner.read.holders import Owner, owner
from state.projection import Projection


def _price(p: Projection, provider: str, key: str | None) -> float:
    rec = p.providers.get(provider)
    return rec.description.price(key) if rec and rec.description else 0.0


def instance_cost(p: Projection, inst: Any, now: float) -> float:
    return _instance_cost(inst, _price(p, inst.provider, inst.template), now)


#: The statuses of a provider its owner runs: one whose owner's lease lapsed shows ``owner_lapsed`` instead.
RUNNING = ("active", "degraded")


def providers(p: Projection, leases: list[LeaseRecord], now: float) -> list[dict[str, Any]]:
    """``leases``: the lease table (``LeasePort.table``): an owner whose lease lapsed is shown as such."""
    records = {lease.name: lease for lease in leases}
    rates = policy_costs(p.providers, p.instances, p.grants, now).by_provider
    rows = []
    for name in sorted(p.providers):
        rec = p.providers[name]
        desc = rec.description
        who = owner(records.get(PROVIDER + name), rec.owner, rec.fence)
        if desc is not None and desc.kind == "units":
            in_use = sum(g.count for g in p.grants.values() if g.provider == name and g.state not in GRANT.terminal
                         and g.state != "requested")
            pending = sum(g.requested for g in p.grants.values() if g.provider == name and g.state == "requested")
            capacity = desc.capacity if desc.capacity is not None else sum(x.capacity for x in desc.pools)
        else:
            insts = [i for i in p.instances.values() if i.provider == name and i.state not in INSTANCE.terminal]
            in_use = len(insts)
            seen: dict[str, int] = {}
            for i in p.instances.values():
                seen[i.request_id] = seen.get(i.request_id, 0) + 1
            pending = sum(max(0, r.count - seen.get(r.id, 0)) for r in p.requests.values()
                          if r.provider == name and r.action == "request" and r.state not in REQUEST.terminal)
            capacity = (desc.capacity if desc and desc.capacity is not None
                        else sum(t.max_number for t in desc.templates) if desc else None)
        rows.append({
            "name": name,
            "kind": desc.kind if desc else None,
            "owner": who.holder,
            "owner_state": who.state,
            "lease": who.fence,
            "priority": desc.priority if desc else None,
            "capacity": capacity,
            "in_use": in_use,
            "pending": pending,
            "cost_per_hour": round(rates[name].cost_per_hour_now, 6),
            "status": _status(rec.status, rec.degraded, who),
        })
    return rows


def _status(admin: str, degraded: str, who: Owner) -> str:
    status = "degraded" if admin == "active" and degraded else admin
    return "owner_lapsed" if status in RUNNING and who.state == "lapsed" else status


def _lapsed_reason(name: str, who: Owner) -> str:
    when = f" {who.lapsed_ago:.0f} s ago" if who.lapsed_ago is not None else ""
    return (f"the lease of its owner {who.holder} lapsed{when} (it stopped renewing without letting go: killed, "
            f"frozen or cut off) and no instance serving {name} has taken it since")


def requests(p: Projection) -> list[dict[str, Any]]:
    return [
        {
            "id": r.id,
            "provider": r.provider,
            "kind": r.supply,
            "action": r.action,
            "template": r.template,
            "resource": r.resource,
            "count": r.count,
            "state": r.state,
            "attempts": r.attempts,
            "created_at": r.created_at,
            "provider_request_id": r.provider_request_id,
            "reason": r.reason,
        }
        for r in sorted(p.requests.values(), key=lambda r: (r.created_at, r.id))
    ]


def instances(p: Projection, now: float) -> list[dict[str, Any]]:
    drain = drains(p.open().orders, p.instances)
    return [
        {
            "id": i.key,
            "provider": i.provider,
            "template": i.template,
            "state": i.state,
            "machine_id": i.machine_id,
            "name": i.name,
            "node": i.node or "",
            "request_id": i.request_id,
            "launched_at": i.launched_at,
            "joined_at": i.joined_at,
            "cost_so_far": round(instance_cost(p, i, now), 6),
            "drain": i.key in drain,
            "drain_reason": drain.get(i.key, ""),
        }
        for i in sorted(p.instances.values(), key=lambda i: (i.seen_at, i.key))
    ]


def resources(p: Projection, scheduler_in_use: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """Each shared resource: its total, what the license server says is in use by this cluster, what the
    scheduler says its jobs hold, and the drift between the two (tokens used outside the scheduler's
    knowledge when positive: a job started by hand, a license held by a dead job)."""
    told = scheduler_in_use or {}
    rows = []
    for name in sorted(p.resources):
        r = p.resources[name]
        held = told.get(name)
        rows.append({
            "name": name,
            "provider": r.provider,
            "base": r.base,
            "borrowed": r.borrowed,
            "total": r.total,
            "in_use": r.in_use,
            "free": (r.total - r.in_use) if r.in_use is not None else None,
            "scheduler_in_use": held,
            "drift": (r.in_use - held) if r.in_use is not None and held is not None else None,
        })
    return rows


def provider_details(p: Projection, leases: list[LeaseRecord], now: float) -> list[dict[str, Any]]:
    """Providers' rows with their full description and why they have their status."""
    records = {lease.name: lease for lease in leases}
    rows = providers(p, leases, now)
    for row in rows:
        rec = p.providers[row["name"]]
        if row["status"] == "owner_lapsed":
            row["status_reason"] = _lapsed_reason(row["name"], owner(records.get(PROVIDER + row["name"]),
                                                                     rec.owner, rec.fence))
        else:
            row["status_reason"] = rec.degraded if row["status"] == "degraded" else rec.status_reason
        row["description"] = rec.description.model_dump(mode="json") if rec.description else None
    return rows


# --- money -----------------------------------------------------------------------------


def costs(p: Projection, now: float, billing_units: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Cost so far and cost per hour now, per provider (``billing_units``: seconds per billed unit)."""
    c = policy_costs(p.providers, p.instances, p.grants, now, billing_units)
    return [{"provider": x.provider, "cost_so_far": round(x.cost_so_far, 6),
             "cost_per_hour_now": round(x.cost_per_hour_now, 6)} for x in c.by_provider.values()]


# --- decisions and orphans --------------------------------------------------------------


def decisions(p: Projection) -> list[dict[str, Any]]:
    return [
        {
            "seq": r.seq,
            "at": r.at,
            "item": r.decision.item,
            "demand_seq": r.decision.demand_seq,
            "need": r.decision.need,
            "in_flight": r.decision.in_flight,
            "chosen": [c.model_dump(mode="json") for c in r.decision.chosen],
            "rejected": [x.model_dump(mode="json") for x in r.decision.rejected],
            "note": r.decision.note,
            "candidates": [c.model_dump(mode="json") for c in r.decision.candidates],
            "saving_per_hour": r.decision.saving_per_hour,
        }
        for r in p.decisions
    ]


#: A request whose script's outcome stayed unknown may have left supply at the provider: its call timed out,
#: or a restart found it planned at a provider that takes no token.
UNKNOWN_OUTCOMES = frozenset({"timeout", UNKNOWN})


def orphans(p: Projection, now: float) -> list[dict[str, Any]]:
    """What may be held at a provider and serves no one: orphaned hosts and grants, and requests
    whose outcome is unknown (they may have started something nobody tracks)."""
    rows: list[dict[str, Any]] = []
    for i in sorted(p.instances.values(), key=lambda i: (i.seen_at, i.key)):
        if i.state == "orphaned":
            rows.append(_orphan("instance", i.key, i.provider, i.state, i.history.since(i.state), i.reason,
                                machine_id=i.machine_id, name=i.name,
                                cost_so_far=round(instance_cost(p, i, now), 6)))
    for g in p.grants.values():
        if g.state == "orphaned":
            rows.append(_orphan("grant", g.id, g.provider, g.state, g.history.since(g.state), g.reason,
                                resource=g.resource, count=g.count or g.requested))
    for r in sorted(p.requests.values(), key=lambda r: (r.created_at, r.id)):
        if r.state == "timed_out" or (r.state == "failed" and r.outcome in UNKNOWN_OUTCOMES):
            rows.append(_orphan("request", r.id, r.provider, r.state, r.history.since(r.state), r.reason,
                                resource=r.resource, count=r.count))
    return rows


def _orphan(kind: str, ident: str, provider: str, state: str, since: float | None, reason: str,
            **extra: Any) -> dict[str, Any]:
    row = {"kind": kind, "id": ident, "provider": provider, "state": state, "since": since,
           "machine_id": None, "name": None, "resource": None, "count": None, "cost_so_far": None,
           "reason": reason}
    row.update(extra)
    return row


# --- filters and paging ---------------------------------------------------------------


class BadCursor(ValueError):
    """``after`` names no row of the list."""


def page(rows: list[dict[str, Any]], key: str, *, after: str | None = None, limit: int | None = None,
         where: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Rows after the row whose ``key`` is ``after``, matching ``where``, at most ``limit``.

    The cursor is placed in the unfiltered list, so a page stays put when other
    rows change state; the second value is the cursor of the next page, None
    on the last one.
    """
    start = 0
    if after is not None:
        start = next((n + 1 for n, r in enumerate(rows) if str(r[key]) == after), -1)
        if start < 0:
            raise BadCursor(f"after: no row with {key} {after!r}")
    wanted = {k: v for k, v in (where or {}).items() if v is not None}
    picked: list[dict[str, Any]] = []
    for r in rows[start:]:
        if all(str(r.get(k)) == str(v) for k, v in wanted.items()):
            if limit is not None and len(picked) == limit:
                return picked, str(picked[-1][key])
            picked.append(r)
    return picked, None
