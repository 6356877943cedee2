"""Every provider's offers for a wish, ranked once while descriptions stay the same.

Candidates rank by their provider's priority (higher first; the config's
``describe.priority`` wins over what the provider reports, as merged into its
description), then by the template's own priority (an LSF template's, which
only refines its provider's: a script reporting ``priority: 0`` on every
template must not undo the site's override), then price per unit of demand
(host-hour or unit-hour), then lead time, then provider name and template,
so the same inputs always give the same order. A bundle item's offers are the host templates its
selectors match, ranked the same way; an offer carries its template's
attributes so the packer can tell how many bundles a host holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

from messages.demand import BundleItem, HostItem, UnitItem
from messages.description import AttrValue, ProviderDescription, Template
from messages.records import ProviderRecord
from policy.explain import why_not
from policy.matching import Selector, Serving, shape


@dataclass(frozen=True)
class Offer:
    """One template (or pool) of one provider that can serve an item."""

    provider: str
    key: str  # template id or resource name
    #: The provider's priority: what the config says (``describe.priority``), else what the provider says.
    priority: int
    price: float
    lead_time: float
    max_number: int
    #: The provider's overall cap, shared by all its templates.
    capacity: int | None
    min_request: int
    step: int
    min_hold: float
    #: The template's attributes (empty for a pool): what a bundle item's packing measures hosts by.
    attributes: Mapping[str, AttrValue] = field(default_factory=dict, hash=False, compare=False)
    #: The template's own priority, when it has one: it orders offers within their provider's priority.
    within: int | None = None
    #: vCPUs one host takes of a quota (the template's ``vcpus``); None for a pool or a template without.
    vcpus: int | None = None

    @property
    def tier(self) -> tuple[int, int]:
        """Offers of one tier are alike in priority: the provider's first, then the template's."""
        return (self.priority, self.priority if self.within is None else self.within)

    @property
    def rank(self) -> tuple:
        tier = self.tier
        return (-tier[0], -tier[1], self.price, self.lead_time, self.provider, self.key)


Item = HostItem | UnitItem | BundleItem


def wants(item: Item) -> tuple:
    """What an item asks for, without its id and count: items alike share one ranking.

    A bundle item with the same selectors as a host item shares its ranking:
    both ask for the host templates those selectors match.
    """
    if isinstance(item, HostItem):
        return ("hosts", item.template, tuple(sorted(item.select.items())))
    if isinstance(item, BundleItem):
        return ("hosts", None, tuple(sorted(item.select.items())))
    return ("units", item.resource)


class Ranked(NamedTuple):
    offers: list[Offer]
    #: The providers of the wish's kind none of whose offers match, by name.
    mismatched: list[str]
    #: For each offer, the index of the next offer of another provider: a provider's offers mostly sit
    #: together in rank order, and a planner that weighs a provider once skips the rest of them.
    runs: list[int]


def _runs(offers: list[Offer]) -> list[int]:
    out = [len(offers)] * len(offers)
    for k in range(len(offers) - 2, -1, -1):
        out[k] = k + 1 if offers[k + 1].provider != offers[k].provider else out[k + 1]
    return out


_DESCRIPTION = attrgetter("description")

#: A quota's scope: (provider, template id), or (provider, "") for the provider's own quota.
Scope = tuple[str, str]


class QuotaScopes(NamedTuple):
    """What the descriptions say of quotas (docs/policy.md#quota), before any host is counted against them."""

    #: vCPUs each quota allows, as described.
    left: dict[Scope, int]
    #: Per (provider, template id): the quotas over it.
    under: dict[Scope, tuple[Scope, ...]]
    #: Per (provider, template id) under a quota: the vCPUs one host takes.
    sizes: dict[Scope, int]
    #: The providers with a template under a quota (whose hosts count against it).
    providers: tuple[str, ...]


def quota_scopes(descriptions: Mapping[str, ProviderDescription]) -> QuotaScopes:
    """The quotas the descriptions set, and which templates each holds for (``policy.sizing``)."""
    left: dict[Scope, int] = {}
    under: dict[Scope, tuple[Scope, ...]] = {}
    sizes: dict[Scope, int] = {}
    named: dict[str, None] = {}
    for name, d in descriptions.items():
        if d.kind != "hosts":
            continue
        if d.quota is not None:
            left[(name, "")] = d.quota.vcpus
        for t in d.templates:
            scopes: tuple[Scope, ...] = ((name, t.id),) if t.quota is not None else ()
            if d.under_quota(t):
                scopes += ((name, ""),)
            if t.quota is not None:
                left[(name, t.id)] = t.quota.vcpus
            if scopes and t.vcpus is not None:
                under[(name, t.id)] = scopes
                sizes[(name, t.id)] = t.vcpus
                named[name] = None
    return QuotaScopes(left, under, sizes, tuple(named))


class Catalog:
    """Every provider's offers, ranked once per kind of wish.

    Descriptions change rarely while demand changes often, so what the
    descriptions alone decide is kept until they change: the ranked offers
    for each distinct wish (template, selectors or resource), the quotas'
    scopes, and which templates serve each item shape (reclaim's question);
    which providers are usable right now (status, owner, cooldown, room) is
    checked at planning time. A catalog also keeps each item's last
    decision: one that comes out the same from the next round's weighing is
    not made again (nothing else is kept, so it cannot disagree with the
    inputs). A catalog holds for the descriptions it was built from: the
    planner rebuilds it when one changes (``policy.rounds.catalog_for``).
    """

    def __init__(self, providers: Mapping[str, ProviderRecord]) -> None:
        self.descriptions = {name: rec.description for name, rec in providers.items() if rec.description}
        #: The providers in their map's order and each one's description (None included), as built from.
        self._names = list(providers)
        self._seen = list(map(_DESCRIPTION, providers.values()))
        self._ranked: dict[tuple, Ranked] = {}
        self._why: dict[tuple, str] = {}
        #: Every host template's offer in rank order, with its template and zone (made on the first wish).
        self._templates: list[tuple[Offer, Template, str | None]] | None = None
        #: The last round's decision per item (``policy.planning``), with what it was made from: a round
        #: that weighs an item as the last one did gives the same decision again instead of making it anew.
        self.decided: dict[str, Any] = {}
        self._quotas: QuotaScopes | None = None
        #: Per item shape, which templates can do its work (``serving``).
        self._serving: dict[tuple, Serving] = {}
        #: The decisions' parts made so far (``policy.planning``'s chosen entries, rejections and candidates),
        #: shared by the rounds: they are frozen, and most rounds give the same ones again.
        self.made: Any = None

    def fits(self, providers: Mapping[str, ProviderRecord]) -> bool:
        """True while the providers' descriptions are the ones this catalog was built from.

        Checked before every round, so it must be cheap with a thousand providers: the same names
        in the same order, each with the same description (two list comparisons, which test each
        pair for identity before equality: a description not described again is the same object).
        """
        return list(providers) == self._names and list(map(_DESCRIPTION, providers.values())) == self._seen

    def quota_scopes(self) -> QuotaScopes:
        """The quotas the descriptions set (``quota_scopes``): made once, as they depend on nothing else."""
        if self._quotas is None:
            self._quotas = quota_scopes(self.descriptions)
        return self._quotas

    def serving(self, item: HostItem | BundleItem) -> Serving:
        """Whether a host of a (provider, template id) can do ``item``'s work, as ``policy.matching.Serves``
        says, kept per item shape: it reads nothing but the shape and the descriptions."""
        key = shape(item)
        found = self._serving.get(key)
        if found is None:
            found = self._serving[key] = Serving(item, self.descriptions)
        return found

    def offers(self, item: Item) -> tuple[list[Offer], list[str]]:
        """Matching offers in rank order, and the providers of the item's kind that do not match."""
        found = self.ranked(item)
        return found.offers, found.mismatched

    def ranked(self, item: Item) -> Ranked:
        """The item's offers in rank order, with the providers that do not match and where each provider's
        run of offers ends."""
        key = wants(item)
        found = self._ranked.get(key)
        if found is None:
            offers, mismatched = self._rank(item)
            found = self._ranked[key] = Ranked(offers, mismatched, _runs(offers))
        return found

    def offer(self, provider: str, template: str) -> Offer | None:
        """The offer of one provider's template (a named node's), or None when it describes no such template."""
        if self._templates is None:
            self._templates = self._all_templates()
        return next((o for o, _, _ in self._templates if o.provider == provider and o.key == template), None)

    def scoped(self, provider: str | None, template: str | None) -> Ranked:
        """Every host template's offer in rank order, of one provider (None: all) and one template id
        (None: any): what warm capacity orders from (``policy.warm``)."""
        key = ("scope", provider, template)
        found = self._ranked.get(key)
        if found is None:
            if self._templates is None:
                self._templates = self._all_templates()
            offers = [o for o, _, _ in self._templates
                      if (provider is None or o.provider == provider) and (template is None or o.key == template)]
            found = self._ranked[key] = Ranked(offers, [], _runs(offers))
        return found

    def why_not(self, item: Item, provider: str) -> str:
        """Why ``provider`` cannot serve ``item``, in words (``policy.explain``); "" when it can."""
        key = (wants(item), tuple(sorted(item.resources.items())) if isinstance(item, BundleItem) else (), provider)
        said = self._why.get(key)
        if said is None:
            desc = self.descriptions.get(provider)
            said = self._why[key] = why_not(item, desc) if desc is not None else "not described yet"
        return said

    def _rank(self, item: Item) -> tuple[list[Offer], list[str]]:
        if isinstance(item, UnitItem):
            return self._rank_pools(item)
        # Every template's offer is made and ranked once; a wish's offers are those its selector matches,
        # in the same order (the rank does not depend on the wish).
        if self._templates is None:
            self._templates = self._all_templates()
        selector = Selector(item)
        matches = selector.matches
        offers = [offer for offer, template, zone in self._templates if matches(template, zone)]
        took = {offer.provider for offer in offers}
        return offers, [name for name in sorted(self.descriptions)
                        if self.descriptions[name].kind == "hosts" and name not in took]

    def _all_templates(self) -> list[tuple[Offer, Template, str | None]]:
        """Every host template's offer in rank order, with the template and its provider's zone."""
        out = [(_offer(name, desc, t.id, t.max_number, t.priority,
                       desc.cost_per_hour if t.cost_per_hour is None else t.cost_per_hour, t.attributes, t.vcpus),
                t, desc.zone)
               for name, desc in sorted(self.descriptions.items()) if desc.kind == "hosts"
               for t in desc.templates]
        out.sort(key=lambda row: row[0].rank)
        return out

    def _rank_pools(self, item: UnitItem) -> tuple[list[Offer], list[str]]:
        offers: list[Offer] = []
        mismatched: list[str] = []
        for name in sorted(self.descriptions):
            desc = self.descriptions[name]
            if desc.kind != "units":
                continue
            pool = desc.pool(item.resource)
            if pool is None:
                mismatched.append(name)
                continue
            offers.append(_offer(name, desc, pool.resource, pool.capacity, None, desc.price(pool.resource), {}))
        offers.sort(key=lambda o: o.rank)
        return offers, mismatched


def _offer(name: str, desc: ProviderDescription, key: str, max_number: int, within: int | None, price: float,
           attributes: Mapping[str, AttrValue], vcpus: int | None = None) -> Offer:
    return Offer(provider=name, key=key, priority=desc.priority, within=within, price=price,
                 lead_time=desc.lead_time_s, max_number=max_number, capacity=desc.capacity,
                 min_request=desc.min_request, step=desc.step, min_hold=desc.min_hold_s, attributes=attributes,
                 vcpus=vcpus)
