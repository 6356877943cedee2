"""How a provider describes itself: what it offers, at what cost and pace."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

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

    _capacity_type = field_validator("attributes")(_capacity_type_known)

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
