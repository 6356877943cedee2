"""Planning: order each demand item's unmet need from the best providers that can take it.

Need = the item's count minus supply in flight for it (``policy.supply``).
Candidates come ranked from the ``Catalog``; each one takes what its room
allows (``policy.sizing``: capacity, per-provider caps, rate limit, global
caps), rounded to the provider's granularity, and what it cannot take spills
to the next. Providers that cannot take anything are rejected with the
reason. Every item gets a decision: need, in flight, the amount given to
each chosen candidate, and the rejections.

An item is weighed into plain tuples first, and only then made into a
decision: a round that weighs an item as the last round did (the catalog
keeps each item's last decision with its tuples) gives the same decision
and orders again, so a steady round makes no new objects for the
collector to trace; one that differs in anything gets a new decision,
its candidates made once per round however many items share them.

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
from typing import NamedTuple

from messages.base import copied
from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import Candidate, Chosen, Decision, Order, Rejected
from messages.records import ProviderRecord
from policy.catalog import Catalog, Item, Offer, Ranked
from policy.granularity import size
from policy.nodes import order_nodes
from policy.packing import Packing, Unplaced, Wish, pack
from policy.settings import PlanSettings
from policy.sizing import Rooms
from policy.supply import SupplyView, bundles_in_flight, in_flight, returning_machines
from policy.warm import Target, census

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
    warm = settings.warm.targets(now) if settings.warm.rules else []
    if demand is None and not view.nodes and not warm:
        return out
    if catalog is None:  # callers that plan often keep one (policy.rounds.catalog_for)
        catalog = Catalog(providers)
    rooms: Rooms | None
    if view.nodes:
        # A scheduler's named nodes first: the scheduler waits on each of them by name.
        rooms = Rooms(providers, view, now, settings, catalog)
        out.orders, out.decisions = order_nodes(view, now, settings.order_timeout, catalog, rooms)
    else:
        rooms = None  # built on the first item with need: most rounds have none
    made = catalog.made
    if made is None or made.size() > _Made.KEEP:
        made = catalog.made = _Made()
    #: Offers that take nothing for the rest of the round, by identity (the catalog holds them), and why:
    #: blocked, or no room (room only shrinks in a round). Thousands of items walk the same ones.
    dead: dict[int, str] = {}
    if demand is None:
        if warm:
            _keep_warm(warm, 0, catalog, rooms, providers, view, now, settings, made, dead, out)
        return out
    flying = in_flight(view, now, settings.join_grace, settings.order_timeout)
    last: dict[str, _Decided] = catalog.decided
    decided: dict[str, _Decided] = {}
    bundled = [i for i in demand.items if isinstance(i, BundleItem)]
    for item in demand.items:
        if isinstance(item, BundleItem):
            if item is bundled[0]:
                if rooms is None and any(i.count > 0 for i in bundled):
                    rooms = Rooms(providers, view, now, settings, catalog)
                _pack(bundled, demand.seq, catalog, rooms, view, now, settings, made.rejected, out)
                dead.clear()  # the packer gives back hosts it moved: rooms say again what they say
            continue
        coming = flying.get(item.id, 0)
        need = item.count - coming
        if need > 0 and rooms is None:
            rooms = Rooms(providers, view, now, settings, catalog)
        said = _weigh(item, need, catalog, rooms, dead)
        old = last.get(item.id)
        if old is not None and old.said == said:  # as the last round decided: its decision and orders serve
            d = old if old.decision.demand_seq == demand.seq else _Decided(
                old.said, copied(old.decision, demand_seq=demand.seq), old.orders, old.unplaced)
        else:
            d = _decided(item, demand.seq, need, said, made)
        decided[item.id] = d
        out.decisions.append(d.decision)
        out.orders += d.orders
        if d.unplaced is not None:
            out.unplaced.append(d.unplaced)
    catalog.decided = decided
    if bundled:  # decisions in the snapshot's order, whatever order the items were planned in
        at = {item.id: k for k, item in enumerate(demand.items)}
        out.decisions.sort(key=lambda d: at.get(d.item, -1))
    if warm:  # after the demand: the room demand leaves
        _keep_warm(warm, demand.seq, catalog, rooms, providers, view, now, settings, made, dead, out)
    return out


def _keep_warm(targets: list[Target], seq: int, catalog: Catalog, rooms: Rooms | None,
               providers: Mapping[str, ProviderRecord], view: SupplyView, now: float, settings: PlanSettings,
               made: _Made, dead: dict[int, str], out: Plan) -> None:
    """Warm capacity's orders and decisions (``policy.warm``): each scope's lack, ordered from its offers in
    rank order within the room the demand items left, most specific scope first."""
    counts = census(targets, view, providers, now, settings.order_timeout, settings.providers,
                    returning_machines(view), out.orders)
    ordered: list[tuple[str, str | None, int]] = []  # (provider, template, hosts) ordered by earlier scopes
    for t, c in zip(targets, counts):
        for provider, template, n in ordered:
            if t.holds(provider, template):
                c.held += n
                c.not_idle += n
                c.coming += n
        need = c.need(t)
        note = c.note(t)
        if need <= 0:
            out.decisions.append(Decision(item=t.item, demand_seq=seq, need=0, in_flight=c.coming, note=note))
            continue
        ranked = catalog.scoped(t.provider, t.template)
        if not ranked.offers:
            why = _no_offer(t, catalog)
            out.decisions.append(Decision(item=t.item, demand_seq=seq, need=need, in_flight=c.coming,
                                          note=f"{note}; {need} could not be placed ({why})"))
            out.unplaced.append(Unplaced(item=t.item, count=need, reason=why))
            continue
        if rooms is None:
            rooms = Rooms(providers, view, now, settings, catalog)
        item = HostItem.model_construct(id=t.item, count=need + c.coming)
        said = _weigh(item, need, catalog, rooms, dead, ranked)
        chosen = made.all(made.chosen, Chosen, ("provider", "template", "resource", "count"), said.chosen)
        out.decisions.append(Decision(
            item=t.item, demand_seq=seq, need=need, in_flight=c.coming, chosen=chosen,
            rejected=made.all(made.rejected, Rejected, ("provider", "reason"), said.rejected),
            note="; ".join(n for n in (note, said.note) if n),
            candidates=made.all(made.candidates, Candidate, ("provider", "template", "resource", "count", "why"),
                                said.candidates)))
        for ch in chosen:
            ordered.append((ch.provider, ch.template, ch.count))
            out.orders.append((ch.provider, Order(action="request", supply="hosts", item_id=t.item,
                                                  template=ch.template, count=ch.count,
                                                  reason=f"kept warm: {t.said}: {need} more wanted")))
        if said.unplaced:
            out.unplaced.append(Unplaced(item=t.item, count=said.unplaced[0], reason=said.unplaced[1]))


def _no_offer(t: Target, catalog: Catalog) -> str:
    """Why a warm scope has no offer to order from."""
    if t.provider is None:
        return "no hosts provider has described a template yet"
    desc = catalog.descriptions.get(t.provider)
    if desc is None:
        return f"{t.provider}: not described yet"
    if desc.kind != "hosts":
        return f"{t.provider}: lends units, not hosts"
    if t.template is not None:
        return f"{t.provider}: no template named {t.template} (it has {', '.join(x.id for x in desc.templates[:5])})"
    return f"{t.provider}: offers no templates"


class _Said(NamedTuple):
    """One item's decision as a round weighs it, in plain tuples: compared with the last round's before any
    model is made, so a round that decides as the last one makes none."""

    kind: str
    need: int
    in_flight: int
    #: (provider, template, resource, count)
    chosen: tuple[tuple[str, str | None, str | None, int], ...]
    #: (provider, reason)
    rejected: tuple[tuple[str, str], ...]
    note: str
    #: (provider, template, resource, count, why)
    candidates: tuple[tuple[str, str | None, str | None, int, str], ...]
    #: What could not be placed: (count, reason), or None.
    unplaced: tuple[int, str] | None


class _Decided(NamedTuple):
    """An item's decision, the orders it gives and what it left unplaced, with what they were made from."""

    said: _Said
    decision: Decision
    orders: list[tuple[str, Order]]
    unplaced: Unplaced | None


class _Made:
    """Chosen entries, rejections and candidates, each made once: they are frozen and repeat across items
    (the same full offers, the same words) and rounds. The catalog keeps one; a new one is started past
    ``KEEP`` entries, so what rounds no longer give is let go."""

    KEEP = 20_000

    def __init__(self) -> None:
        #: Also shared with the packer: (provider, reason) -> Rejected.
        self.rejected: dict[tuple[str, str], Rejected] = {}
        self.chosen: dict[tuple, Chosen] = {}
        self.candidates: dict[tuple, Candidate] = {}

    def size(self) -> int:
        return len(self.rejected) + len(self.chosen) + len(self.candidates)

    def all(self, made: dict, model: type, names: tuple[str, ...], fields: tuple[tuple, ...]) -> list:
        out = []
        for f in fields:
            m = made.get(f)
            if m is None:
                m = made[f] = model(**dict(zip(names, f)))
            out.append(m)
        return out


def _decided(item: HostItem | UnitItem, seq: int, need: int, said: _Said, made: _Made) -> _Decided:
    chosen = made.all(made.chosen, Chosen, ("provider", "template", "resource", "count"), said.chosen)
    decision = Decision(
        item=item.id, demand_seq=seq, need=max(0, need), in_flight=said.in_flight, chosen=chosen,
        rejected=made.all(made.rejected, Rejected, ("provider", "reason"), said.rejected), note=said.note,
        candidates=made.all(made.candidates, Candidate, ("provider", "template", "resource", "count", "why"),
                            said.candidates))
    orders = [(c.provider, Order(action="request", supply=item.kind, item_id=item.id, template=c.template,
                                 resource=c.resource, count=c.count, reason=f"demand {item.id}: need {need}"))
              for c in chosen]
    unplaced = Unplaced(item=item.id, count=said.unplaced[0], reason=said.unplaced[1]) if said.unplaced else None
    return _Decided(said, decision, orders, unplaced)


def _weigh(item: HostItem | UnitItem, need: int, catalog: Catalog, rooms: Rooms | None, dead: dict[int, str],
           ranked: Ranked | None = None) -> _Said:
    """One host or units item: its offers in rank order (``ranked``, else the catalog's for the item), each
    taking what its room allows, spilling to the next; what each took or why not (candidates), the
    rejections, the note and what could not be placed."""
    offers, mismatched, runs = ranked if ranked is not None else catalog.ranked(item)
    hosts = isinstance(item, HostItem)
    kind = item.kind
    chosen: list[tuple] = []
    listed: list[tuple] = []  # candidates
    rejected: list[tuple[str, str]] = []
    turned: set[str] = set()  # providers rejected
    said: set[tuple[str, str]] = set()  # (provider, why) of the candidates that took nothing
    others = 0  # candidates listed that took nothing
    unlisted = 0
    remaining = need
    k = 0
    n = len(offers) if need > 0 else 0
    while k < n and remaining > 0:
        offer = offers[k]
        k += 1
        p = offer.provider
        why = dead.get(id(offer))
        if why is None:
            why = rooms.blocked(offer)  # type: ignore[union-attr]
            if why is None:
                room, why = rooms.room(offer, kind)  # type: ignore[union-attr]
                amount = size(remaining, room, offer.min_request, offer.step)
                if amount > 0:
                    c = (p, offer.key, None, amount) if hosts else (p, None, offer.key, amount)
                    chosen.append(c)
                    listed.append(c + (why if amount < remaining else "",))
                    rooms.take(offer, kind, amount)  # type: ignore[union-attr]
                    remaining -= amount
                    continue
                if room <= 0:
                    dead[id(offer)] = why
            else:
                dead[id(offer)] = why
        if p not in turned:
            turned.add(p)
            if len(rejected) < LISTED:
                rejected.append((p, why))
        if (p, why) not in said:
            said.add((p, why))
            if others < LISTED:
                others += 1
                listed.append((p, offer.key, None, 0, why) if hosts else (p, None, offer.key, 0, why))
            else:
                unlisted += 1
    if remaining <= 0 and k < n:
        # The need is covered: why the other offers took nothing, the same words for every provider that
        # took nothing, and for each that did (its templates named). A provider is listed once.
        took = {c[0] for c in chosen}
        covered: dict[str, str] = {}
        while k < n:
            offer = offers[k]
            at = k
            k = runs[k]  # the provider's next offers in a row: the same words, so said already
            p = offer.provider
            mine = p in took
            why = covered.get(p if mine else "")
            if why is None:
                why = covered[p if mine else ""] = f"not needed: covered by {_covered(chosen, p)}"
            if (p, why) in said:
                continue
            said.add((p, why))
            if others >= LISTED:
                unlisted += n - at  # the list is full: the rest only counted
                break
            others += 1
            listed.append((p, offer.key, None, 0, why) if hosts else (p, None, offer.key, 0, why))
    if need > 0 and mismatched:  # who cannot serve the item matters only while it needs something
        room = max(0, LISTED - len(rejected))
        for name in mismatched[:room]:
            if name not in turned:
                turned.add(name)
                rejected.append((name, catalog.why_not(item, name) or "mismatch"))
        room = max(0, LISTED - others)
        for name in mismatched[:room]:
            others += 1
            listed.append((name, None, None, 0, catalog.why_not(item, name) or "mismatch"))
        unlisted += max(0, len(mismatched) - room)
    coming = item.count - need
    notes = [no_need(item.count, coming)] if need <= 0 else []
    unplaced = None
    if remaining > 0:
        notes.append(f"{remaining} could not be placed")
        unplaced = (remaining, f"{rejected[0][0]}: {rejected[0][1]}" if rejected else "no provider offers it")
    if unlisted:
        notes.append(f"{unlisted} more candidates not listed")
    return _Said(item.kind, need, coming, tuple(chosen), tuple(rejected), "; ".join(notes), tuple(listed), unplaced)


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

    def weigh(self, provider: str, why: str) -> bool:
        """List a provider that took nothing, as a whole. False once the list is full (the caller may stop)."""
        key = (provider, why)
        if key in self._said:
            return True
        self._said.add(key)
        if self._others >= LISTED:
            self.unlisted += 1
            return False
        self._others += 1
        self.listed.append(Candidate(provider=provider, why=why))
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


def _covered(chosen: list[tuple], provider: str) -> str:
    """Who covered the need, as ``provider``'s candidates say it: providers by name, ``provider`` itself by
    its template (or pool)."""
    return ", ".join(dict.fromkeys(c[0] if c[0] != provider else f"{c[0]}/{c[1] or c[2]}" for c in chosen))
