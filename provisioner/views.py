"""The operator's views (DESIGN §13), computed from a replay of the fact log.

They read the controller directly, so they work when no daemon runs.
"""

from __future__ import annotations

from typing import Any

from lease.port import Lease
from messages.states import GRANT, INSTANCE, REQUEST
from persistence.port import Controller
from persistence.projection import Projection, bulk

PAGE = 10_000


def replay(controller: Controller) -> Projection:
    p = Projection()
    after = 0
    with bulk():
        while True:
            facts = controller.read(after=after, limit=PAGE)
            p.apply_all(facts)
            if len(facts) < PAGE:
                return p
            after = facts[-1].seq or after


def _price(p: Projection, provider: str, key: str | None) -> float:
    rec = p.providers.get(provider)
    return rec.description.price(key) if rec and rec.description else 0.0


def instance_cost(p: Projection, inst: Any, now: float) -> float:
    start = inst.launched_at or inst.seen_at
    end = inst.ended_at or now
    return max(0.0, end - start) / 3600.0 * _price(p, inst.provider, inst.template)


def providers(p: Projection, leases: list[Lease], now: float) -> list[dict[str, Any]]:
    owners = {lease.name: lease for lease in leases}
    rows = []
    for name in sorted(p.providers):
        rec = p.providers[name]
        desc = rec.description
        lease = owners.get(f"provider:{name}")
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
            "owner": lease.holder if lease else "",
            "lease": lease.fence if lease else None,
            "priority": desc.priority if desc else None,
            "capacity": capacity,
            "in_use": in_use,
            "pending": pending,
            "cost_per_hour": _cost_per_hour(p, name),
            "status": rec.status,
        })
    return rows


def _cost_per_hour(p: Projection, provider: str) -> float:
    rate = sum(_price(p, provider, i.template) for i in p.instances.values()
               if i.provider == provider and i.state not in INSTANCE.terminal)
    rate += sum(g.count * _price(p, provider, g.resource) for g in p.grants.values()
                if g.provider == provider and g.state in ("granted", "return_planned", "returning"))
    return round(rate, 6)


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
    return [
        {
            "id": i.key,
            "provider": i.provider,
            "template": i.template,
            "state": i.state,
            "machine_id": i.machine_id,
            "name": i.name,
            "request_id": i.request_id,
            "launched_at": i.launched_at,
            "joined_at": i.joined_at,
            "cost_so_far": round(instance_cost(p, i, now), 6),
        }
        for i in sorted(p.instances.values(), key=lambda i: (i.seen_at, i.key))
    ]


def resources(p: Projection) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(p.resources):
        r = p.resources[name]
        rows.append({
            "name": name,
            "provider": r.provider,
            "base": r.base,
            "borrowed": r.borrowed,
            "total": r.total,
            "in_use": r.in_use,
            "free": (r.total - r.in_use) if r.in_use is not None else None,
        })
    return rows
