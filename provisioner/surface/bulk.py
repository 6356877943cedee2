"""Bulk actions on hosts: return or drain every host that matches a filter, in one go.

An operator emptying a provider, a zone or the hosts of a bad image should
not return them one by one. ``select`` picks the hosts (by state, provider,
age and name), ``orders`` turns them into the same unfenced return orders
one ``instance return`` writes, which each provider's owner carries out:

- **return**: every matching host goes back now, a busy one too (the
  operator forces it, as ``instance return`` does); one order per
  provider, naming its machines, so a provider gets one return call;
- **drain**: every matching host goes back once it is not busy: idle ones
  now, busy ones as their work ends. One order per host (``when_idle``), as
  each falls idle in its own time.

Hosts already on their way back, or gone, are never ordered again; they are
counted among the skipped. Nothing here writes: the caller commits.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from config.values import parse_duration
from messages.facts import Order
from messages.records import InstanceRecord
from messages.states import INSTANCE, RETURNABLE

Bulk = Literal["return", "drain"]
#: States a bulk action acts on: returnable, and not on their way back already.
ACTED_ON = tuple(s for s in INSTANCE.edges if s in RETURNABLE and s not in ("return_planned", "returning"))
#: One line of free text: no control characters.
REASON = r"^[^\x00-\x1f\x7f]*$"


class BulkFilter(BaseModel):
    """Which hosts: all the given filters at once. With none, ``all`` must say every host is meant."""

    model_config = {"extra": "forbid"}

    state: str | None = Field(default=None, description=f"one of {', '.join(ACTED_ON)}")
    provider: str | None = Field(default=None, max_length=200)
    older_than: float | None = Field(default=None, description="launched at least this long ago: 2h, 3d or "
                                                               "seconds")
    name: str | None = Field(default=None, max_length=300, description="a glob on the host name, e.g. 'gpu-*'")
    all: bool = Field(default=False, description="act on every host when no other filter is given")

    @field_validator("older_than", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)

    @field_validator("state")
    @classmethod
    def _state(cls, value: str | None) -> str | None:
        if value is not None and value not in ACTED_ON:
            raise ValueError(f"hosts in state {value!r} cannot be returned or drained; one of: {', '.join(ACTED_ON)}")
        return value

    def given(self) -> bool:
        return any(v is not None for v in (self.state, self.provider, self.older_than, self.name))


class BulkBody(BulkFilter):
    """The REST body of ``POST /v1/instances/return`` and ``/drain``."""

    dry_run: bool = Field(default=False, description="say what would be done, write nothing")
    reason: str = Field(default="", max_length=500, pattern=REASON)


class NoFilter(ValueError):
    """No filter and no ``all``: refused, as it would act on every host."""


@dataclass
class Selection:
    #: The hosts to act on, oldest first.
    hosts: list[InstanceRecord] = field(default_factory=list)
    #: Hosts the filter matched that are not acted on, and why, by count.
    skipped: dict[str, int] = field(default_factory=dict)


def select(instances: Iterable[InstanceRecord], f: BulkFilter, now: float) -> Selection:
    """The hosts ``f`` matches, and those it matched that cannot be acted on (on their way back, gone)."""
    if not f.given() and not f.all:
        raise NoFilter("no filter given: that would be every host; give --state, --provider, --older-than or "
                       "--name, or --all to mean every host")
    out = Selection()
    for inst in sorted(instances, key=lambda i: (i.launched_at or i.seen_at, i.key)):
        if f.provider is not None and inst.provider != f.provider:
            continue
        if f.name is not None and not fnmatch.fnmatchcase(inst.name, f.name):
            continue
        if f.older_than is not None and now - (inst.launched_at or inst.seen_at) < f.older_than:
            continue
        if f.state is not None and inst.state != f.state:
            continue
        if inst.state in ACTED_ON:
            out.hosts.append(inst)
        elif inst.state not in INSTANCE.terminal:
            why = "being returned already" if inst.state in ("return_planned", "returning") else f"{inst.state}"
            out.skipped[why] = out.skipped.get(why, 0) + 1
    return out


def orders(action: Bulk, hosts: list[InstanceRecord], reason: str) -> list[tuple[str, Order]]:
    """The return orders for ``hosts``, as (provider, order): per provider to return, per host to drain."""
    if action == "drain":
        return [(i.provider, Order(action="return", supply="hosts", machines=[i.machine_id], count=1,
                                   reason=reason, when_idle=True)) for i in hosts]
    by_provider: dict[str, list[str]] = {}
    for i in hosts:
        by_provider.setdefault(i.provider, []).append(i.machine_id)
    return [(provider, Order(action="return", supply="hosts", machines=machines, count=len(machines), reason=reason))
            for provider, machines in sorted(by_provider.items())]


def per_provider(hosts: list[InstanceRecord]) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for i in hosts:
        out[i.provider] = out.get(i.provider, 0) + 1
    return dict(sorted(out.items()))


def summary(action: Bulk, selection: Selection, dry_run: bool) -> str:
    """One line: what was (or would be) done, where, and what was left alone."""
    n = len(selection.hosts)
    where = ", ".join(f"{p}: {k}" for p, k in per_provider(selection.hosts).items())
    verb = {"return": "return", "drain": "drain"}[action]
    if n == 0:
        head = f"no host to {verb}"
    elif dry_run:
        head = f"would {verb} {n} host{'s' if n != 1 else ''} ({where})"
    else:
        how = "now, busy ones too" if action == "return" else "each once it is not busy"
        head = f"{verb} of {n} host{'s' if n != 1 else ''} ordered ({where}); their owners give them back {how}"
    left = ", ".join(f"{k} {why}" for why, k in sorted(selection.skipped.items()))
    return head + (f"; left alone: {left}" if left else "")
