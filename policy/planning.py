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
from policy.matching import Selector
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
class _Offer:
    """One template (or pool) of one provider that can serve an item."""

    provider: str
    key: str  # template id or resource name
    priority: int
    price: float
    lead_time: float
    max_number: int
    #: The provider's overall cap, shared by all its templates.
    capacity: int | None
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


#: Rejections listed per decision; beyond this they are counted in the note, so a
#: decision stays readable (and cheap) with thousands of providers.
LISTED = 10


def plan(
    demand: DemandSnapshot | None,
    providers: Mapping[str, ProviderRecord],
    view: SupplyView,
    now: float,
    settings: PlanSettings,
    catalog: Catalog | None = None,
) -> Plan:
    out = Plan()
    if demand is None:
        return out
    if catalog is None or not catalog.fits(providers):
        catalog = Catalog(providers)
    flying = in_flight(view, now, settings.join_grace, settings.order_timeout)
    held = _held(view)
    held_by_provider: dict[str, int] = {}
    for (prov, _), n in held.items():
        held_by_provider[prov] = held_by_provider.get(prov, 0) + n
    failed = _recent_failures(view, now, settings.cooldown)
    for item in demand.items:
        need = item.count - flying.get(item.id, 0)
        decision = Decision(item=item.id, demand_seq=demand.seq, need=max(0, need),
                            in_flight=flying.get(item.id, 0))
        offers, mismatched = catalog.offers(item)
        rejected: list[Rejected] = []
        said: set[str] = set()
        unlisted = 0
        chosen: list[Chosen] = []
        remaining = need
        for offer in offers:
            if remaining <= 0:
                break
            why = _unusable(providers.get(offer.provider))
            if why is not None:
                if offer.provider not in said:
                    said.add(offer.provider)
                    rejected.append(Rejected(provider=offer.provider, reason=why))
                continue
            if (offer.provider, item.id) in failed:
                if offer.provider not in said:
                    said.add(offer.provider)
                    rejected.append(Rejected(provider=offer.provider, reason="cooldown: failed recently"))
                continue
            room = offer.max_number - held.get((offer.provider, offer.key), 0)
            if offer.capacity is not None:
                room = min(room, offer.capacity - held_by_provider.get(offer.provider, 0))
            amount = size(remaining, room, offer.min_request, offer.step)
            if amount <= 0:
                if offer.provider not in said:
                    said.add(offer.provider)
                    if len(rejected) < LISTED:
                        rejected.append(Rejected(provider=offer.provider, reason=f"capacity: room for {max(0, room)}"))
                    else:
                        unlisted += 1
                continue
            chosen.append(_chosen(item, offer, amount))
            held[(offer.provider, offer.key)] = held.get((offer.provider, offer.key), 0) + amount
            held_by_provider[offer.provider] = held_by_provider.get(offer.provider, 0) + amount
            remaining -= amount
        listed = max(0, LISTED - len(rejected))
        rejected += [Rejected(provider=name, reason="mismatch") for name in mismatched[:listed]]
        unlisted += max(0, len(mismatched) - listed)
        notes = []
        if need <= 0:
            notes.append("in-flight supply covers the need")
        elif remaining > 0:
            notes.append(f"{remaining} could not be placed")
        if unlisted:
            notes.append(f"{unlisted} more providers rejected")
        out.decisions.append(decision.model_copy(update={"chosen": chosen, "rejected": rejected,
                                                         "note": "; ".join(notes)}))
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


def _wants(item: HostItem | UnitItem) -> tuple:
    if isinstance(item, HostItem):
        return ("hosts", item.template, tuple(sorted(item.select.items())))
    return ("units", item.resource)


def _chosen(item: HostItem | UnitItem, offer: _Offer, amount: int) -> Chosen:
    if isinstance(item, HostItem):
        return Chosen(provider=offer.provider, template=offer.key, count=amount)
    return Chosen(provider=offer.provider, resource=offer.key, count=amount)


class Catalog:
    """Every provider's offers, ranked once per kind of wish.

    Descriptions change rarely while demand changes often, so the ranked
    offers for each distinct wish (template, selectors or resource) are kept
    until the descriptions change; which providers are usable right now
    (status, owner) is checked at planning time.
    """

    def __init__(self, providers: Mapping[str, ProviderRecord]) -> None:
        self.descriptions = {name: rec.description for name, rec in providers.items() if rec.description}
        self._ranked: dict[tuple, tuple[list[_Offer], list[str]]] = {}

    def fits(self, providers: Mapping[str, ProviderRecord]) -> bool:
        """True while the providers' descriptions are the ones this catalog was built from."""
        current = {name: rec.description for name, rec in providers.items() if rec.description}
        return current.keys() == self.descriptions.keys() and all(
            current[n] is self.descriptions[n] for n in current)

    def offers(self, item: HostItem | UnitItem) -> tuple[list[_Offer], list[str]]:
        """Matching offers in rank order, and the providers of the item's kind that do not match."""
        key = _wants(item)
        found = self._ranked.get(key)
        if found is None:
            found = self._ranked[key] = self._rank(item)
        return found

    def _rank(self, item: HostItem | UnitItem) -> tuple[list[_Offer], list[str]]:
        offers: list[_Offer] = []
        mismatched: list[str] = []
        selector = Selector(item) if isinstance(item, HostItem) else None
        for name in sorted(self.descriptions):
            desc = self.descriptions[name]
            if desc.kind != item.kind:
                continue
            if selector is not None:
                matches = [
                    (t.id, t.max_number, t.priority,
                     desc.cost_per_hour if t.cost_per_hour is None else t.cost_per_hour)
                    for t in desc.templates
                    if selector.matches(t, desc.zone)
                ]
            else:
                pool = desc.pool(item.resource)  # type: ignore[union-attr]
                matches = [(pool.resource, pool.capacity, None, desc.price(pool.resource))] if pool else []
            if not matches:
                mismatched.append(name)
            for key, max_number, priority, price in matches:
                offers.append(
                    _Offer(
                        provider=name,
                        key=key,
                        priority=desc.priority if priority is None else priority,
                        price=price,
                        lead_time=desc.lead_time_s,
                        max_number=max_number,
                        capacity=desc.capacity,
                        min_request=desc.min_request,
                        step=desc.step,
                    )
                )
        offers.sort(key=lambda o: o.rank)
        return offers, mismatched


def _unusable(rec: ProviderRecord | None) -> str | None:
    if rec is None:
        return "unknown provider"
    if rec.status != "active":
        return rec.status
    if not rec.owner:
        return "no owner: no daemon holds its lease"
    return None


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
