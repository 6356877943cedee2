"""An owner's units: use at the source, and the totals a scheduler reads."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from messages.facts import Payload, ResourceTotalChanged, UsageObserved
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
            return note("warning", f"provider {s.name}: usage failed: {result.reason}")
        return NOTHING
    rec = p.resources.get(resource)
    if rec is not None and rec.in_use == result.output.in_use:
        return NOTHING
    return write(UsageSeen(resource), [UsageObserved(resource=resource, in_use=result.output.in_use,
                                                     total=result.output.total)])


def lent(p: Projection, s: OwnerSettings, resource: str, going: Mapping[str, int] | None = None) -> int:
    """Units of ``resource`` lent to us that the scheduler may hand out: those held, less those on their way
    back (``going``: grant -> units a return being planned now gives back, in place of its current one)."""
    going = going or {}
    return sum(g.count - going.get(g.id, g.returning) for g in p.open(s.name).grants
               if g.resource == resource and g.state in BORROWED)


def total_after(p: Projection, s: OwnerSettings, resource: str, going: Mapping[str, int]) -> list[Payload]:
    """The resource's total once ``going`` is on its way back, if it is this provider's to publish and changes.

    Written with a return's intent, so the scheduler stops handing out those units before any call is made.
    """
    res = next((r for r in s.resources if r.name == resource), None)
    if res is None:
        return []
    borrowed = lent(p, s, resource, going)
    rec = p.resources.get(resource)
    if rec is not None and rec.borrowed == borrowed and rec.base == res.base:
        return []
    return [ResourceTotalChanged(resource=resource, base=res.base, borrowed=borrowed, total=res.base + borrowed)]


def totals(p: Projection, s: OwnerSettings, busy: Collection[object]) -> Effects:
    """Each elastic resource's total (base + borrowed), written when its borrowed part or base changed.

    Units on their way back are not in it: the total says how many units the scheduler may hand out.
    """
    fx = NOTHING
    for res in s.resources:
        borrowed = lent(p, s, res.name)
        rec = p.resources.get(res.name)
        if rec is not None and rec.borrowed == borrowed and rec.base == res.base:
            continue
        if rec is None and borrowed == 0 and res.base == 0:
            continue
        slot = TotalPublished(res.name, res.base, borrowed)
        if slot in busy:
            continue
        fx += write(slot, [ResourceTotalChanged(resource=res.name, base=res.base, borrowed=borrowed,
                                                total=res.base + borrowed)])
    return fx
