"""Planning: order each demand item's unmet need from the best providers that can take it.

Need = the item's count minus supply in flight for it (``policy.supply``).
Candidates come ranked from the ``Catalog``; each one takes what its room
allows (``policy.sizing``: capacity, per-provider caps, rate limit, global
caps), rounded to the provider's granularity, and what it cannot take spills
to the next. Providers that cannot take anything are rejected with the
reason. Every item gets a decision: need, in flight, the amount given to
each chosen candidate, and the rejections.

Bundle items are packed together (``policy.packing``), when the round
reaches the first of them: their need is counted in bundles (less the
bundles riding on hosts in flight), and their orders are packed orders,
one per template, each saying which items' bundles its hosts carry. They
take their hosts from the same room as host items, so caps, rate limits
and cooldowns hold for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import Candidate, Chosen, Decision, Order, Rejected
from messages.records import ProviderRecord
from policy.catalog import Catalog, Item, Offer
from policy.granularity import size
from policy.packing import Packing, Unplaced, Wish, pack
from policy.settings import PlanSettings
from policy.sizing import Rooms
from policy.supply import SupplyView, bundles_in_flight, in_flight

__all__ = ["Catalog", "Plan", "PlanSettings", "Unplaced", "plan"]

#: Rejections listed per decision; beyond this they are counted in the note, so a
#: decision stays readable (and cheap) with thousands of providers.
LISTED = 10


@dataclass
class Plan:
    #: (provider, order) pairs to write as order facts.
    orders: list[tuple[str, Order]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    #: What each item still needs that no candidate could take, and why (hosts, units or bundles).
    unplaced: list[Unplaced] = field(default_factory=list)


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
    bundled = [i for i in demand.items if isinstance(i, BundleItem)]
    for item in demand.items:
        if isinstance(item, BundleItem):
            if item is bundled[0]:
                if rooms is None and any(i.count > 0 for i in bundled):
                    rooms = Rooms(providers, view, now, settings)
                _pack(bundled, demand.seq, catalog, rooms, view, now, settings, made, out)
            continue
        need = item.count - flying.get(item.id, 0)
        if need <= 0:  # covered (most items of most rounds): no candidate is weighed, none listed
            out.decisions.append(Decision(item=item.id, demand_seq=demand.seq, in_flight=flying.get(item.id, 0),
                                          note=no_need(item.count, flying.get(item.id, 0))))
            continue
        offers, mismatched = catalog.offers(item)
        rejected = _Rejections(made)
        candidates = _Candidates()
        chosen: list[Chosen] = []
        #: once the need is covered, why the other offers took nothing: the same words for every provider
        #: that took nothing (key ""), and for each that did (its templates named)
        covered: dict[str, str] = {}
        took: set[str] = set()  # providers chosen
        remaining = need
        for k, offer in enumerate(offers if need > 0 else ()):
            if remaining <= 0:
                key = offer.provider if offer.provider in took else ""
                why = covered.get(key)
                if why is None:
                    why = covered[key] = f"not needed: covered by {_covered(chosen, offer)}"
                if not candidates.weigh(offer.provider, why, item, offer):
                    candidates.unlisted += len(offers) - k - 1  # the list is full: the rest only counted
                    break
                continue
            if rooms is None:
                rooms = Rooms(providers, view, now, settings)
            why = rooms.blocked(offer)
            if why is not None:
                rejected.add(offer.provider, why)
                candidates.weigh(offer.provider, why, item, offer)
                continue
            room, why = rooms.room(offer, item.kind)
            amount = size(remaining, room, offer.min_request, offer.step)
            if amount <= 0:
                rejected.add(offer.provider, why)
                candidates.weigh(offer.provider, why, item, offer)
                continue
            chosen.append(_chosen(item, offer, amount))
            took.add(offer.provider)
            candidates.took(chosen[-1], why if amount < remaining else "")
            rooms.take(offer, item.kind, amount)
            remaining -= amount
        if need > 0:  # who cannot serve the item matters only while it needs something
            explain = _explainer(catalog, item)
            rejected.mismatched(mismatched, explain)
            candidates.mismatched(mismatched, explain)
        notes = [no_need(item.count, flying.get(item.id, 0))] if need <= 0 else []
        if remaining > 0:
            notes.append(f"{remaining} could not be placed")
            why = rejected.listed[0] if rejected.listed else None
            out.unplaced.append(Unplaced(item=item.id, count=remaining, reason=(
                f"{why.provider}: {why.reason}" if why else "no provider offers it")))
        if candidates.unlisted:
            notes.append(f"{candidates.unlisted} more candidates not listed")
        out.decisions.append(Decision(item=item.id, demand_seq=demand.seq, need=max(0, need),
                                      in_flight=flying.get(item.id, 0), chosen=chosen, rejected=rejected.listed,
                                      note="; ".join(notes), candidates=candidates.listed))
        out.orders += [
            (c.provider, Order(action="request", supply=item.kind, item_id=item.id, template=c.template,
                               resource=c.resource, count=c.count, reason=f"demand {item.id}: need {need}"))
            for c in chosen
        ]
    if bundled:  # decisions in the snapshot's order, whatever order the items were planned in
        at = {item.id: k for k, item in enumerate(demand.items)}
        out.decisions.sort(key=lambda d: at[d.item])
    return out


class _HostRoom:
    """The round's room as the packer asks for it: hosts of one offer, usable or not."""

    def __init__(self, rooms: Rooms) -> None:
        self.rooms = rooms

    def room(self, offer: Offer) -> tuple[int, str]:
        why = self.rooms.blocked(offer)
        if why is not None:
            return 0, why
        return self.rooms.room(offer, "hosts")

    def take(self, offer: Offer, hosts: int) -> None:
        self.rooms.take(offer, "hosts", hosts)

    def give(self, offer: Offer, hosts: int) -> None:
        self.rooms.give(offer, "hosts", hosts)


def _pack(items: list[BundleItem], seq: int, catalog: Catalog, rooms: Rooms | None, view: SupplyView,
          now: float, settings: PlanSettings, made: dict[tuple[str, str], Rejected], out: Plan) -> None:
    """Packs every bundle item's unmet bundles at once (they may share hosts): orders and decisions."""
    flying = bundles_in_flight(view, now, settings.join_grace, settings.order_timeout) if rooms else {}
    offers = {item.id: catalog.offers(item) for item in items}
    wishes = [Wish(item=i.id, count=i.count - flying.get(i.id, 0), resources=i.resources, offers=offers[i.id][0],
                   exclusive=i.exclusive, priority=i.priority) for i in items]
    packing = pack(wishes, _HostRoom(rooms)) if rooms is not None else Packing()
    for p in packing.orders:
        carried = p.bundles
        out.orders.append((p.offer.provider, Order(
            action="request", supply="hosts", template=p.offer.key, count=p.count, loads=list(p.loads),
            reason="bundles of " + ", ".join(f"{item} ({n})" for item, n in sorted(carried.items())))))
    lost = {u.item: u for u in packing.unplaced}
    for item in items:
        need = item.count - flying.get(item.id, 0)
        chosen = [Chosen(provider=p.offer.provider, template=p.offer.key, bundles=n,
                         count=sum(ld.hosts for ld in p.loads if item.id in ld.bundles))
                  for p in packing.orders if (n := p.bundles.get(item.id, 0))]
        rejected = _Rejections(made)
        explain = _explainer(catalog, item)
        said = {provider: (explain(provider) if reason.startswith("too small") else reason)
                for provider, reason in packing.rejected.get(item.id, [])}
        for provider, reason in said.items():
            rejected.add(provider, reason)
        candidates = _Candidates()
        notes = []
        if need <= 0:
            notes.append(no_need(item.count, flying.get(item.id, 0)))
        else:
            _bundle_candidates(candidates, offers[item.id][0], chosen, said)
            rejected.mismatched(offers[item.id][1], explain)
            candidates.mismatched(offers[item.id][1], explain)
            if item.id in lost:
                u = lost[item.id]
                notes.append(f"{u.count} could not be placed ({u.reason})")
                out.unplaced.append(u)
        if candidates.unlisted:
            notes.append(f"{candidates.unlisted} more candidates not listed")
        out.decisions.append(Decision(item=item.id, demand_seq=seq, need=max(0, need),
                                      in_flight=flying.get(item.id, 0), chosen=chosen, rejected=rejected.listed,
                                      note="; ".join(notes), candidates=candidates.listed))


def no_need(count: int, in_flight: int) -> str:
    """The note of an item that needs nothing more: asked for nothing, or covered by what is coming."""
    if count <= 0:
        return "no need" + (f" ({in_flight} still in flight)" if in_flight > 0 else "")
    return "in-flight supply covers the need"


def _bundle_candidates(candidates: _Candidates, offers: list[Offer], chosen: list[Chosen],
                       rejected: Mapping[str, str]) -> None:
    """A bundle item's providers in rank order: the templates that carry its bundles, and why the others
    carry none (too small, full, blocked; else the chosen ones were cheaper per bundle)."""
    covered = ", ".join(dict.fromkeys(c.provider for c in chosen))
    seen: set[str] = set()
    for offer in offers:
        p = offer.provider
        if p in seen:
            continue
        seen.add(p)
        mine = [c for c in chosen if c.provider == p]
        for c in mine:
            candidates.took(c, "")
        if mine:
            continue
        why = rejected.get(p) or (f"not needed: covered by {covered}" if covered else "not chosen")
        if not candidates.weigh(p, why):
            return


def _explainer(catalog: Catalog, item: Item) -> Callable[[str], str]:
    return lambda provider: catalog.why_not(item, provider) or "mismatch"


class _Candidates:
    """One item's candidates in rank order: every one that took something, and the first ``LISTED`` others.

    A provider turned down for the same reason on several templates is listed
    once (a paused provider with fifty templates is one line, not fifty).
    """

    def __init__(self) -> None:
        self.listed: list[Candidate] = []
        self.unlisted = 0
        self._others = 0
        self._said: set[tuple[str, str]] = set()

    def took(self, chosen: Chosen, why: str) -> None:
        self.listed.append(Candidate(provider=chosen.provider, template=chosen.template, resource=chosen.resource,
                                     count=chosen.count, bundles=chosen.bundles, why=why))

    def weigh(self, provider: str, why: str, item: HostItem | UnitItem | None = None,
              offer: Offer | None = None) -> bool:
        """List a candidate that took nothing: ``offer`` for ``item``, or (without them) ``provider`` as a whole.
        False once the list is full (the caller may stop). It is made only if listed: most are not, and a
        round weighs tens of thousands."""
        key = (provider, why)
        if key in self._said:
            return True
        self._said.add(key)
        if self._others >= LISTED:
            self.unlisted += 1
            return False
        self._others += 1
        self.listed.append(_passed(item, offer, why) if item is not None and offer is not None
                           else Candidate(provider=provider, why=why))
        return True

    def mismatched(self, providers: list[str], explain: Callable[[str], str]) -> None:
        room = max(0, LISTED - self._others)
        for name in providers[:room]:
            self._others += 1
            self.listed.append(Candidate(provider=name, why=explain(name)))
        self.unlisted += max(0, len(providers) - room)


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

    def mismatched(self, providers: list[str], explain: Callable[[str], str]) -> None:
        """Providers none of whose offers match: never among the candidates, so never said before."""
        room = max(0, LISTED - len(self.listed))
        for name in providers[:room]:
            self.add(name, explain(name))
        self.unlisted += max(0, len(providers) - room)


def _chosen(item: HostItem | UnitItem, offer: Offer, amount: int) -> Chosen:
    if isinstance(item, HostItem):
        return Chosen(provider=offer.provider, template=offer.key, count=amount)
    return Chosen(provider=offer.provider, resource=offer.key, count=amount)


def _covered(chosen: list[Chosen], offer: Offer) -> str:
    """Who covered the need: providers by name, the offer's own provider by its template (or pool)."""
    return ", ".join(dict.fromkeys(
        c.provider if c.provider != offer.provider else f"{c.provider}/{c.template or c.resource}" for c in chosen))


def _passed(item: HostItem | UnitItem, offer: Offer, why: str) -> Candidate:
    """An offer that took nothing, and why."""
    if isinstance(item, HostItem):
        return Candidate(provider=offer.provider, template=offer.key, why=why)
    return Candidate(provider=offer.provider, resource=offer.key, why=why)
