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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from messages.demand import DemandSnapshot
from messages.facts import BudgetEvent, Decision, Order, Payload, Rejected
from messages.records import (
    DecisionRecord,
    GrantRecord,
    InstanceRecord,
    OrderRecord,
    ProviderRecord,
    RequestRecord,
    ResourceRecord,
)
from policy.budget import Clamp, Headroom, period_start, review, usage
from policy.catalog import Catalog
from policy.costs import costs
from policy.planning import plan
from policy.reclaim import reclaim
from policy.settings import PlanSettings
from policy.supply import SupplyView

Placed = list[tuple[str, Order]]


class PlanState(Protocol):
    """What a round reads: the projection's record maps and its recent decisions."""

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
    def decisions(self) -> Iterable[DecisionRecord]: ...


def supply_view(state: PlanState) -> SupplyView:
    return SupplyView(orders=state.orders, requests=state.requests, instances=state.instances, grants=state.grants)


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
                      state.decisions)
    return Proposal(orders=result.orders, returns=returns, decisions=result.decisions)


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
    out: list[tuple[str, Payload]] = list(approved) + list(proposal.returns)
    out += [("", BudgetEvent(limit=limit, detail=detail)) for limit, detail in clamps]
    last = {d.decision.item: d.decision for d in recorded}
    out += [("", d) for d in decisions if d.chosen or _differs(last.get(d.item), d)]
    return out


def with_cuts(decisions: list[Decision], asked: Placed, approved: Placed) -> list[Decision]:
    """The decisions with what the budget review cut: chosen counts lowered, the cut as a rejection."""
    def totals(orders: Placed) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for provider, o in orders:
            out[(provider, o.item_id)] = out.get((provider, o.item_id), 0) + o.count
        return out

    got = totals(approved)
    cut = {key for key, n in totals(asked).items() if got.get(key, 0) < n}
    if not cut:
        return decisions
    out = []
    for d in decisions:
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
                rejected.append(Rejected(provider=c.provider, reason="budget: cut by the global caps"))
        out.append(d.model_copy(update={"chosen": chosen, "rejected": rejected}))
    return out


def _differs(old: Decision | None, new: Decision) -> bool:
    if old is None:
        return True
    return (old.demand_seq, old.need, old.in_flight, old.rejected, old.note) != (
        new.demand_seq, new.need, new.in_flight, new.rejected, new.note)
