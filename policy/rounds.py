"""One planning round, in three steps, as the live daemon and the simulator both run it.

The live planner and the budget are two actors that talk by message, so a
round is split where the message goes: ``propose`` (the planner: orders,
returns, decisions), ``review_orders`` (the budget: the global caps' last
word), ``outcome`` (the planner again: what to write, with the budget's cuts
in the decisions). The simulator calls the same three in a row, so both
decide alike by construction rather than by imitation.

``state`` is anything shaped like the projection (``PlanState``): the
simulator passes a view trimmed to what is still in motion.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from messages.demand import DemandSnapshot
from messages.facts import BudgetEvent, Candidate, Chosen, Decision, Order, Payload, Rejected
from messages.records import (
    DecisionRecord,
    GrantRecord,
    InstanceRecord,
    NodeRecord,
    OrderRecord,
    ProviderRecord,
    RequestRecord,
    ResourceRecord,
)
from policy.budget import Clamp, Headroom, period_start, review, usage
from policy.catalog import Catalog
from policy.consolidation import consolidate, paired
from policy.costs import costs, price
from policy.packing import Unplaced
from policy.planning import plan
from policy.reclaim import reclaim
from policy.settings import PlanSettings
from policy.supply import SupplyView

Placed = list[tuple[str, Order]]


class PlanState(Protocol):
    """What a round reads: the projection's record maps and, per item, the decisions it needs."""

    @property
    def providers(self) -> Mapping[str, ProviderRecord]: ...
    @property
    def resources(self) -> Mapping[str, ResourceRecord]: ...
    @property
    def orders(self) -> Mapping[str, OrderRecord]: ...
    @property
    def requests(self) -> Mapping[str, RequestRecord]: ...
    @property
    def instances(self) -> Mapping[str, InstanceRecord]: ...
    @property
    def grants(self) -> Mapping[str, GrantRecord]: ...
    @property
    def nodes(self) -> Mapping[str, NodeRecord]: ...
    @property
    def decided(self) -> Iterable[DecisionRecord]: ...


def supply_view(state: PlanState) -> SupplyView:
    return SupplyView(orders=state.orders, requests=state.requests, instances=state.instances, grants=state.grants,
                      nodes=state.nodes)


def catalog_for(catalog: Catalog | None, providers: Mapping[str, ProviderRecord]) -> Catalog:
    """The ranked offers, rebuilt only when a description changed."""
    return catalog if catalog is not None and catalog.fits(providers) else Catalog(providers)


@dataclass(frozen=True)
class Proposal:
    #: New supply to order, before the budget's review.
    orders: Placed
    #: Idle supply to give back (never reviewed: returning only lowers spend).
    returns: Placed
    decisions: list[Decision]


def propose(demand: DemandSnapshot | None, state: PlanState, now: float, settings: PlanSettings,
            idle_time: float, catalog: Catalog) -> Proposal:
    """The planner's half: orders for unmet need, returns of idle supply, one decision per item."""
    view = supply_view(state)
    result = plan(demand, state.providers, view, now, settings, catalog)
    returns = reclaim(demand, state.providers, state.resources, view, now, idle_time, settings.providers,
                      state.decided, settings.warm, settings.order_timeout, catalog)
    moved, drains, decided, returns = consolidate(state.providers, view, now, settings, catalog, result.orders,
                                                  returns)
    return Proposal(orders=result.orders + moved, returns=returns + drains, decisions=result.decisions + decided)


def review_orders(orders: Sequence[tuple[str, Order]], state: PlanState, now: float,
                  settings: PlanSettings) -> tuple[Placed, list[Clamp]]:
    """The budget's half: the orders as the global caps allow them, measured against ``state``."""
    spent = 0.0
    if settings.budget.max_spend is not None:
        spent = costs(state.providers, state.instances, state.grants, now, settings.billing_units,
                      since=period_start(now, settings.budget.spend_per)).total
    used = usage(supply_view(state), state.providers, now, settings.order_timeout)
    return review(orders, state.providers, Headroom(settings.budget, used, spent), settings.providers)


def outcome(proposal: Proposal, approved: Placed, clamps: Sequence[tuple[str, str]],
            recorded: Iterable[DecisionRecord]) -> list[tuple[str, Payload]]:
    """What the round writes, as (provider, payload): approved orders, returns, clamps, decisions that are news.

    A decision is news when it orders something or differs from the last one
    recorded for its item, so a steady state does not fill the log.
    """
    decisions = with_cuts(proposal.decisions, proposal.orders, approved)
    out: list[tuple[str, Payload]] = [*approved, *paired(proposal.returns, approved)]
    out += [("", BudgetEvent(limit=limit, detail=detail)) for limit, detail in clamps]
    last = {d.decision.item: d.decision for d in recorded}
    out += [("", d) for d in decisions if d.chosen or _differs(last.get(d.item), d)]
    return out


#: The rejection a cut by the budget review adds to the decisions of the items it cut.
CUT = "budget: cut by the global caps"


def with_cuts(decisions: list[Decision], asked: Placed, approved: Placed) -> list[Decision]:
    """The decisions with what the budget review cut: chosen counts lowered, the cut as a rejection.

    A bundle item's chosen entries are read again from the packed orders the
    review let through (it drops whole hosts), and its note says how many
    bundles are now left without a host.
    """
    def totals(orders: Placed) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for provider, o in orders:
            if not o.loads:
                out[(provider, o.item_id)] = out.get((provider, o.item_id), 0) + o.count
        return out

    got = totals(approved)
    cut = {key for key, n in totals(asked).items() if got.get(key, 0) < n}
    carried = _carried(approved)
    packed_cut = _carried(asked) != carried
    if not cut and not packed_cut:
        return decisions
    out = []
    for d in decisions:
        if packed_cut and any(c.bundles is not None for c in d.chosen):
            out.append(_bundles_cut(d, carried))
            continue
        if not any((c.provider, d.item) in cut for c in d.chosen):
            out.append(d)
            continue
        left = dict(got)
        chosen, rejected = [], list(d.rejected)
        for c in d.chosen:
            n = min(c.count, left.get((c.provider, d.item), 0))
            left[(c.provider, d.item)] = left.get((c.provider, d.item), 0) - n
            if n:
                chosen.append(c.model_copy(update={"count": n}))
            if n < c.count:
                rejected.append(Rejected(provider=c.provider, reason=CUT))
        out.append(d.model_copy(update={"chosen": chosen, "rejected": rejected,
                                        "candidates": _cut_candidates(d.candidates, chosen)}))
    return out


def _cut_candidates(candidates: list[Candidate], chosen: list[Chosen]) -> list[Candidate]:
    """The candidates with the counts the budget review let through; one it cut says so."""
    left = {(c.provider, c.template, c.resource): (c.count, c.bundles) for c in chosen}
    out = []
    for c in candidates:
        if not c.count:
            out.append(c)
            continue
        count, bundles = left.pop((c.provider, c.template, c.resource), (0, None if c.bundles is None else 0))
        if count == c.count and bundles == c.bundles:
            out.append(c)
        else:
            out.append(c.model_copy(update={"count": count, "bundles": bundles, "why": CUT}))
    return out


def _carried(orders: Placed) -> dict[tuple[str, str | None, str], tuple[int, int]]:
    """(provider, template, item) -> (bundles, hosts carrying them) over packed orders."""
    out: dict[tuple[str, str | None, str], tuple[int, int]] = {}
    for provider, o in orders:
        for ld in o.loads or ():
            for item, n in ld.bundles.items():
                b, h = out.get((provider, o.template, item), (0, 0))
                out[(provider, o.template, item)] = (b + n * ld.hosts, h + ld.hosts)
    return out


def _bundles_cut(d: Decision, carried: dict[tuple[str, str | None, str], tuple[int, int]]) -> Decision:
    chosen, rejected = [], list(d.rejected)
    for c in d.chosen:
        bundles, hosts = carried.get((c.provider, c.template, d.item), (0, 0))
        if bundles:
            chosen.append(c.model_copy(update={"count": hosts, "bundles": bundles}))
        if bundles < (c.bundles or 0):
            rejected.append(Rejected(provider=c.provider, reason=CUT))
    if rejected == d.rejected:
        return d
    left = d.need - sum(c.bundles or 0 for c in chosen)
    notes = [n for n in d.note.split("; ") if n and "could not be placed" not in n]
    return d.model_copy(update={"chosen": chosen, "rejected": rejected, "note": "; ".join(
        [f"{left} could not be placed ({CUT})"] + notes), "candidates": _cut_candidates(d.candidates, chosen)})


#: The note of an order or decision a dry run made for a provider no daemon holds (``dry_run(ownerless=True)``).
NO_OWNER = "no_owner"


def no_owner_note(providers: Iterable[str]) -> str:
    names = sorted(set(providers))
    return (f"{NO_OWNER}: no daemon holds {', '.join(names)} now, planned from {'its' if len(names) == 1 else 'their'}"
            " last recorded description")


@dataclass(frozen=True)
class _Owned:
    """A round's state in which every provider has an owner: those with none are given a stand-in."""

    state: PlanState
    providers: Mapping[str, ProviderRecord]

    def __getattr__(self, name: str) -> object:
        return getattr(self.state, name)


@dataclass(frozen=True)
class DryRun:
    """One planning round as it would go, written nowhere: what ``provisioner plan`` shows."""

    #: New supply as the budget review lets it through (returns of idle supply are not planned).
    orders: Placed
    decisions: list[Decision]
    #: Per item, what no candidate could take (or the budget review cut), and why.
    unplaced: list[Unplaced]
    #: What the orders would cost per hour, at their templates' (pools') prices.
    cost_per_hour: float
    clamps: list[Clamp]
    #: Providers no daemon holds that were planned for all the same (``ownerless``): their orders and the
    #: decisions that weighed them say so (``NO_OWNER``).
    unowned: frozenset[str] = field(default_factory=frozenset)


def dry_run(demand: DemandSnapshot | None, state: PlanState, now: float, settings: PlanSettings,
            catalog: Catalog | None = None, *, ownerless: bool = False) -> DryRun:
    """The one entry point for planning a round without acting on it: the daemon's own code, in order.

    ``plan`` (orders and decisions, bundle items packed), then the budget's
    review, then its cuts in the decisions, against ``state`` (an empty one
    plans as if no supply existed). Pure: the caller times it and prints it.

    ``ownerless``: a provider no daemon holds now is planned for as if one did, from its last recorded
    description (``provisioner plan`` with no daemon running answers what a round would order), and its
    orders and every decision that weighed it carry the ``NO_OWNER`` note. Otherwise such a provider takes
    nothing (``no owner``), as in the daemon's own rounds.
    """
    unowned = frozenset(name for name, rec in state.providers.items() if not rec.owner) if ownerless else frozenset()
    if unowned:
        # _Owned reads every other part of the state through to it (``__getattr__``): a PlanState all the same.
        state = cast(PlanState, _Owned(state, {name: dataclasses.replace(rec, owner=NO_OWNER) if name in unowned
                                               else rec for name, rec in state.providers.items()}))
    view = supply_view(state)
    result = plan(demand, state.providers, view, now, settings, catalog_for(catalog, state.providers))
    approved, clamps = review_orders(result.orders, state, now, settings)
    decisions = with_cuts(result.decisions, result.orders, approved)
    before = {u.item: u for u in result.unplaced}
    unplaced = []
    for d in decisions:
        placed = sum(c.count if c.bundles is None else c.bundles for c in d.chosen)
        left = d.need - placed
        if left <= 0:
            continue
        u = before.get(d.item)
        reason = u.reason if u is not None and u.count == left else (
            f"{u.reason}; {CUT}" if u is not None else CUT)
        unplaced.append(Unplaced(item=d.item, count=left, reason=reason))
    cost = sum(o.count * price(state.providers, provider, o.template or o.resource) for provider, o in approved)
    if unowned:
        approved = [(provider, o if provider not in unowned else o.model_copy(update={
            "reason": "; ".join(r for r in (o.reason, no_owner_note([provider])) if r)})) for provider, o in approved]
        decisions = [_noted(d, unowned) for d in decisions]
    return DryRun(orders=approved, decisions=decisions, unplaced=unplaced, cost_per_hour=cost, clamps=clamps,
                  unowned=unowned)


def _noted(d: Decision, unowned: frozenset[str]) -> Decision:
    """``d`` with the ``NO_OWNER`` note when it chose or weighed a provider no daemon holds."""
    weighed = {c.provider for c in d.chosen} | {c.provider for c in d.candidates}
    names = weighed & unowned
    if not names:
        return d
    return d.model_copy(update={"note": "; ".join(n for n in (d.note, no_owner_note(names)) if n)})


def _differs(old: Decision | None, new: Decision) -> bool:
    if old is None:
        return True
    return (old.demand_seq, old.need, old.in_flight, old.rejected, old.note, old.candidates) != (
        new.demand_seq, new.need, new.in_flight, new.rejected, new.note, new.candidates)
