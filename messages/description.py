"""How a provider describes itself: what it offers, at what cost and pace."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from messages.base import Model

SupplyKind = Literal["hosts", "units"]
AttrValue = str | float | bool

#: The attribute that says what capacity a template's hosts are (metrics and dashboards split by it).
CAPACITY_TYPE = "capacity_type"
CAPACITY_TYPES = ("on-demand", "spot")
#: A template (and provider) that does not say.
ON_DEMAND = "on-demand"


def _capacity_type_known(attributes: dict[str, AttrValue]) -> dict[str, AttrValue]:
    value = attributes.get(CAPACITY_TYPE)
    if value is not None and value not in CAPACITY_TYPES:
        raise ValueError(f"{CAPACITY_TYPE}: expected one of {', '.join(map(repr, CAPACITY_TYPES))}, got {value!r}")
    return attributes


class Quota(Model):
    """What a provider may still start under one of its quotas, as it said at its last ``describe``.

    ``vcpus``: vCPUs left (the quota less what runs under it now). The planner
    orders no more hosts under it than fit in what is left less the vCPUs of
    hosts it has asked for that the describe did not count (docs/policy.md#quota).
    """

    vcpus: int = Field(ge=0)
    #: A provider's quota: the templates it holds for (None: all of them). A template's own quota holds
    #: for that template and names none.
    templates: list[str] | None = None


class Template(Model):
    """One kind of host a provider can start (an LSF template)."""

    id: str = Field(min_length=1)
    max_number: int = Field(ge=0)
    #: What demand selects on; ``capacity_type`` (``spot`` or ``on-demand``) says what its hosts are.
    attributes: dict[str, AttrValue] = Field(default_factory=dict)
    #: Refines the provider's priority; higher is preferred.
    priority: int | None = None
    cost_per_hour: float | None = Field(default=None, ge=0)
    zone: str | None = None
    #: vCPUs one host of this template takes of a quota; needed when a quota applies to it.
    vcpus: int | None = Field(default=None, ge=1)
    #: The quota left for this template alone (besides the provider's, if it has one too).
    quota: Quota | None = None

    _capacity_type = field_validator("attributes")(_capacity_type_known)


class Pool(Model):
    """A countable resource a units provider lends (license tokens of one feature)."""

    resource: str = Field(min_length=1)
    capacity: int = Field(ge=0)
    cost_per_unit_hour: float | None = Field(default=None, ge=0)


class ProviderDescription(Model):
    """What policy needs to know of a provider, merged from its ``describe`` and the config."""

    name: str
    kind: SupplyKind
    priority: int = 0
    #: Default price of a host-hour (hosts) or unit-hour (units) when a template/pool has none.
    cost_per_hour: float = Field(default=0.0, ge=0)
    lead_time_s: float = Field(default=0.0, ge=0)
    min_request: int = Field(default=1, ge=1)
    step: int = Field(default=1, ge=1)
    min_hold_s: float = Field(default=0.0, ge=0)
    #: Overall cap on hosts or units held at once; None means the sum of templates/pools.
    capacity: int | None = Field(default=None, ge=0)
    region: str | None = None
    zone: str | None = None
    attributes: dict[str, AttrValue] = Field(default_factory=dict)
    templates: list[Template] = Field(default_factory=list)
    pools: list[Pool] = Field(default_factory=list)
    #: The quota left for all its templates together (a region's vCPU quota); None: no quota said.
    quota: Quota | None = None

    _capacity_type = field_validator("attributes")(_capacity_type_known)

    @model_validator(mode="after")
    def _quota_sized(self) -> ProviderDescription:
        """Every template under a quota says how many vCPUs one of its hosts takes of it; a provider's
        quota names only templates it has."""
        ids = {t.id for t in self.templates}
        named = self.quota.templates if self.quota is not None else None
        for name in named or ():
            if name not in ids:
                raise ValueError(f"quota.templates: no template {name!r}")
        for i, t in enumerate(self.templates):
            if t.quota is not None and t.quota.templates is not None:
                raise ValueError(f"templates[{i}] ({t.id}): quota.templates: only the provider's quota names "
                                 "templates")
            under = self.quota is not None and (named is None or t.id in named)
            if t.vcpus is None and (under or t.quota is not None):
                where = "the provider's quota" if t.quota is None else "its quota"
                raise ValueError(f"templates[{i}] ({t.id}): vcpus is needed under {where}")
        return self

    def under_quota(self, template: Template) -> bool:
        """Whether the provider's own quota holds for ``template``."""
        q = self.quota
        return q is not None and (q.templates is None or template.id in q.templates)

    # Plain loops, not ``next()`` over a generator: planning and costing look up a template or
    # pool for every host and grant they weigh, and the generator cost as much as the search.
    def template(self, template_id: str) -> Template | None:
        for t in self.templates:
            if t.id == template_id:
                return t
        return None

    def pool(self, resource: str) -> Pool | None:
        for p in self.pools:
            if p.resource == resource:
                return p
        return None

    def capacity_type(self, template_id: str | None) -> str:
        """What a template's hosts are: its ``capacity_type``, else the provider's, else ``on-demand``."""
        t = self.template(template_id) if template_id else None
        value = t.attributes.get(CAPACITY_TYPE) if t is not None else None
        if value is None:
            value = self.attributes.get(CAPACITY_TYPE, ON_DEMAND)
        return str(value)

    def price(self, template_or_resource: str | None) -> float:
        """Cost of one host-hour of a template, or one unit-hour of a resource."""
        if self.kind == "hosts" and template_or_resource:
            t = self.template(template_or_resource)
            if t is not None and t.cost_per_hour is not None:
                return t.cost_per_hour
        if self.kind == "units" and template_or_resource:
            p = self.pool(template_or_resource)
            if p is not None and p.cost_per_unit_hour is not None:
                return p.cost_per_unit_hour
        return self.cost_per_hour
