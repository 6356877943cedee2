"""How much each offer may still take in one planning round, and why not more.

An offer's room is the tightest of: its template's ``max_number`` and the
provider's ``capacity`` less what is held or on its way there; the
provider's own cost-per-hour cap and rate limit; the quotas it described
(``quota``: vCPUs left, for the provider or the template, as of its last
``describe``, less the vCPUs of hosts asked for since or not running yet,
plus those of hosts ended since); and the global caps. Each
amount ordered is taken from every one of them at once, so later offers in
the same round see what earlier ones used.

Before room comes usability: a provider that is not active (paused,
drained, disabled), has no owner, or is cooling down (whole, or the one
template) takes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime

from messages.records import ProviderRecord
from policy.budget import EPS, Headroom, Usage, period_start
from policy.catalog import Catalog, Offer, QuotaScopes, Scope, quota_scopes
from policy.cooldown import Cooldown, cleared, cooldowns
from policy.costs import costs
from policy.ratelimit import ordered_recently
from policy.settings import PlanSettings
from policy.supply import SupplyView, held, since_described


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%H:%M:%S UTC")


def cooling_reason(c: Cooldown) -> str:
    """E.g. ``cooling down until 12:04:10 UTC after capacity error on t3.large (2 in a row)``."""
    what = f" on {c.key}" if c.key else ""
    row = f" ({c.strikes} in a row)" if c.strikes > 1 else ""
    return f"cooling down until {_clock(c.until)} after {c.cause}{what}{row}"


class Rooms:
    def __init__(self, providers: Mapping[str, ProviderRecord], view: SupplyView, now: float,
                 settings: PlanSettings, catalog: Catalog | None = None) -> None:
        """``catalog``: one built from these providers' descriptions (``policy.rounds.catalog_for``), whose
        quota scopes serve instead of reading every template again (they depend on the descriptions only)."""
        self.providers = providers
        self.settings = settings
        self.held = held(view, now, settings.order_timeout)
        used = Usage.of(self.held, providers)
        self.count = {p: u.count for p, u in used.by_provider.items()}
        self.rate = {p: u.cost_per_hour for p, u in used.by_provider.items()}
        windows = {p: lim.rate_per for p, lim in settings.providers.items() if lim.rate_count is not None}
        self.recent = ordered_recently(view.orders.values(), now, windows) if windows else {}
        self.cooling = cooldowns(view.requests.values(), now, settings.cooldown, settings.backoff_max,
                                 cleared(providers))
        self.budget: Headroom | None = None
        b = settings.budget
        if b.any:
            spent = 0.0
            if b.max_spend is not None:
                spent = costs(providers, view.instances, view.grants, now, settings.billing_units,
                              since=period_start(now, b.spend_per)).total
            self.budget = Headroom(b, used, spent)
        #: vCPUs left per quota, (provider, template id) or (provider, "") for the provider's: as described, less
        #: hosts its describe did not count, less what this round took; and the quotas over each (provider,
        #: template). Empty when no provider has a quota.
        scopes = catalog.quota_scopes() if catalog is not None else quota_scopes(_described(providers))
        self.quota, self.under = _quotas(scopes, providers, view, now, settings.order_timeout)
        self._blocked: dict[str, str | None] = {}
        #: Offers found with no room this round, and why: room only shrinks within a round,
        #: so later items skip the arithmetic (thousands of items walk the same full offers).
        self._full: dict[tuple[str, str], str] = {}

    def blocked(self, offer: Offer) -> str | None:
        """Why this offer takes nothing at all this round, or None."""
        why = self._blocked.get(offer.provider, "")
        if why == "":
            why = self._blocked[offer.provider] = self._provider_blocked(offer.provider)
        if why is None and self.cooling:
            c = self.cooling.get((offer.provider, offer.key))
            if c is not None:
                return cooling_reason(c)
        return why

    def _provider_blocked(self, provider: str) -> str | None:
        rec = self.providers.get(provider)
        if rec is None:
            return "unknown provider"
        if rec.status != "active":
            return rec.status + (f": {rec.status_reason}" if rec.status_reason else "")
        if rec.degraded:
            return f"degraded: {rec.degraded}"
        if not rec.owner:
            return "no owner: no daemon holds its lease"
        c = self.cooling.get((provider, ""))
        return cooling_reason(c) if c is not None else None

    def room(self, offer: Offer, supply: str) -> tuple[int, str]:
        """Most this offer may take now, and what limits it (the reason if that is too little)."""
        p = offer.provider
        full = self._full.get((p, offer.key))
        if full is not None:
            return 0, full
        room = offer.max_number - self.held.get((p, supply, offer.key), 0)
        why = f"capacity: room for {max(0, room)}"
        if offer.capacity is not None:
            left = offer.capacity - self.count.get(p, 0)
            if left < room:
                room, why = left, f"capacity: room for {max(0, left)}"
        lim = self.settings.limits(p)
        if lim.max_cost_per_hour is not None and offer.price > 0:
            left = math.floor((lim.max_cost_per_hour - self.rate.get(p, 0.0)) / offer.price + EPS)
            if left < room:
                room, why = left, f"budget: provider max_cost_per_hour {lim.max_cost_per_hour:g}"
        if lim.rate_count is not None:
            left = lim.rate_count - self.recent.get(p, 0)
            if left < room:
                room, why = left, f"rate: at most {lim.rate_count} per {lim.rate_per:g}s"
        if self.budget is not None:
            left_, cap = self.budget.room(supply, offer.price, lim.charge_hours(offer.min_hold))
            if left_ is not None and left_ < room:
                room, why = left_, f"budget: {cap}"
        if self.quota and offer.vcpus is not None and supply == "hosts":
            for scope in self.under.get((p, offer.key), ()):
                vcpus = self.quota[scope]
                if vcpus // offer.vcpus < room:
                    room, why = vcpus // offer.vcpus, _quota_reason(vcpus, offer, scope[1])
        if room <= 0:
            self._full[(p, offer.key)] = why
        return max(0, room), why

    def take(self, offer: Offer, supply: str, amount: int) -> None:
        p = offer.provider
        key = (p, supply, offer.key)
        self.held[key] = self.held.get(key, 0) + amount
        self.count[p] = self.count.get(p, 0) + amount
        self.rate[p] = self.rate.get(p, 0.0) + amount * offer.price
        self.recent[p] = self.recent.get(p, 0) + amount
        if self.budget is not None:
            self.budget.take(supply, amount, offer.price, self.settings.limits(p).charge_hours(offer.min_hold))
        if self.quota and offer.vcpus is not None and supply == "hosts":
            for scope in self.under.get((p, offer.key), ()):
                self.quota[scope] -= amount * offer.vcpus

    def give(self, offer: Offer, supply: str, amount: int) -> None:
        """Undo a ``take``: the packer moved hosts to another template or dropped them."""
        self.take(offer, supply, -amount)
        self._full.pop((offer.provider, offer.key), None)


def _quota_reason(vcpus: int, offer: Offer, template: str) -> str:
    """E.g. ``quota: 12 vCPUs left``, with the host's size when not even one fits."""
    whose = f" for {template}" if template else ""
    small = f" (a {offer.key} host takes {offer.vcpus})" if 0 < vcpus < (offer.vcpus or 0) else ""
    return f"quota: {max(0, vcpus)} vCPUs left{whose}{small}"


def _described(providers: Mapping[str, ProviderRecord]) -> dict:
    return {name: rec.description for name, rec in providers.items() if rec.description is not None}


def _quotas(scopes: QuotaScopes, providers: Mapping[str, ProviderRecord], view: SupplyView, now: float,
            order_timeout: float) -> tuple[dict[Scope, int], dict[Scope, tuple[Scope, ...]]]:
    """vCPUs left per quota described (docs/policy.md#quota): what each provider said at its last
    ``describe`` (``scopes``: the quotas its description sets), less the vCPUs of its hosts that describe
    did not count, plus those of its hosts that describe counted and that have ended since; and per
    (provider, template), the quotas over it."""
    if not scopes.left:
        return {}, scopes.under
    left = dict(scopes.left)
    under, sizes = scopes.under, scopes.sizes
    described = {name: providers[name].described_at for name in scopes.providers}
    for (provider, _, template), n in since_described(view, now, order_timeout, described).items():
        vcpus = sizes.get((provider, template))
        if vcpus is None:  # a template under no quota, or not described any more (its hosts' size unknown)
            continue
        for scope in under[(provider, template)]:
            left[scope] -= n * vcpus
    return left, under
