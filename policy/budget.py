"""Global caps: hosts and units held at once, cost per hour, spend per period.

``usage`` measures what is held or on its way; a ``Headroom`` says how much
more each cap allows and is consumed as orders are sized, both by the
planner (so what one provider cannot take under a cap spills to the next)
and by the budget review (the last word before orders are written). A
clamped order is cut to the largest amount the provider's granularity
allows, so a clamp never yields a request the provider refuses.

Spend counts what accrued since the period began (UTC day, Monday-based
week, or calendar month), and a new order commits at least its minimum
charge: the provider's minimum hold or one billed unit, whichever is longer.
Supply already held keeps accruing past the cap; the cap only stops new
orders.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from messages.facts import Order
from messages.records import ProviderRecord
from policy.costs import price
from policy.granularity import size
from policy.limits import UNLIMITED, ProviderLimits
from policy.packing import drop_hosts
from policy.supply import HeldKey, SupplyView, held

#: Tolerance for float sums of prices.
EPS = 1e-9


@dataclass(frozen=True)
class BudgetLimits:
    max_hosts: int | None = None
    max_units: int | None = None
    max_cost_per_hour: float | None = None
    #: Most money spent per ``spend_per`` (``day``, ``week`` or ``month``).
    max_spend: float | None = None
    spend_per: str = "month"

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.max_hosts, self.max_units, self.max_cost_per_hour, self.max_spend))


def period_start(now: float, per: str) -> float:
    """Start (UTC) of the day, week (from Monday) or month that holds ``now``."""
    t = datetime.fromtimestamp(now, tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if per == "week":
        t -= timedelta(days=t.weekday())
    elif per == "month":
        t = t.replace(day=1)
    elif per != "day":
        raise ValueError(f"spend period must be day, week or month, not {per!r}")
    return t.timestamp()


@dataclass(frozen=True)
class ProviderUsage:
    #: Hosts (hosts provider) or units (units provider) held or on their way.
    count: int = 0
    cost_per_hour: float = 0.0


@dataclass(frozen=True)
class Usage:
    hosts: int = 0
    units: int = 0
    cost_per_hour: float = 0.0
    by_provider: Mapping[str, ProviderUsage] = field(default_factory=dict)

    @classmethod
    def of(cls, amounts: Mapping[HeldKey, int], providers: Mapping[str, ProviderRecord]) -> Usage:
        hosts = units = 0
        rate = 0.0
        count: dict[str, int] = {}
        cost: dict[str, float] = {}
        for (provider, supply, key), n in amounts.items():
            r = n * price(providers, provider, key or None)
            if supply == "hosts":
                hosts += n
            else:
                units += n
            rate += r
            count[provider] = count.get(provider, 0) + n
            cost[provider] = cost.get(provider, 0.0) + r
        by_provider = {p: ProviderUsage(count=count[p], cost_per_hour=cost[p]) for p in sorted(count)}
        return cls(hosts=hosts, units=units, cost_per_hour=rate, by_provider=by_provider)


def usage(view: SupplyView, providers: Mapping[str, ProviderRecord], now: float,
          order_timeout: float = math.inf) -> Usage:
    """Hosts and units held or on their way, and the cost per hour they run at, overall and per provider.

    ``view`` bundles the projection's orders, requests, instances and grants;
    ``providers`` its provider records (for prices). Orders older than
    ``order_timeout`` that no owner took up are not counted.
    """
    return Usage.of(held(view, now, order_timeout), providers)


class Headroom:
    """How much more the global caps allow; consumed as orders are sized within one round."""

    def __init__(self, limits: BudgetLimits, used: Usage, spent: float = 0.0) -> None:
        self.limits = limits
        self.hosts = used.hosts
        self.units = used.units
        self.rate = used.cost_per_hour
        self.spent = spent

    def room(self, supply: str, price_per_hour: float, charge_hours: float) -> tuple[int | None, str]:
        """Most new hosts or units the caps allow (None: no cap applies), and the binding cap's name."""
        lim = self.limits
        best: tuple[int | None, str] = (None, "")

        def cap(n: int, name: str) -> None:
            nonlocal best
            if best[0] is None or n < best[0]:
                best = (max(0, n), name)

        if supply == "hosts" and lim.max_hosts is not None:
            cap(lim.max_hosts - self.hosts, "max_hosts")
        if supply == "units" and lim.max_units is not None:
            cap(lim.max_units - self.units, "max_units")
        if price_per_hour > 0 and lim.max_cost_per_hour is not None:
            cap(math.floor((lim.max_cost_per_hour - self.rate) / price_per_hour + EPS), "max_cost_per_hour")
        if price_per_hour > 0 and lim.max_spend is not None:
            left = lim.max_spend - self.spent
            charge = price_per_hour * charge_hours
            if left <= EPS:
                cap(0, "max_spend")
            elif charge > 0:
                cap(math.floor(left / charge + EPS), "max_spend")
        return best

    def take(self, supply: str, count: int, price_per_hour: float, charge_hours: float) -> None:
        if supply == "hosts":
            self.hosts += count
        else:
            self.units += count
        self.rate += count * price_per_hour
        self.spent += count * price_per_hour * charge_hours


@dataclass(frozen=True)
class Clamp:
    provider: str
    item_id: str
    #: The cap that bound: max_hosts, max_units, max_cost_per_hour or max_spend.
    limit: str
    asked: int
    got: int
    #: A packed order's bundles (per item) whose hosts the clamp dropped.
    dropped: Mapping[str, int] = field(default_factory=dict)

    @property
    def detail(self) -> str:
        if self.dropped:
            lost = ", ".join(f"{n} of {item}" for item, n in sorted(self.dropped.items()))
            return (f"{self.provider}: packed order clamped from {self.asked} to {self.got} hosts; "
                    f"bundles unplaced: {lost}")
        return f"{self.provider}: order for {self.item_id} clamped from {self.asked} to {self.got}"


def review(
    orders: Sequence[tuple[str, Order]],
    providers: Mapping[str, ProviderRecord],
    headroom: Headroom,
    limits: Mapping[str, ProviderLimits] | None = None,
) -> tuple[list[tuple[str, Order]], list[Clamp]]:
    """The orders as the global caps allow them, in order, and every clamp made.

    Orders the caps cut to nothing are dropped; returns pass untouched. A
    packed order (bundle items) loses whole hosts, least loaded first, and
    the clamp names the bundles they carried.
    """
    approved: list[tuple[str, Order]] = []
    clamps: list[Clamp] = []
    for provider, order in orders:
        if order.action != "request":
            approved.append((provider, order))
            continue
        rec = providers.get(provider)
        desc = rec.description if rec is not None else None
        p = price(providers, provider, order.template or order.resource)
        charge = (limits or {}).get(provider, UNLIMITED).charge_hours(desc.min_hold_s if desc else 0.0)
        room, limit = headroom.room(order.supply, p, charge)
        count = order.count
        if room is not None and room < count:
            count = size(count, room, desc.min_request, desc.step) if desc else room
            asked = order.count
            dropped: dict[str, int] = {}
            if order.loads:
                order, dropped = drop_hosts(order, count)
            clamps.append(Clamp(provider=provider, item_id=order.item_id, limit=limit, asked=asked, got=count,
                                dropped=dropped))
        if count > 0:
            approved.append((provider, order if count == order.count else order.model_copy(
                update={"count": count, "names": order.names[:count]})))
            headroom.take(order.supply, count, p, charge)
    return approved, clamps
