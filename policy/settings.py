"""The planner's knobs, as plain data, and how they are made from an operator's config.

The config models say what an operator wants; this is the one place that turns
them into what the pure functions read, so the config knows nothing of policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from config.models import BudgetConfig, PolicyConfig, ProviderConfig, ProviderPolicy
from config.schedule import zone
from policy.budget import BudgetLimits
from policy.consolidation import ConsolidationPolicy
from policy.limits import UNLIMITED, ProviderLimits
from policy.warm import WarmPolicy, WarmRule


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
    #: Warm capacity: its rules and the time zone their schedules are read in.
    warm: WarmPolicy = field(default_factory=WarmPolicy)
    #: Consolidation: busy hosts moved to cheaper templates, within a disruption budget.
    consolidation: ConsolidationPolicy = field(default_factory=ConsolidationPolicy)

    def limits(self, provider: str) -> ProviderLimits:
        return self.providers.get(provider, UNLIMITED)

    @property
    def billing_units(self) -> dict[str, float]:
        return {name: lim.billing_unit for name, lim in self.providers.items() if lim.billing_unit > 0}


def budget_limits(budget: BudgetConfig) -> BudgetLimits:
    """The global caps of a config's ``budget:`` section."""
    return BudgetLimits(
        max_hosts=budget.max_hosts, max_units=budget.max_units, max_cost_per_hour=budget.max_cost_per_hour,
        max_spend=budget.max_spend.amount if budget.max_spend else None,
        spend_per=budget.max_spend.per if budget.max_spend else "month",
    )


def provider_limits(policy: ProviderPolicy) -> ProviderLimits:
    """One provider's ``policy:`` section."""
    return ProviderLimits(
        max_cost_per_hour=policy.max_cost_per_hour,
        rate_count=policy.rate.count if policy.rate else None,
        rate_per=policy.rate.per if policy.rate else 60.0,
        billing_unit=policy.billing_unit,
        return_window=policy.return_window,
        max_lifetime=policy.max_lifetime,
    )


def warm_policy(policy: PolicyConfig, providers: Sequence[ProviderConfig] = ()) -> WarmPolicy:
    """Warm capacity's rules: the policy section's (every hosts provider together), then each provider's."""
    rules = []
    if policy.min_idle or policy.min_hosts:
        rules.append(WarmRule(provider=None, template=None, min_idle=policy.min_idle, min_hosts=policy.min_hosts,
                              schedule=policy.warm_schedule))
    for p in providers:
        if p.kind == "hosts":
            rules += [WarmRule(provider=p.name, template=r.template, min_idle=r.min_idle, min_hosts=r.min_hosts,
                               schedule=r.schedule) for r in p.policy.warm if r.min_idle or r.min_hosts]
    return WarmPolicy(rules=tuple(rules), tz=zone(policy.timezone))


def plan_settings(policy: PolicyConfig, budget: BudgetConfig | None = None,
                  providers: Sequence[ProviderConfig] = ()) -> PlanSettings:
    """The planner's settings: the policy section's keys, the global caps, each provider's own limits and
    warm capacity."""
    return PlanSettings(
        cooldown=policy.cooldown, backoff_max=policy.backoff_max, join_grace=policy.join_grace,
        order_timeout=policy.request_timeout, budget=budget_limits(budget) if budget else BudgetLimits(),
        providers={p.name: provider_limits(p.policy) for p in providers},
        warm=warm_policy(policy, providers),
        consolidation=consolidation_policy(policy),
    )


def consolidation_policy(policy: PolicyConfig) -> ConsolidationPolicy:
    """``policy.consolidation``, its window read in ``policy.timezone``."""
    c = policy.consolidation
    return ConsolidationPolicy(enabled=c.enabled, max_hosts=c.max_hosts, max_percent=c.max_percent,
                               never_during=c.never_during, min_saving=c.min_saving, tz=zone(policy.timezone))
