"""Which idle supply to give back.

Hosts. An idle host is returned when all of these hold:

- it has been idle for ``idle_time`` (without a break: a busy spell restarts it);
- it has been held for the provider's minimum hold since launch;
- no demand item its template could serve asks for hosts (or bundles) now,
  nor needed more than was on its way within the last ``idle_time``
  (hysteresis: while new hosts are still being ordered for work it could
  do, it is not given back only for others to be bought). A host item
  could use it when its selector matches the template; a bundle item when
  its selector matches and one host holds at least one of its bundles;
- if the provider sets a billing-boundary ``return_window``: the end of its
  current billed unit is at most that far away (an hour already paid for is
  used to the end).

A host held for longer than its provider's ``max_lifetime`` is returned as
soon as it is idle, past its minimum hold, whatever the rest says.

Warm capacity (``policy.warm``) keeps back, of the idle hosts due, as many
as each of its scopes needs for its ``min_idle`` ready and ``min_hosts``
held: a host past its ``max_lifetime`` only while no younger one stands in.

Units. While its resource has no demand, the units above the most that
were in use at once within the last ``idle_time`` (base + borrowed counted
against observed use; units lent within ``idle_time`` do not count, as they
were never seen unused that long) are spare and go back, from grants held past
``idle_time`` and the minimum hold, oldest first: a grant whose units are all
spare goes back whole; otherwise the largest granular amount of the spare
units (``min_request`` plus whole ``step``s) goes back from it and the rest
stays granted. Units in use are never returned; rounding goes down, never up.

A host made for a scheduler's named node is the scheduler's to power down
while the name is wanted; once it is let go, its host goes back
(``policy.nodes``).

Supply already on its way back is never ordered again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import Order
from messages.records import DecisionRecord, GrantRecord, InstanceRecord, ProviderRecord, ResourceRecord
from policy.catalog import Catalog
from policy.costs import HOLDING
from policy.granularity import size_down
from policy.limits import HOUR, UNLIMITED, ProviderLimits
from policy.matching import Serving
from policy.nodes import return_let_go
from policy.supply import SupplyView, returning_machines, under_way
from policy.warm import WarmPolicy, census, kept

#: Whether a host of a (provider, template id) can do an item's work.
Matches = Callable[[str, str | None], bool]


def wanted_until(history: Iterable[DecisionRecord], now: float) -> dict[str, float]:
    """Per demand item: until when it last wanted supply (``now`` if it still does).

    Read from the planner's decisions: an item wants supply while its need
    beyond what is in flight is positive; decisions are recorded when they
    change, so the first one after a wanting spell says when it ended.
    """
    out: dict[str, float] = {}
    wanting: dict[str, bool] = {}
    for rec in history:
        d = rec.decision
        now_wanting = d.need > 0
        if now_wanting:
            out[d.item] = now
        elif wanting.get(d.item):
            out[d.item] = rec.at
        wanting[d.item] = now_wanting
    return out


def reclaim(
    demand: DemandSnapshot | None,
    providers: Mapping[str, ProviderRecord],
    resources: Mapping[str, ResourceRecord],
    view: SupplyView,
    now: float,
    idle_time: float,
    limits: Mapping[str, ProviderLimits] | None = None,
    history: Iterable[DecisionRecord] = (),
    warm: WarmPolicy | None = None,
    order_timeout: float = math.inf,
    catalog: Catalog | None = None,
) -> list[tuple[str, Order]]:
    """The returns of idle supply due now. ``warm``: warm capacity, whose scopes keep idle hosts back
    (``policy.warm``); ``order_timeout``: how long an order no owner took up counts as held (its hosts
    count for warm capacity's floor); ``catalog``: one built from these providers' descriptions, which keeps
    which templates each item shape could use (else they are worked out here)."""
    items = demand.items if demand else []
    limits = limits or {}
    returning, returning_grants = _already_returning(view)
    due: dict[str, tuple[InstanceRecord, str]] = {}
    # Most hosts are busy, coming or gone: only the idle ones are sorted and weighed, and the items
    # that keep them are read only when there is one.
    idle = [inst for inst in view.instances.values() if inst.history.state == "idle"]
    hosts_wanted: list[Matches] = []
    if idle:
        recent = wanted_until(history, now)
        serving = catalog.serving if catalog is not None else servings(providers)
        hosts_wanted = [serving(i) for i in items if isinstance(i, (HostItem, BundleItem))
                        and (i.count > 0 or recent.get(i.id, -math.inf) > now - idle_time)]
    for inst in sorted(idle, key=lambda i: i.key):
        if inst.machine_id in returning.get(inst.provider, ()):
            continue
        if inst.node and inst.node in view.nodes:
            continue  # a named node's host: the scheduler powers it down, and ``policy.nodes`` returns it
        rec = providers.get(inst.provider)
        if rec is None or not rec.owner:
            continue
        why = _host_due(inst, rec, limits.get(inst.provider, UNLIMITED), hosts_wanted, now, idle_time)
        if why:
            due[inst.key] = (inst, why)
    if due and warm is not None and warm.rules:
        targets = warm.targets(now)
        counts = census(targets, view, providers, now, order_timeout, limits, returning)
        for key in kept(targets, counts, {k: inst for k, (inst, _) in due.items()}, limits, now):
            del due[key]
    by_provider: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for inst, why in due.values():
        by_provider.setdefault(inst.provider, []).append(inst.machine_id)
        reasons.setdefault(inst.provider, why)
    orders = [
        (p, Order(action="return", supply="hosts", machines=m, count=len(m), reason=reasons[p]))
        for p, m in sorted(by_provider.items())
    ]
    if view.nodes:
        orders += return_let_go(view, returning)
    return orders + _grants_due(items, providers, resources, view, now, idle_time, returning_grants)


def servings(providers: Mapping[str, ProviderRecord]) -> Callable[[HostItem | BundleItem], Matches]:
    """``Catalog.serving`` without a catalog: for each item, whether a (provider, template id) serves it,
    read from these providers' descriptions at every question, nothing kept."""
    descriptions = {name: rec.description for name, rec in providers.items()}
    return lambda item: Serving(item, descriptions).match


def _host_due(inst: InstanceRecord, rec: ProviderRecord, lim: ProviderLimits,
              wanted: list[Matches], now: float, idle_time: float) -> str:
    """Why this idle host goes back now, or "" if it stays."""
    desc = rec.description
    held_since = inst.launched_at if inst.launched_at is not None else inst.seen_at
    held_for = now - held_since
    if held_for < (desc.min_hold_s if desc else 0.0):
        return ""
    if lim.max_lifetime is not None and held_for >= lim.max_lifetime:
        return f"held past max_lifetime {lim.max_lifetime:.0f}s"
    idle_since = inst.history.since("idle")
    if now - (now if idle_since is None else idle_since) < idle_time:
        return ""
    if any(serves(inst.provider, inst.template) for serves in wanted):
        return ""
    if lim.return_window is not None:
        unit = lim.billing_unit or HOUR
        left = unit - held_for % unit
        if left > lim.return_window:
            return ""
        return f"idle for {idle_time:.0f}s, {left:.0f}s before its billed unit ends"
    return f"idle for {idle_time:.0f}s"


def _grants_due(items: list, providers: Mapping[str, ProviderRecord], resources: Mapping[str, ResourceRecord],
                view: SupplyView, now: float, idle_time: float, ordered: Mapping[str, int]) -> list[tuple[str, Order]]:
    wanted = {i.resource for i in items if isinstance(i, UnitItem) and i.count > 0}
    #: Per resource: borrowed units that stay once the returns under way are done.
    staying: dict[str, int] = {}
    #: Per resource: grants that may give units back now, oldest first.
    due: dict[str, list[GrantRecord]] = {}
    holding = [grant for grant in view.grants.values() if grant.history.state in HOLDING]
    for grant in sorted(holding, key=lambda g: (g.granted_at or 0.0, g.id)):
        going = ordered.get(grant.id, 0) if grant.state == "granted" else grant.returning
        # Units lent within idle_time were never seen unused that long: the scheduler may have handed
        # them out since the last use read (it may, as soon as their total is published). They neither
        # go back nor count towards what lets others go.
        if grant.granted_at is not None and grant.granted_at <= now - idle_time:
            staying[grant.resource] = staying.get(grant.resource, 0) + grant.count - going
        if grant.state != "granted" or grant.id in ordered or grant.resource in wanted or grant.count <= 0:
            continue
        rec = providers.get(grant.provider)
        if rec is None or not rec.owner:
            continue
        min_hold = rec.description.min_hold_s if rec.description else 0.0
        held_since = grant.granted_at if grant.granted_at is not None else now
        if now - held_since >= max(idle_time, min_hold):
            due.setdefault(grant.resource, []).append(grant)
    orders: list[tuple[str, Order]] = []
    for resource, grants in sorted(due.items()):
        res = resources.get(resource)
        spare = (res.base if res else 0) + staying.get(resource, 0) - _peak_use(res, now - idle_time)
        for grant in grants:
            if spare <= 0:
                break
            desc = providers[grant.provider].description
            part = grant.count if grant.count <= spare else (
                size_down(spare, desc.min_request, desc.step) if desc else spare)
            if part <= 0:
                continue
            spare -= part
            what = "unused" if part == grant.count else f"{part} of {grant.count} unused"
            orders.append((grant.provider, Order(action="return", supply="units", resource=resource,
                                                 grants=[grant.id], count=part,
                                                 reason=f"{what} for {idle_time:.0f}s")))
    return orders


def _peak_use(res: ResourceRecord | None, since: float) -> int:
    """The most units of a resource in use at once since ``since``: what its total must not go below."""
    if res is None:
        return 0
    return res.peak_use(since)


def portions(grants: Iterable[str], count: int, held: Mapping[str, int]) -> dict[str, int]:
    """How many units each named grant gives back when a return of ``count`` names them, in order.

    A return names one grant with part of its units, or whole grants whose
    units add up to its count; the same reading serves the planner (what is
    already on its way back) and the owner (what to ask the provider for).
    """
    out: dict[str, int] = {}
    for grant_id in grants:
        n = min(count, held.get(grant_id, 0))
        if n > 0:
            out[grant_id] = n
            count -= n
    return out


def _already_returning(view: SupplyView) -> tuple[dict[str, set[str]], dict[str, int]]:
    """Machines, and units per grant, named by return orders no owner has finished with yet."""
    grants: dict[str, int] = {}
    for order in view.orders.values():
        o = order.order
        if o.action == "return" and o.grants and under_way(order, view):
            held = {g: view.grants[g].count for g in o.grants if g in view.grants}
            grants.update(portions(o.grants, o.count, held))
    return returning_machines(view), grants
