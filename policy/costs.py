"""Costs so far: what held hosts and borrowed units have cost, from their times and prices.

A host is paid for from its launch (else from when it was first seen) until
it was returned or lost (else until now); a grant's units from when it was
granted until they were returned, each part given back by a partial return
until then and the rest until the grant ends (so each period is paid at the
count held in it). Providers billing per second are charged for the
exact span; a provider with a billing unit (``billing_unit``, e.g. 3600 s)
is charged for every unit started, in full, from the moment it starts.

``since`` restricts the sum to what accrued from that time on (the budget's
spend per period).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from messages.records import GrantRecord, InstanceRecord, ProviderRecord
from messages.states import INSTANCE

#: Grant states in which borrowed units are held (and paid for).
HOLDING = frozenset({"granted", "return_planned", "returning"})


def accrued(start: float, end: float, price_per_hour: float, billing_unit: float = 0.0,
            since: float | None = None) -> float:
    """Cost of holding one host or unit from ``start`` to ``end`` at ``price_per_hour``."""
    span = max(0.0, end - start)
    if billing_unit > 0:
        span = math.ceil(span / billing_unit - 1e-9) * billing_unit
    stop = start + span
    begin = start if since is None else max(start, since)
    return max(0.0, stop - begin) / 3600.0 * price_per_hour


def instance_cost(inst: InstanceRecord, price_per_hour: float, now: float, billing_unit: float = 0.0,
                  since: float | None = None) -> float:
    start = inst.launched_at if inst.launched_at is not None else inst.seen_at
    end = inst.ended_at if inst.ended_at is not None else now
    return accrued(start, end, price_per_hour, billing_unit, since)


def grant_cost(grant: GrantRecord, price_per_hour: float, now: float, billing_unit: float = 0.0,
               since: float | None = None) -> float:
    if grant.granted_at is None:
        return 0.0
    end = grant.ended_at if grant.ended_at is not None else now
    parts = [*grant.given_back, (end, grant.count)]
    return sum(n * accrued(grant.granted_at, at, price_per_hour, billing_unit, since) for at, n in parts)


class ProviderCost(NamedTuple):
    provider: str
    cost_so_far: float
    #: What everything held from it right now costs per hour.
    cost_per_hour_now: float


@dataclass(frozen=True)
class Costs:
    """Per provider: cost so far, and cost per hour of what is held now."""

    so_far: dict[str, float] = field(default_factory=dict)
    rate: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.so_far.values())

    @property
    def cost_per_hour_now(self) -> float:
        return sum(self.rate.values())

    @cached_property
    def by_provider(self) -> dict[str, ProviderCost]:
        """Built when asked: the budget, asking every planning round, wants only the total."""
        return {name: ProviderCost(name, self.so_far[name], self.rate.get(name, 0.0)) for name in sorted(self.so_far)}


def price(providers: Mapping[str, ProviderRecord], provider: str, key: str | None) -> float:
    """Price of one host-hour of a template or one unit-hour of a resource; 0 when undescribed."""
    rec = providers.get(provider)
    return rec.description.price(key) if rec is not None and rec.description is not None else 0.0


def costs(
    providers: Mapping[str, ProviderRecord],
    instances: Mapping[str, InstanceRecord],
    grants: Mapping[str, GrantRecord],
    now: float,
    billing_units: Mapping[str, float] | None = None,
    since: float | None = None,
) -> Costs:
    """Costs so far per provider and in total, and the cost per hour of what is held now.

    ``providers``, ``instances`` and ``grants`` are the projection's record maps;
    ``billing_units`` gives a provider's billing unit in seconds (absent: per second).
    Every provider in ``providers`` is listed, at 0 if it never held anything.
    """
    units = billing_units or {}
    so_far: dict[str, float] = {name: 0.0 for name in providers}
    rate: dict[str, float] = {name: 0.0 for name in providers}
    prices: dict[tuple[str, str | None], float] = {}  # many records, few templates
    for inst in instances.values():
        p = prices.get((inst.provider, inst.template))
        if p is None:
            p = prices[(inst.provider, inst.template)] = price(providers, inst.provider, inst.template)
        so_far[inst.provider] = so_far.get(inst.provider, 0.0) + instance_cost(
            inst, p, now, units.get(inst.provider, 0.0), since)
        if inst.state not in INSTANCE.terminal:
            rate[inst.provider] = rate.get(inst.provider, 0.0) + p
    for grant in grants.values():
        p = price(providers, grant.provider, grant.resource)
        so_far[grant.provider] = so_far.get(grant.provider, 0.0) + grant_cost(
            grant, p, now, units.get(grant.provider, 0.0), since)
        if grant.state in HOLDING:
            rate[grant.provider] = rate.get(grant.provider, 0.0) + grant.count * p
    return Costs(so_far, rate)


def host_costs_by(
    providers: Mapping[str, ProviderRecord],
    instances: Mapping[str, InstanceRecord],
    now: float,
    group: Callable[[str, str | None], str],
    billing_units: Mapping[str, float] | None = None,
) -> dict[tuple[str, str], tuple[float, float]]:
    """Hosts' cost so far and cost per hour now, per provider and per ``group(provider, template)``
    (the metrics' capacity type), as ``costs`` counts them: per provider, the groups add up to its hosts' part."""
    units = billing_units or {}
    out: dict[tuple[str, str], tuple[float, float]] = {}
    seen: dict[tuple[str, str | None], tuple[tuple[str, str], float]] = {}  # many records, few templates
    for inst in instances.values():
        found = seen.get((inst.provider, inst.template))
        if found is None:
            found = seen[(inst.provider, inst.template)] = (
                (inst.provider, group(inst.provider, inst.template)), price(providers, inst.provider, inst.template))
        key, p = found
        so_far, rate = out.get(key, (0.0, 0.0))
        out[key] = (so_far + instance_cost(inst, p, now, units.get(inst.provider, 0.0)),
                    rate + (p if inst.state not in INSTANCE.terminal else 0.0))
    return out
