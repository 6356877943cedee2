"""An owner's units: use at the source, and the totals a scheduler reads."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from messages.facts import GrantChanged, Order, Payload, ResourceTotalChanged, UsageObserved
from messages.records import GrantRecord
from messages.scripts import ScriptResult, Usage
from messages.states import BORROWED, GIVABLE
from owner.calls import Call, ReadUsage
from owner.effects import NOTHING, Effects, OrderTaken, TotalPublished, UsageSeen, note, write
from owner.settings import OwnerSettings
from policy.reclaim import portions
from state.projection import Projection


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


def lent(p: Projection, s: OwnerSettings, resource: str, going: Mapping[str, int] | None = None) -> int:
    """Units of ``resource`` lent to us that the scheduler may hand out: those held, less those on their way
    back (``going``: grant -> units a return being planned now gives back, in place of its current one)."""
    return _borrowed(p.open(s.name).grants, resource, going or {})


def _borrowed(grants: Iterable[GrantRecord], resource: str, going: Mapping[str, int]) -> int:
    return sum(g.count - going.get(g.id, g.returning) for g in grants if g.resource == resource and g.state in BORROWED)


def total_after(p: Projection, s: OwnerSettings, resource: str, going: Mapping[str, int]) -> list[Payload]:
    """The resource's total once ``going`` is on its way back, if it is this provider's to publish and changes.

    Written with a return's intent, so the scheduler stops handing out those units before any call is made.
    """
    return [t for t in _changed(p, s, p.open(s.name).grants, going) if t.resource == resource]


def totals(p: Projection, s: OwnerSettings, busy: Collection[object]) -> Effects:
    """Each elastic resource's total (base + borrowed), written when its borrowed part or base changed.

    Units on their way back are not in it: the total says how many units the scheduler may hand out.
    Grants and returns carry their totals in their own writes (``with_totals``); this catches the
    rest: the first total of a resource, and a base changed in the config.
    """
    fx = NOTHING
    going = going_back(p, busy)
    for total in _changed(p, s, p.open(s.name).grants, going):
        slot = TotalPublished(total.resource, total.base, total.borrowed)
        if slot not in busy and not any(p.grants[g].resource == total.resource for g in going):
            fx += write(slot, [total])  # (a return intent being written carries its resource's total)
    return fx


def with_totals(p: Projection, s: OwnerSettings, payloads: list[Payload],
                busy: Collection[object] = ()) -> list[Payload]:
    """``payloads`` and, after them, the totals they change: one write, so the total a scheduler reads
    changes atomically with the grant or return that causes it, under the same fence. Return intents
    being written (in ``busy``) are left out as their own totals will leave them out."""
    if not s.resources or not any(isinstance(x, GrantChanged) for x in payloads):
        return payloads
    return payloads + _changed(p, s, p.grants_after(s.name, payloads), going_back(p, busy))


def order_parts(p: Projection, o: Order) -> dict[str, int]:
    """What a units return order gives back of each grant it names, of what is still ours to give."""
    held = {g: gr.count for g in o.grants if (gr := p.grants.get(g)) is not None and gr.state in GIVABLE}
    return portions(held, o.count, held)


def going_back(p: Projection, busy: Collection[object], resource: str | None = None,
               but: str = "") -> dict[str, int]:
    """Units that return intents being written give back (their totals, written with them, are not
    committed yet): a total written meanwhile leaves them out too, never counting them again.
    (``resource``: only that resource's; ``but``: not that order's.)"""
    out: dict[str, int] = {}
    for slot in busy:
        if isinstance(slot, OrderTaken) and slot.order_id != but and not p.requests_of(slot.order_id):
            o = p.orders.get(slot.order_id)
            if o is not None and o.order.action == "return" and o.order.supply == "units" \
                    and (resource is None or o.order.resource == resource):
                out.update(order_parts(p, o.order))
    return out


def _changed(p: Projection, s: OwnerSettings, grants: Iterable[GrantRecord],
             going: Mapping[str, int]) -> list[ResourceTotalChanged]:
    grants = list(grants)
    out: list[ResourceTotalChanged] = []
    for res in s.resources:
        borrowed = _borrowed(grants, res.name, going)
        rec = p.resources.get(res.name)
        if rec is not None and rec.borrowed == borrowed and rec.base == res.base:
            continue
        if rec is None and borrowed == 0 and res.base == 0:
            continue
        out.append(ResourceTotalChanged(resource=res.name, base=res.base, borrowed=borrowed,
                                        total=res.base + borrowed))
    return out
