"""When the passing of time alone could change what a planning round orders or returns.

The live planner plans on every demand change and every ``plan_every``;
most of those rounds order nothing new. The simulator plans only when a
fact changed something or when one of these moments is reached, so a month
of quiet costs nothing. Each moment is the edge of a time condition in
``policy/`` at which the orders or returns of a round could change:

- supply stops counting as in flight for an item (an untaken order or an
  unknown outcome times out, a joined host or granted grant leaves
  ``join_grace``), but only once more of it has stopped than the item's
  surplus of supply over its need; for a bundle item, in bundles: those its
  packed orders carry, and the share of them riding on each request's hosts;
- a cooldown ends, a rate window slides, a spend period starts, while an
  item has need that could not be placed;
- an idle host or unused grant comes due for reclaim (idle time, minimum
  hold, the end of a wanting spell of a host or bundle item it could
  serve, a billing-unit return window, a peak of license use leaving the
  idle window);
- a warm capacity schedule opens or closes (``policy.warm``); a warm scope
  whose lack could not all be ordered is need that could not be placed.

Decisions that order nothing may therefore be recorded at other moments
than a live planner would; what is ordered and returned is the same.
Conditions that hold *up to and including* a moment (``age <= timeout``)
change just after it: ``AFTER`` is added so the round that sees the change
is the first one past it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import Decision
from messages.records import InstanceRecord, RequestRecord
from messages.states import REQUEST
from policy.catalog import Catalog
from policy.cooldown import cleared, cooldowns
from policy.costs import HOLDING
from policy.limits import HOUR
from policy.reclaim import Matches, servings, wanted_until
from policy.rounds import PlanState
from policy.settings import PlanSettings
from policy.supply import ARRIVING, SERVING, pending, unresolved
from policy.warm import HOLDING as WARM_HOLDING
from policy.warm import targets_of

#: A moment just after an inclusive deadline.
AFTER = 1e-3


def next_change(demand: DemandSnapshot | None, state: PlanState, now: float, settings: PlanSettings,
                idle_time: float, decisions: Sequence[Decision], catalog: Catalog | None = None) -> float | None:
    """The earliest moment after ``now`` at which a round could order or return otherwise with no new fact.

    ``decisions`` are the round's just made at ``now`` (they say what each item still needs). ``catalog``:
    one built from the state's descriptions, which keeps which templates each item shape could use.
    """
    found = math.inf

    def at(t: float) -> None:
        nonlocal found
        if now < t < found:
            found = t

    counts = {i.id: i.count for i in demand.items} if demand else {}
    if settings.warm.rules:
        counts.update(targets_of(decisions))  # a warm scope's lack counts as an item's need
        edge = settings.warm.next_edge(now)
        if edge is not None:
            at(edge)
        # A host reaching its max_lifetime no longer counts for warm capacity: its successor is ordered.
        lifetimes = {p: lim.max_lifetime for p, lim in settings.providers.items() if lim.max_lifetime is not None}
        if lifetimes:
            for inst in state.instances.values():
                life = lifetimes.get(inst.provider)
                if life is not None and (inst.history.state or "requested") in WARM_HOLDING:
                    at((inst.launched_at if inst.launched_at is not None else inst.seen_at) + life)
    #: per item: how much more supply is in flight than it needs, after this round's orders
    surplus = {d.item: d.in_flight + sum(c.count if c.bundles is None else c.bundles for c in d.chosen)
               - counts.get(d.item, 0) for d in decisions}
    short = any(v < 0 for v in surplus.values())
    leaving: dict[str, list[tuple[float, int]]] = {}

    def leaves(item: str, t: float, n: int) -> None:
        if item in surplus and t > now:
            leaving.setdefault(item, []).append((t, n))

    timeout = settings.order_timeout
    for order in state.orders.values():
        if pending(order, now, timeout):
            leaves(order.order.item_id, order.at + timeout + AFTER, order.order.count)
            for item, n in order.order.bundles.items():  # a packed order's bundles, in bundles
                leaves(item, order.at + timeout + AFTER, n)
        lim = settings.providers.get(order.provider)
        if short and lim is not None and lim.rate_count is not None and order.order.action == "request":
            at(order.at + lim.rate_per)
    packed: list[tuple[RequestRecord, dict[str, int]]] = []
    for req in state.requests.values():
        if req.state == "failed" and req.outcome == "timeout":
            leaves(req.item_id, req.created_at + timeout + AFTER, req.count)
        if req.order_id and req.action == "request" and req.count > 0:
            its = state.orders.get(req.order_id)
            if its is not None and its.order.loads:
                packed.append((req, its.order.bundles))
    if packed:
        _bundles_leaving(packed, state, now, settings, leaves)
    if short:
        for c in cooldowns(state.requests.values(), now, settings.cooldown, settings.backoff_max,
                           cleared(state.providers)).values():
            at(c.until)
    #: the host and bundle items with a selector each, and until when each last wanted supply: read
    #: only once an idle host asks (most rounds of a month have none), then kept for the others
    wanting: list[tuple[Matches, HostItem | BundleItem]] | None = None
    recent: dict[str, float] = {}
    grace = settings.join_grace
    #: per (provider, template): what the items it could serve say of an idle host of it (``_wanted_from``)
    wanted_from: dict[tuple[str, str | None], float] = {}
    for inst in state.instances.values():
        # The hottest loop of a simulation: a month holds many hosts, few of them in their grace.
        s = inst.history.state
        if s in SERVING:
            joined = inst.joined_at
            if joined is not None and joined + grace > now:
                leaves(inst.item_id, joined + grace, 1)
            if s == "idle":
                key = (inst.provider, inst.template)
                floor = wanted_from.get(key)
                if floor is None:
                    if wanting is None:
                        items = [i for i in (demand.items if demand else []) if isinstance(i, (HostItem, BundleItem))]
                        recent = wanted_until(state.decided, now) if items else {}
                        serving = catalog.serving if catalog is not None else servings(state.providers)
                        wanting = [(serving(i), i) for i in items]
                    floor = wanted_from[key] = _wanted_from(inst, idle_time, wanting, recent)
                at(_reclaim_due(inst, state, now, settings, idle_time, floor))
    # Borrowed units go back only while nobody wants their resource, and only what recent use leaves
    # spare (at most base + borrowed - the peak of use): until then, only demand and use matter.
    wanted = {i.resource for i in (demand.items if demand else []) if isinstance(i, UnitItem) and i.count > 0}
    borrowed: dict[str, int] = {}
    for g in state.grants.values():
        if g.state in HOLDING:
            borrowed[g.resource] = borrowed.get(g.resource, 0) + g.count
    lent: set[str] = set()
    spare: dict[str, int] = {}
    for g in state.grants.values():
        if g.state == "granted" and g.granted_at is not None:
            leaves(g.item_id, g.granted_at + settings.join_grace, g.count)
            if g.resource in wanted:
                continue
            lent.add(g.resource)
            left = spare.get(g.resource)
            if left is None:
                left = spare[g.resource] = _spare(state, g.resource, borrowed[g.resource], now - idle_time)
            if left > 0:
                rec = state.providers.get(g.provider)
                hold = rec.description.min_hold_s if rec is not None and rec.description is not None else 0.0
                at(g.granted_at + max(idle_time, hold))
    for item, moments in leaving.items():
        gone = 0
        for t, n in sorted(moments):
            gone += n
            if gone > surplus[item]:
                at(t)
                break
    for name in lent:
        res = state.resources.get(name)
        for start, _ in res.peaks if res is not None else ():
            at(start + idle_time)
    if short and settings.budget.max_spend is not None:
        # Spend accrues every moment, so the room under the cap shrinks while supply is held.
        at(now + AFTER)
    return None if found == math.inf else found


def _bundles_leaving(packed: list[tuple[RequestRecord, dict[str, int]]], state: PlanState, now: float,
                     settings: PlanSettings, leaves: Callable[[str, float, int], None]) -> None:
    """When the bundles riding on packed requests' hosts stop counting as in flight, and how many.

    As ``policy.supply.bundles_in_flight`` counts them: a request's hosts in
    flight (coming, joined within ``join_grace``, not seen while it may
    still bring them) carry each item's bundles in proportion, rounded up.
    A joined host leaving its grace, or the unseen hosts of a request of
    unknown outcome timing out, lowers that share.
    """
    wanted = {req.id for req, _ in packed}
    seen: dict[str, list[InstanceRecord]] = {}
    for inst in state.instances.values():
        if inst.request_id in wanted:
            seen.setdefault(inst.request_id, []).append(inst)
    grace, timeout = settings.join_grace, settings.order_timeout
    for req, bundles in packed:
        hosts = seen.get(req.id, [])
        coming = sum(1 for i in hosts if i.state in ARRIVING)
        moments = [(i.joined_at + grace, 1) for i in hosts
                   if i.state in SERVING and i.joined_at is not None and now - i.joined_at < grace]
        unseen = max(0, req.count - len(hosts)) if unresolved(req, now, timeout) else 0
        flying = coming + len(moments) + unseen
        if unseen and req.state in REQUEST.terminal:  # an unknown outcome: counted until it times out
            moments.append((req.created_at + timeout + AFTER, unseen))
        for t, n in sorted(moments):
            after = flying - n
            for item, carried in bundles.items():
                drop = _share(carried, flying, req.count) - _share(carried, after, req.count)
                if drop > 0:
                    leaves(item, t, drop)
            flying = after


def _share(bundles: int, flying: int, asked: int) -> int:
    """An item's bundles on ``flying`` of ``asked`` hosts, as ``bundles_in_flight`` rounds them."""
    return bundles if flying >= asked else -(-bundles * flying // asked)


def _spare(state: PlanState, resource: str, borrowed: int, since: float) -> int:
    """At most how many borrowed units of a resource nobody used since ``since``."""
    res = state.resources.get(resource)
    if res is None:
        return borrowed
    return res.base + borrowed - res.peak_use(since)


def _wanted_from(inst: InstanceRecord, idle_time: float, wanting: list[tuple[Matches, HostItem | BundleItem]],
                 recent: dict[str, float]) -> float:
    """Until when the items an idle host could serve keep it (the same for every host of its template):
    inf while one of them wants hosts now (only a new demand changes that), else the end of the last
    wanting spell among them plus ``idle_time`` (-inf: none)."""
    floor = -math.inf
    for serves, item in wanting:
        if serves(inst.provider, inst.template):
            if item.count > 0:
                return math.inf
            if item.id in recent:
                floor = max(floor, recent[item.id] + idle_time)
    return floor


def _reclaim_due(inst: InstanceRecord, state: PlanState, now: float, settings: PlanSettings, idle_time: float,
                 kept_until: float) -> float:
    """When an idle host could first be ordered back, if nothing else changes (inf: not before new demand).

    ``kept_until``: until when the items it could serve keep it (``_wanted_from``).
    """
    rec = state.providers.get(inst.provider)
    desc = rec.description if rec is not None else None
    lim = settings.limits(inst.provider)
    held_since = inst.launched_at if inst.launched_at is not None else inst.seen_at
    idle_since = inst.history.since("idle")
    hold = held_since + (desc.min_hold_s if desc else 0.0)
    due = max(hold, (idle_since if idle_since is not None else now) + idle_time, kept_until)
    if lim.return_window is not None and due < math.inf:
        unit = lim.billing_unit or HOUR
        opens = held_since + math.floor((due - held_since) / unit) * unit + unit - lim.return_window
        due = max(due, opens)
    if lim.max_lifetime is not None:
        due = min(due, max(hold, held_since + lim.max_lifetime))
    return due
