"""The first planning policy: order each item's unmet need from the best matching provider.

Need = the item's count minus supply in flight for it. Candidates rank by
priority (higher first; a template's own priority refines its provider's),
then price, lead time and name, so the same inputs always give the same
orders. What the first candidate cannot take (capacity) spills to the next.
A provider that failed this item within ``cooldown`` is skipped. Every item
gets a decision saying what was chosen and why others were not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.facts import Chosen, Decision, Order, Rejected
from messages.records import ProviderRecord
from messages.states import GRANT, INSTANCE, REQUEST
from policy.matching import template_matches
from policy.supply import SupplyView, in_flight


@dataclass(frozen=True)
class PlanSettings:
    cooldown: float = 120.0
    join_grace: float = 60.0
    #: An order no owner has taken up within this long stops counting as in flight.
    order_timeout: float = 900.0


@dataclass
class Plan:
    #: (provider, order) pairs to write as order facts.
    orders: list[tuple[str, Order]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


@dataclass(frozen=True)
class _Candidate:
    provider: str
    key: str  # template id or resource name
    priority: int
    price: float
    lead_time: float
    room: int
    min_request: int
    step: int

    @property
    def rank(self) -> tuple:
        return (-self.priority, self.price, self.lead_time, self.provider, self.key)


def size(need: int, room: int, min_request: int, step: int) -> int:
    """Round ``need`` up to the provider's granularity, never above ``room``; 0 if it cannot fit."""
    if need <= 0 or room <= 0:
        return 0
    amount = max(need, min_request)
    if step > 1 and (amount - min_request) % step:
        amount += step - (amount - min_request) % step
    if amount > room:
        # Largest granular amount that fits.
        if room < min_request:
            return 0
        amount = min_request + ((room - min_request) // step) * step
    return amount


def plan(
    demand: DemandSnapshot | None,
    providers: Mapping[str, ProviderRecord],
    view: SupplyView,
    now: float,
    settings: PlanSettings,
) -> Plan:
    out = Plan()
    if demand is None:
        return out
    flying = in_flight(view, now, settings.join_grace, settings.order_timeout)
    held = _held(view)
    failed = _recent_failures(view, now, settings.cooldown)
    for item in demand.items:
        need = item.count - flying.get(item.id, 0)
        decision = Decision(item=item.id, demand_seq=demand.seq, need=max(0, need),
                            in_flight=flying.get(item.id, 0))
        candidates, rejected = _candidates(item, providers, held, failed)
        chosen: list[Chosen] = []
        remaining = need
        for cand in sorted(candidates, key=lambda c: c.rank):
            if remaining <= 0:
                break
            amount = size(remaining, cand.room, cand.min_request, cand.step)
            if amount <= 0:
                rejected.append(Rejected(provider=cand.provider, reason=f"capacity: room for {cand.room}"))
                continue
            chosen.append(_chosen(item, cand, amount))
            held[(cand.provider, cand.key)] = held.get((cand.provider, cand.key), 0) + amount
            remaining -= amount
        note = ""
        if need <= 0:
            note = "in-flight supply covers the need"
        elif remaining > 0:
            note = f"{remaining} could not be placed"
        if need > 0 or item.count > 0:
            out.decisions.append(decision.model_copy(update={"chosen": chosen, "rejected": rejected, "note": note}))
        for c in chosen:
            out.orders.append(
                (
                    c.provider,
                    Order(
                        action="request",
                        supply=item.kind,
                        item_id=item.id,
                        template=c.template,
                        resource=c.resource,
                        count=c.count,
                        reason=f"demand {item.id}: need {need}",
                    ),
                )
            )
    return out


def _chosen(item: HostItem | UnitItem, cand: _Candidate, amount: int) -> Chosen:
    if isinstance(item, HostItem):
        return Chosen(provider=cand.provider, template=cand.key, count=amount)
    return Chosen(provider=cand.provider, resource=cand.key, count=amount)


def _candidates(
    item: HostItem | UnitItem,
    providers: Mapping[str, ProviderRecord],
    held: dict[tuple[str, str], int],
    failed: set[tuple[str, str]],
) -> tuple[list[_Candidate], list[Rejected]]:
    cands: list[_Candidate] = []
    rejected: list[Rejected] = []
    for name in sorted(providers):
        rec = providers[name]
        desc = rec.description
        if desc is None or desc.kind != item.kind:
            continue
        if isinstance(item, HostItem):
            offers = [
                (t.id, t.max_number, t.priority, desc.price(t.id))
                for t in desc.templates
                if template_matches(item, t, desc.zone)
            ]
        else:
            pool = desc.pool(item.resource)
            offers = [(pool.resource, pool.capacity, None, desc.price(pool.resource))] if pool else []
        if not offers:
            rejected.append(Rejected(provider=name, reason="mismatch"))
            continue
        if rec.status != "active":
            rejected.append(Rejected(provider=name, reason=rec.status))
            continue
        if not rec.owner:
            rejected.append(Rejected(provider=name, reason="no owner: no daemon holds its lease"))
            continue
        if (name, item.id) in failed:
            rejected.append(Rejected(provider=name, reason="cooldown: failed recently"))
            continue
        provider_held = sum(v for (p, _), v in held.items() if p == name)
        provider_room = (desc.capacity - provider_held) if desc.capacity is not None else None
        for key, max_number, priority, price in offers:
            room = max_number - held.get((name, key), 0)
            if provider_room is not None:
                room = min(room, provider_room)
            cands.append(
                _Candidate(
                    provider=name,
                    key=key,
                    priority=desc.priority if priority is None else priority,
                    price=price,
                    lead_time=desc.lead_time_s,
                    room=max(0, room),
                    min_request=desc.min_request,
                    step=desc.step,
                )
            )
    return cands, rejected


def _held(view: SupplyView) -> dict[tuple[str, str], int]:
    """Per (provider, template or resource): supply held or on its way."""
    held: dict[tuple[str, str], int] = {}

    def add(provider: str, key: str | None, n: int) -> None:
        if key and n > 0:
            held[(provider, key)] = held.get((provider, key), 0) + n

    seen: dict[str, int] = {}
    for inst in view.instances.values():
        if inst.state not in INSTANCE.terminal:
            add(inst.provider, inst.template, 1)
        seen[inst.request_id] = seen.get(inst.request_id, 0) + 1
    for req in view.requests.values():
        if req.action == "request" and req.supply == "hosts" and req.state not in REQUEST.terminal:
            add(req.provider, req.template, req.count - seen.get(req.id, 0))
    for grant in view.grants.values():
        if grant.state not in GRANT.terminal:
            add(grant.provider, grant.resource, grant.count if grant.state != "requested" else grant.requested)
    for order in view.orders.values():
        o = order.order
        if o.action == "request" and not order.request_ids:
            add(order.provider, o.template or o.resource, o.count)
    return held


def _recent_failures(view: SupplyView, now: float, cooldown: float) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for req in view.requests.values():
        if req.action == "request" and req.state in ("failed", "timed_out"):
            ended = req.history.since(req.state)
            if ended is not None and now - ended < cooldown:
                out.add((req.provider, req.item_id))
    return out
