"""Demand snapshots and host events, as the controller pushes them (docs/scheduler-interface.md)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from messages.base import Model

#: Numbers the scheduler sends are numbers: JSON ``true`` is not a count, nor ``"3"`` a time.
Count = StrictInt
Time = StrictFloat

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$")]

#: A selector value: ``>=8``, ``<=4096``, ``>2``, ``<2``, ``=X86_64`` or a bare value (equality).
SELECT_RE = re.compile(r"^(>=|<=|>|<|=)?\s*(.+)$")

#: An attribute a bundle needs some of (``ncpus``, ``mem``, ``ngpus`` ...): a template attribute's name.
AttrName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]*$")]


def _stringify(value: object) -> object:
    # YAML and JSON give numbers for ``ncpus: 8``; a selector is text.
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    return value


def _check_select(value: dict[str, str]) -> dict[str, str]:
    for key, expr in value.items():
        match = SELECT_RE.match(expr.strip())
        if match is None:
            raise ValueError(f"select.{key}: empty selector (use e.g. '>=8' or 'X86_64')")
        op, operand = match.groups()
        if op in (">=", "<=", ">", "<"):
            try:
                float(operand)
            except ValueError:
                raise ValueError(f"select.{key}: {op} needs a number, got {operand!r}") from None
    return value


#: Selectors on template attributes, as host and bundle items give them.
Select = Annotated[dict[str, str], BeforeValidator(_stringify), AfterValidator(_check_select)]


class HostItem(Model):
    """Hosts wanted: by template id, or by selectors on template attributes."""

    id: Name
    kind: Literal["hosts"] = "hosts"
    count: Count = Field(ge=0, le=1_000_000)
    template: Name | None = None
    select: Select = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_way(self) -> "HostItem":
        if self.template and self.select:
            raise ValueError("give either template or select, not both")
        return self


class BundleItem(Model):
    """Work to fit rather than hosts: ``count`` bundles, each needing ``resources`` of one host.

    ``resources`` names numeric template attributes (``ncpus``, ``mem``,
    ``ngpus`` ...) and how much of each one bundle takes; fractions are
    allowed (``ncpus: 0.5``). The planner packs the bundles into new hosts
    (``policy.packing``): bundles of one item may share a host, and so may
    bundles of different items unless one of them is ``exclusive``.
    ``select`` restricts the templates as for host items. When room is short,
    items of higher ``priority`` are packed first.
    """

    id: Name
    kind: Literal["bundles"] = "bundles"
    count: Count = Field(ge=0, le=1_000_000)
    resources: dict[AttrName, StrictInt | StrictFloat] = Field(min_length=1, max_length=32)
    select: Select = Field(default_factory=dict)
    exclusive: StrictBool = False
    priority: StrictInt = 0

    @field_validator("resources")
    @classmethod
    def _positive(cls, value: dict[str, int | float]) -> dict[str, int | float]:
        # A bundle that needs none of something would fit on hosts that lack it; say what it needs.
        for key, amount in value.items():
            if not math.isfinite(amount) or amount <= 0:
                raise ValueError(f"resources.{key}: must be a number above 0, got {amount!r}")
        return value


class UnitItem(Model):
    """Units of a countable resource (license tokens) wanted."""

    id: Name
    kind: Literal["units"] = "units"
    count: Count = Field(ge=0, le=1_000_000_000)
    resource: Name


DemandItem = Annotated[Union[HostItem, UnitItem, BundleItem], Field(discriminator="kind")]


class DemandSnapshot(Model):
    """The scheduler's unmet need now. A snapshot replaces the previous one."""

    seq: Count = Field(default=0, ge=0)
    items: list[DemandItem] = Field(default_factory=list)
    time: Time | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> "DemandSnapshot":
        seen: set[str] = set()
        for item in self.items:
            if item.id in seen:
                raise ValueError(f"items: duplicate id {item.id!r}")
            seen.add(item.id)
        return self


HostEventKind = Literal["joined", "idle", "busy"]


class HostEvent(Model):
    """A host joined the cluster, went idle or became busy; ``name`` as the provider reported it.

    ``provider`` names whose host it is; without it the name must be live at one provider only
    (two providers may each make a host of the same name).
    """

    seq: int | None = None
    name: Name
    event: HostEventKind
    time: float
    provider: Name | None = None


class SupplyHost(Model):
    """One host of the scheduler's view, and whether work runs on it."""

    name: Name
    provider: Name | None = None
    state: Literal["idle", "busy"]


class SupplySnapshot(Model):
    """The scheduler's whole view of the hosts made for it, sent each scheduling session; it replaces the last.

    It corrects host events that were lost: a host it lists as idle is idle, and a
    joined host it no longer lists is, after ``policy.unlisted_grace``, handled as
    idle or reported (``policy.orphans``).
    """

    seq: Count = Field(default=0, ge=0)
    hosts: list[SupplyHost] = Field(default_factory=list)
    #: Units of each shared resource (license) the scheduler's running jobs hold: against what the
    #: license server says is in use, it gives the drift.
    resources: dict[Name, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    time: Time | None = None

    @model_validator(mode="after")
    def _unique_hosts(self) -> "SupplySnapshot":
        seen: set[tuple[str | None, str]] = set()
        for host in self.hosts:
            key = (host.provider, host.name)
            if key in seen:
                raise ValueError(f"hosts: {host.name!r} is listed twice" + (
                    f" for provider {host.provider!r}" if host.provider else ""))
            seen.add(key)
        return self
