"""An owner's units: use at the source, and the totals a scheduler reads."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from messages.facts import GrantChanged, Payload, ResourceTotalChanged, UsageObserved
from messages.records import GrantRecord
from messages.scripts import ScriptResult, Usage
from messages.states import BORROWED
from owner.calls import Call, ReadUsage
from owner.effects import NOTHING, Effects, TotalPublished, UsageSeen, note, write
from owner.settings import OwnerSettings
from persistence.projection import Projection


def read_usage(s: OwnerSettings, busy: Collection[object]) -> Effects:
    """A ``usage`` call per resource the provider lends, unless one is under way."""
    return Effects(calls=tuple(Call(ReadUsage(r.name), "usage", {"resource": r.name}) for r in s.resources
                               if ReadUsage(r.name).slot not in busy))


def used(p: Projection, s: OwnerSettings, resource: str, result: ScriptResult) -> Effects:
    """Use at the source, recorded when it changed."""
    if not result.ok or not isinstance(result.output, Usage):
        if result.outcome != "ok":
            return note("warning", f"provider {s.name}: usage failed: {result.reason}", repeats="usage")
        return NOTHING
    rec = p.resources.get(resource)
    if rec is not None and rec.in_use == result.output.in_use:
        return NOTHING
    return write(UsageSeen(resource), [UsageObserved(resource=resource, in_use=result.output.in_use,
                                                     total=result.output.total)])


def totals(p: Projection, s: OwnerSettings, busy: Collection[object]) -> Effects:
    """Each elastic resource's total (base + borrowed), written when its borrowed part or base changed.

    Grants and returns carry their totals in their own writes (``with_totals``); this catches the
    rest: the first total of a resource, and a base changed in the config.
    """
    fx = NOTHING
    for total in _changed(p, s, p.open(s.name).grants):
        slot = TotalPublished(total.resource, total.base, total.borrowed)
        if slot not in busy:
            fx += write(slot, [total])
    return fx


def with_totals(p: Projection, s: OwnerSettings, payloads: list[Payload]) -> list[Payload]:
    """``payloads`` and, after them, the totals they change: one write, so the total a scheduler reads
    changes atomically with the grant or return that causes it, under the same fence."""
    if not s.resources or not any(isinstance(x, GrantChanged) for x in payloads):
        return payloads
    return payloads + _changed(p, s, p.grants_after(s.name, payloads))


def _changed(p: Projection, s: OwnerSettings, grants: Iterable[GrantRecord]) -> list[Payload]:
    grants = list(grants)
    out: list[Payload] = []
    for res in s.resources:
        borrowed = sum(g.count for g in grants if g.resource == res.name and g.state in BORROWED)
        rec = p.resources.get(res.name)
        if rec is not None and rec.borrowed == borrowed and rec.base == res.base:
            continue
        if rec is None and borrowed == 0 and res.base == 0:
            continue
        out.append(ResourceTotalChanged(resource=res.name, base=res.base, borrowed=borrowed,
                                        total=res.base + borrowed))
    return out
