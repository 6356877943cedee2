"""Consolidation: a busy host replaced by a cheaper one once a cheaper template has room, through the scheduler.

When a round finds a host busy on a template dearer than another that has
room now (not paused, not cooling down, within capacity, caps, quota and
rate limits), it orders, in one go:

- a **drain** of the old host: a return order that waits for the host to be
  idle (``when_idle``, as an operator's ``instances drain``). Written before
  anything is asked of the scheduler, it is what the scheduler reads as the
  host's drain request (``drains``: the instances view's ``drain``, the Slurm
  bridge's ``scontrol update state=drain``): the scheduler starts no new work
  there, the work running ends in its own time, and the owner returns the
  host once it is idle, by the normal return path;
- a **replacement**: one host of the cheaper template, ordered as any host
  (the budget review has the last word; a replacement it cuts takes its
  drain with it, ``paired``), kept from the reclaim while the host it stands
  in for drains (``standing_in``);
- a **decision** (item ``consolidate/PROVIDER/MACHINE``) with the saving per
  hour expected.

Rules, each one an edge the tests walk:

- only hosts ``busy``, not on their way back already, not made for a
  scheduler's named node (the scheduler's to power down), of an active
  provider, held for at least their provider's ``min_hold``;
- the replacement fits what the host offers: every number attribute at least
  as large, every true flag true, every other attribute (``type``, the zone)
  the same, save ``capacity_type`` (on-demand may become spot); and it costs
  at least ``min_saving`` less per hour;
- the disruption budget: at most ``max_hosts`` hosts, and ``max_percent`` of
  the hosts up (rounded up), draining at once; hosts already draining count;
- nothing while a ``never_during`` window is open (read in ``policy.timezone``).

Dearest hosts first; each takes the cheapest fitting offer with room, which
then has one host less of room. Pure: facts and ``now`` in, orders out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING

from config.schedule import Schedule
from messages.description import AttrValue, ProviderDescription
from messages.facts import Candidate, Chosen, Decision, Order
from messages.records import InstanceRecord, OrderRecord, ProviderRecord
from messages.states import INSTANCE, SERVING
from policy.catalog import Catalog, Offer
from policy.supply import SupplyView, returning_machines

if TYPE_CHECKING:  # policy.sizing reads the settings, which hold this module's policy
    from policy.settings import PlanSettings
    from policy.sizing import Rooms

#: The prefix of consolidation's decision items and of the orders it places.
CONSOLIDATE = "consolidate"
#: Attributes a replacement may differ in: what the host is bought as, not what it offers.
FREE = frozenset({"capacity_type"})


def item_id(provider: str, machine: str) -> str:
    return f"{CONSOLIDATE}/{provider}/{machine}"


def is_consolidation(item: str) -> bool:
    return item.startswith(CONSOLIDATE + "/")


@dataclass(frozen=True)
class ConsolidationPolicy:
    enabled: bool = False
    #: At most this many hosts draining at once (None: no count cap) ...
    max_hosts: int | None = 1
    #: ... and this percentage of the hosts up, rounded up (None: no share cap).
    max_percent: float | None = None
    #: Nothing is drained while this schedule is open.
    never_during: Schedule | None = None
    #: The replacement's price per hour must be at most ``(1 - min_saving)`` of the host's.
    min_saving: float = 0.1
    tz: tzinfo = UTC


@dataclass(frozen=True)
class Move:
    """One host to drain and the host that replaces it."""

    provider: str
    machine: str
    name: str
    template: str
    price: float
    to_provider: str
    to_template: str
    to_price: float

    @property
    def item(self) -> str:
        return item_id(self.provider, self.machine)

    @property
    def saving(self) -> float:
        """Per hour, once the old host is gone."""
        return self.price - self.to_price

    def reason(self) -> str:
        return (f"consolidating to {self.to_provider}/{self.to_template}: saves {self.saving:g}/h "
                f"({self.price:g}/h to {self.to_price:g}/h)")


@dataclass
class Consolidation:
    moves: list[Move] = field(default_factory=list)
    #: Hosts draining before this round (consolidation's and operators' drains alike).
    draining: int = 0
    #: The disruption budget: most hosts draining at once (None: unbounded).
    allowed: int | None = None
    #: Hosts that could save, and why they were not moved: ``min_hold``, ``budget`` or ``window``.
    held_back: list[tuple[str, str]] = field(default_factory=list)
    #: The ``never_during`` window, as written, when it is open now.
    closed: str = ""


def drains(orders: Iterable[OrderRecord], instances: Mapping[str, InstanceRecord]) -> dict[str, str]:
    """The drain requests standing: host key -> reason, for every untaken return order that waits for its host
    to be idle (consolidation's and an operator's ``instances drain``), while the host is not on its way back."""
    out: dict[str, str] = {}
    for order in orders:
        o = order.order
        if o.action != "return" or not o.when_idle or order.request_ids:
            continue
        for m in o.machines:
            key = f"{order.provider}/{m}"
            inst = instances.get(key)
            if inst is not None and inst.state not in INSTANCE.terminal and inst.state not in (
                    "return_planned", "returning"):
                out[key] = o.reason
    return out


def consider(policy: ConsolidationPolicy, providers: Mapping[str, ProviderRecord], view: SupplyView,
             catalog: Catalog, rooms: Rooms, now: float, skip: Iterable[str] = ()) -> Consolidation:
    """The hosts to move now. ``rooms``: the room this round's orders left (taken from as moves are made);
    ``skip``: host keys this round gives back already."""
    out = Consolidation()
    if not policy.enabled:
        return out
    draining = drains(view.orders.values(), view.instances)
    out.draining = len(draining)
    up = sum(1 for i in view.instances.values() if i.state in SERVING)
    caps = [c for c in (policy.max_hosts,
                        math.ceil(up * policy.max_percent / 100 - 1e-9) if policy.max_percent is not None else None)
            if c is not None]
    out.allowed = min(caps) if caps else None
    closed = policy.never_during is not None and policy.never_during.open_at(now, policy.tz)
    out.closed = str(policy.never_during) if closed else ""
    returning = returning_machines(view)
    skipped = set(skip)
    hosts: list[tuple[float, InstanceRecord, Offer, ProviderDescription]] = []
    for inst in view.instances.values():
        if inst.state != "busy" or inst.node or inst.key in draining or inst.key in skipped \
                or inst.machine_id in returning.get(inst.provider, ()):
            continue
        rec = providers.get(inst.provider)
        desc = rec.description if rec is not None else None
        if rec is None or desc is None or rec.status != "active" or inst.template is None:
            continue
        offer = catalog.offer(inst.provider, inst.template)
        if offer is None:
            continue
        hosts.append((offer.price, inst, offer, desc))
    hosts.sort(key=lambda h: (-h[0], h[1].key))
    if not hosts:
        return out
    offers = catalog.scoped(None, None).offers
    for price, inst, offer, desc in hosts:
        best = _cheaper(inst, offer, desc, offers, catalog, policy.min_saving)
        if not best:
            continue
        held_for = now - (inst.launched_at if inst.launched_at is not None else inst.seen_at)
        if held_for < desc.min_hold_s:
            out.held_back.append((inst.key, "min_hold"))
            continue
        if closed:
            out.held_back.append((inst.key, "window"))
            continue
        if out.allowed is not None and out.draining + len(out.moves) >= out.allowed:
            out.held_back.append((inst.key, "budget"))
            continue
        for new in best:
            if rooms.blocked(new) is None and rooms.room(new, "hosts")[0] >= 1:
                rooms.take(new, "hosts", 1)
                out.moves.append(Move(inst.provider, inst.machine_id, inst.name, offer.key, price,
                                      new.provider, new.key, new.price))
                break
    return out


def _cheaper(inst: InstanceRecord, offer: Offer, desc: ProviderDescription, offers: list[Offer], catalog: Catalog,
             min_saving: float) -> list[Offer]:
    """The offers that can stand in for ``inst``, cheapest first (ties in rank order)."""
    ceiling = offer.price * (1 - min_saving)
    zone = _zone(desc, inst.template)
    out = [o for o in offers if o.price < offer.price and o.price <= ceiling + 1e-12
           and (o.provider, o.key) != (offer.provider, offer.key) and fits(offer.attributes, o.attributes)
           and (zone is None or _zone(catalog.descriptions.get(o.provider), o.key) == zone)]
    out.sort(key=lambda o: (o.price, o.rank))
    return out


def _zone(desc: ProviderDescription | None, template: str | None) -> str | None:
    if desc is None:
        return None
    t = next((t for t in desc.templates if t.id == template), None)
    return t.zone if t is not None and t.zone else desc.zone


def fits(old: Mapping[str, AttrValue], new: Mapping[str, AttrValue]) -> bool:
    """Whether a host of attributes ``new`` offers all a host of ``old`` does: numbers at least as large,
    true flags true, other values equal (``capacity_type`` aside)."""
    for k, v in old.items():
        if k in FREE:
            continue
        w = new.get(k)
        if isinstance(v, bool):
            if v and w is not True:
                return False
        elif isinstance(v, (int, float)):
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < v:
                return False
        elif w != v:
            return False
    return True


def summary(c: Consolidation) -> Decision:
    """The round's consolidation as a whole (item ``consolidate``): how many hosts could save, how many drain,
    and why the others wait. Its words change only when those counts do, so a steady state writes it once."""
    held: dict[str, int] = {}
    for _, cause in c.held_back:
        held[cause] = held.get(cause, 0) + 1
    budget = f"{c.draining + len(c.moves)} draining" + (f", at most {c.allowed} at once" if c.allowed is not None
                                                        else "")
    parts = [f"{len(c.moves)} moved" if c.moves else "", budget]
    parts += [f"{held['budget']} held back by the disruption budget" if "budget" in held else "",
              f"{held['min_hold']} before their min_hold" if "min_hold" in held else "",
              f"{held['window']} not during {c.closed}" if "window" in held else ""]
    if not c.moves and not held:
        parts.append("no busy host has a cheaper template with room")
    return Decision(item=CONSOLIDATE, need=len(c.moves) + len(c.held_back), in_flight=c.draining,
                    note="consolidation: " + "; ".join(p for p in parts if p))


def orders(c: Consolidation) -> tuple[list[tuple[str, Order]], list[tuple[str, Order]], list[Decision]]:
    """The replacements (request orders, for the budget review), the drains (return orders waiting for the
    host to be idle), one decision per move, and the round's ``summary``."""
    requests, drains_, decisions = [], [], []
    for m in c.moves:
        why = m.reason()
        requests.append((m.to_provider, Order(action="request", supply="hosts", item_id=m.item,
                                              template=m.to_template, count=1, reason=why)))
        drains_.append((m.provider, Order(action="return", supply="hosts", item_id=m.item, machines=[m.machine],
                                          count=1, when_idle=True, reason=why)))
        decisions.append(Decision(
            item=m.item, need=1, chosen=[Chosen(provider=m.to_provider, template=m.to_template, count=1)],
            candidates=[Candidate(provider=m.to_provider, template=m.to_template, count=1)],
            saving_per_hour=round(m.saving, 6),
            note=f"consolidating {m.provider}/{m.template} host {m.name} (busy) to {m.to_provider}/{m.to_template}:"
                 f" saves {m.saving:g}/h expected ({m.price:g}/h to {m.to_price:g}/h); drained through the"
                 f" scheduler, returned once idle ({c.draining + len(c.moves)} draining"
                 + (f", at most {c.allowed})" if c.allowed is not None else ")")))
    decisions.append(summary(c))
    return requests, drains_, decisions


def paired(returns: list[tuple[str, Order]], approved: Iterable[tuple[str, Order]]) -> list[tuple[str, Order]]:
    """``returns`` without the drains whose replacement the budget review cut: a host is drained only for a
    replacement on its way."""
    kept = {o.item_id for _, o in approved if is_consolidation(o.item_id)}
    return [(p, o) for p, o in returns if not (is_consolidation(o.item_id) and o.item_id not in kept)]


def standing_in(returns: list[tuple[str, Order]], view: SupplyView) -> list[tuple[str, Order]]:
    """``returns`` without the replacements whose old host still drains: a replacement stands in for it (the
    scheduler moves work onto it), so an idle spell of its own before the old host is gone is no reason to give it
    back. Once the old host is on its way back, it is a host as any other."""
    replacements = {f"{provider}/{m}" for provider, o in returns if o.action == "return" and not o.when_idle
                    for m in o.machines if _replacement(view, f"{provider}/{m}")}
    if not replacements:
        return returns
    draining = {o.order.item_id for o in view.orders.values()
                if o.order.when_idle and not o.request_ids and is_consolidation(o.order.item_id)}
    standing = set()
    for key in replacements:
        item = view.instances[key].item_id
        old = view.instances.get(item[len(CONSOLIDATE) + 1:])
        if item in draining and old is not None and old.state in SERVING:
            standing.add(key)
    out = []
    for provider, o in returns:
        machines = [m for m in o.machines if f"{provider}/{m}" not in standing]
        if machines == o.machines:
            out.append((provider, o))
        elif machines:
            out.append((provider, o.model_copy(update={"machines": machines, "count": len(machines)})))
    return out


def _replacement(view: SupplyView, key: str) -> bool:
    inst = view.instances.get(key)
    return inst is not None and is_consolidation(inst.item_id)


def consolidate(providers: Mapping[str, ProviderRecord], view: SupplyView, now: float, settings: PlanSettings,
                catalog: Catalog, ordered: Iterable[tuple[str, Order]], returns: list[tuple[str, Order]]
                ) -> tuple[list[tuple[str, Order]], list[tuple[str, Order]], list[Decision], list[tuple[str, Order]]]:
    """A round's consolidation pass, after its orders (``ordered``, whose room it leaves) and returns (whose
    hosts it leaves alone): replacements, drains and decisions (``orders``), and the returns without the
    replacements that stand in for a host still draining (``standing_in``)."""
    returns = standing_in(returns, view) if returns else returns
    policy = settings.consolidation
    if not policy.enabled:
        return [], [], [], returns
    from policy.sizing import Rooms  # policy.sizing reads the settings, which hold this module's policy

    rooms = Rooms(providers, view, now, settings)
    for provider, o in ordered:
        if o.action == "request" and o.supply == "hosts" and o.template is not None:
            offer = catalog.offer(provider, o.template)
            if offer is not None:
                rooms.take(offer, "hosts", o.count)
    skip = [f"{provider}/{m}" for provider, o in returns for m in o.machines]
    return (*orders(consider(policy, providers, view, catalog, rooms, now, skip)), returns)
