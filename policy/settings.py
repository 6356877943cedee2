"""The planner's knobs, as plain data: the daemon builds them from the config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policy.budget import BudgetLimits
from policy.limits import UNLIMITED, ProviderLimits


@dataclass(frozen=True)
class PlanSettings:
    #: First cooldown after a failure; doubles with every failure in a row, up to ``backoff_max``.
    cooldown: float = 120.0
    backoff_max: float = 1800.0
    join_grace: float = 60.0
    #: An order no owner has taken up within this long stops counting as in flight
    #: (``request_timeout``: owners refuse older orders).
    order_timeout: float = 900.0
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    providers: Mapping[str, ProviderLimits] = field(default_factory=dict)

    def limits(self, provider: str) -> ProviderLimits:
        return self.providers.get(provider, UNLIMITED)

    @property
    def billing_units(self) -> dict[str, float]:
        return {name: lim.billing_unit for name, lim in self.providers.items() if lim.billing_unit > 0}
