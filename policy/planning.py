"""Planning: order each demand item's unmet need from the best providers that can take it.

Need = the item's count minus supply in flight for it (``policy.supply``).
Candidates come ranked from the ``Catalog``; each one takes what its room
allows (``policy.sizing``: capacity, per-provider caps, rate limit, global
caps), rounded to the provider's granularity, and what it cannot take spills
to the next. Providers that cannot take anything are rejected with the
reason. Every item gets a decision: need, in flight, the amount given to
each chosen candidate, and the rejections.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.facts import Chosen, Decision, Order, Rejected
from messages.records import ProviderRecord
from policy.catalog import Catalog, Offer
from policy.granularity import size
from policy.settings import PlanSettings
from policy.sizing import Rooms
from policy.supply import SupplyView, in_flight

__all__ = ["Catalog", "Plan", "PlanSettings", "plan"]

#: Rejections listed per decision; beyond this they are counted in the note, so a
#: decision stays readable (and cheap) with thousands of providers.
LISTED = 10


@dataclass
class Plan:
    #: (provider, order) pairs to write as order facts.
    orders: list[tuple[str, Order]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


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
    if catalog is None:  # callers that plan often keep one (policy.rounds.catalog_for)
        catalog = Catalog(providers)
    flying = in_flight(view, now, settings.join_grace, settings.order_timeout)
    rooms: Rooms | None = None  # built on the first item with need: most rounds have none
    made: dict[tuple[str, str], Rejected] = {}
    for item in demand.items:
        need = item.count - flying.get(item.id, 0)
        offers, mismatched = catalog.offers(item)
        rejected = _Rejections(made)
        chosen: list[Chosen] = []
        remaining = need
        for offer in offers:
            if remaining <= 0:
                break
            if rooms is None:
                rooms = Rooms(providers, view, now, settings)
            why = rooms.blocked(offer)
            if why is not None:
                rejected.add(offer.provider, why)
                continue
            room, why = rooms.room(offer, item.kind)
            amount = size(remaining, room, offer.min_request, offer.step)
            if amount <= 0:
                rejected.add(offer.provider, why)
                continue
            chosen.append(_chosen(item, offer, amount))
            rooms.take(offer, item.kind, amount)
            remaining -= amount
        if need > 0:  # who cannot serve the item matters only while it needs something
            rejected.mismatched(mismatched)
        notes = []
        if need <= 0:
            notes.append("in-flight supply covers the need")
        elif remaining > 0:
            notes.append(f"{remaining} could not be placed")
        if rejected.unlisted:
            notes.append(f"{rejected.unlisted} more providers rejected")
        out.decisions.append(Decision(item=item.id, demand_seq=demand.seq, need=max(0, need),
                                      in_flight=flying.get(item.id, 0), chosen=chosen, rejected=rejected.listed,
                                      note="; ".join(notes)))
        out.orders += [
            (c.provider, Order(action="request", supply=item.kind, item_id=item.id, template=c.template,
                               resource=c.resource, count=c.count, reason=f"demand {item.id}: need {need}"))
            for c in chosen
        ]
    return out


class _Rejections:
    """One item's rejections: one per provider, the first ``LISTED`` listed, the rest counted."""

    def __init__(self, made: dict[tuple[str, str], Rejected]) -> None:
        self.listed: list[Rejected] = []
        self.unlisted = 0
        self._said: set[str] = set()
        #: Shared by all items of a round: rejections are frozen and repeat across items
        #: (the same full offers), so each is built once.
        self._made = made

    def add(self, provider: str, reason: str) -> None:
        if provider in self._said:
            return
        self._said.add(provider)
        if len(self.listed) >= LISTED:
            self.unlisted += 1
            return
        r = self._made.get((provider, reason))
        if r is None:
            r = self._made[(provider, reason)] = Rejected(provider=provider, reason=reason)
        self.listed.append(r)

    def mismatched(self, providers: list[str]) -> None:
        """Providers none of whose offers match: never among the candidates, so never said before."""
        room = max(0, LISTED - len(self.listed))
        for name in providers[:room]:
            self.add(name, "mismatch")
        self.unlisted += max(0, len(providers) - room)


def _chosen(item: HostItem | UnitItem, offer: Offer, amount: int) -> Chosen:
    if isinstance(item, HostItem):
        return Chosen(provider=offer.provider, template=offer.key, count=amount)
    return Chosen(provider=offer.provider, resource=offer.key, count=amount)
