"""Which idle supply to give back (first policy).

A host is returned when it has been idle for ``idle_time``, has been held
for the provider's minimum hold time, and no demand item that its template
could serve still has unmet need. A grant is returned when its resource has
no demand, it has been held past idle time and min hold, nobody used
borrowed units for ``idle_time``, and returning it does not take the total
below the observed use. Supply already on its way back is never ordered again.
"""

from __future__ import annotations

from typing import Mapping

from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.facts import Order
from messages.records import ProviderRecord, ResourceRecord
from policy.matching import template_matches
from policy.supply import SupplyView


def reclaim(
    demand: DemandSnapshot | None,
    providers: Mapping[str, ProviderRecord],
    resources: Mapping[str, ResourceRecord],
    view: SupplyView,
    now: float,
    idle_time: float,
) -> list[tuple[str, Order]]:
    items = demand.items if demand else []
    returning_machines, returning_grants = _already_returning(view)
    by_provider: dict[str, list[str]] = {}
    for inst in sorted(view.instances.values(), key=lambda i: i.key):
        if inst.state != "idle" or inst.machine_id in returning_machines.get(inst.provider, ()):
            continue
        rec = providers.get(inst.provider)
        desc = rec.description if rec else None
        if rec is None or not rec.owner:
            continue
        idle_since = inst.history.since("idle")
        idle_since = now if idle_since is None else idle_since
        held_since = inst.launched_at if inst.launched_at is not None else inst.seen_at
        min_hold = desc.min_hold_s if desc else 0.0
        if now - idle_since < idle_time or now - held_since < min_hold:
            continue
        template = desc.template(inst.template) if desc and inst.template else None
        if template is not None and any(
            isinstance(i, HostItem) and i.count > 0 and template_matches(i, template, desc.zone) for i in items
        ):
            continue
        by_provider.setdefault(inst.provider, []).append(inst.machine_id)
    orders = [
        (p, Order(action="return", supply="hosts", machines=m, count=len(m), reason=f"idle for {idle_time:.0f}s"))
        for p, m in sorted(by_provider.items())
    ]
    wanted = {i.resource for i in items if isinstance(i, UnitItem) and i.count > 0}
    for grant in sorted(view.grants.values(), key=lambda g: g.id):
        if grant.state != "granted" or grant.id in returning_grants or grant.resource in wanted:
            continue
        rec = providers.get(grant.provider)
        if rec is None or not rec.owner:
            continue
        desc = rec.description
        min_hold = desc.min_hold_s if desc else 0.0
        held_since = grant.granted_at if grant.granted_at is not None else now
        if now - held_since < max(idle_time, min_hold):
            continue
        res = resources.get(grant.resource)
        if res is not None:
            if res.borrowed_used_at is not None and now - res.borrowed_used_at < idle_time:
                continue
            if res.in_use is not None and res.in_use > res.total - grant.count:
                continue
        orders.append(
            (
                grant.provider,
                Order(
                    action="return",
                    supply="units",
                    resource=grant.resource,
                    grants=[grant.id],
                    count=grant.count,
                    reason=f"unused for {idle_time:.0f}s",
                ),
            )
        )
    return orders


def _already_returning(view: SupplyView) -> tuple[dict[str, set[str]], set[str]]:
    """Machines and grants named by return orders no owner has finished with yet."""
    machines: dict[str, set[str]] = {}
    grants: set[str] = set()
    for order in view.orders.values():
        o = order.order
        if o.action != "return":
            continue
        open_ = not order.request_ids or any(
            view.requests[r].state not in ("complete", "complete_with_error", "failed", "timed_out")
            for r in order.request_ids
            if r in view.requests
        )
        if open_:
            machines.setdefault(order.provider, set()).update(o.machines)
            grants.update(o.grants)
    return machines, grants
