"""An owner's whole turn: everything due from the facts now, and what a call's answer comes to.

``step`` is what the live owner does after every change and on every tick;
the simulator calls the same pieces at the moments it knows they matter.
Timed calls (describe, polls, scans, usage) are not in it: when they are due
is the driver's business, what they ask is ``owner.polls`` and ``owner.scans``.
"""

from __future__ import annotations

from collections.abc import Collection, Container

from messages.scripts import ScriptResult
from owner.calls import Call, Carry, CheckReclaims, CheckUse, Describe, List, Poll, ReadUsage, ScanStatus
from owner.describe import described, disable
from owner.effects import NOTHING, Effects
from owner.hosts import watch_joins
from owner.polls import polled
from owner.requests import carried, carry_out, expire, replan_returns, take_order, use_checked
from owner.scans import Sightings, listed, reclaimed, scanned
from owner.settings import OwnerSettings
from owner.units import totals, used
from state.projection import Projection


def step(p: Projection, s: OwnerSettings, now: float, busy: Collection[object], inherited_upto: int) -> Effects:
    """Orders to intents, intents to calls, requests past their time ended, joins watched, returns
    re-planned, totals written. ``inherited_upto``: the last seq written before this owner took over."""
    taken = set(busy)
    fx = NOTHING

    def add(more: Effects) -> None:
        nonlocal fx
        fx += more
        taken.update(w.slot for w in more.writes)
        taken.update(c.purpose.slot for c in more.calls)

    part = p.open(s.name)
    for order in part.orders:
        add(take_order(p, s, order, now, taken))
    for req in part.requests:
        if req.state == "planned":
            add(carry_out(p, s, req, now, taken, inherited=req.seq <= inherited_upto))
    add(expire(p, s, now, taken))
    add(watch_joins(p, s, now, taken))
    add(replan_returns(p, s, now, taken))
    add(totals(p, s, taken))
    return fx


def answer(p: Projection, s: OwnerSettings, call: Call, result: ScriptResult, now: float, busy: Collection[object],
           seen: Sightings, in_cluster: Container[str] = ()) -> tuple[Effects, Sightings]:
    """What a call's result comes to, read against why the call was made.

    ``in_cluster``: the names of this provider's hosts in the scheduler's latest view (a host the
    provider lists again after it was lost is adopted back when the scheduler uses it).
    """
    fx = disable(p, s, result, busy)
    purpose = call.purpose
    if isinstance(purpose, Carry):
        fx += carried(p, s, purpose.request_id, result, busy)
    elif isinstance(purpose, CheckUse):
        fx += use_checked(p, s, purpose, result, busy)
    elif isinstance(purpose, Poll):
        fx += polled(p, s, purpose.ids, result, busy)
    elif isinstance(purpose, Describe):
        fx += described(p, s, result)
    elif isinstance(purpose, ReadUsage):
        fx += used(p, s, purpose.resource, result)
    elif isinstance(purpose, List):
        more, seen = listed(p, s, purpose.started, result, now, seen, in_cluster, busy)
        fx += more
    elif isinstance(purpose, ScanStatus):
        more, seen = scanned(p, s, result, now, seen)
        fx += more
    elif isinstance(purpose, CheckReclaims):
        fx += reclaimed(p, s, result)
    return fx, seen
