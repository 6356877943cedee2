"""The decisions both ledger backends make inside their atomic step, as pure functions.

Kept apart from the backends so that SQLite and etcd cannot drift in what a
repeated token, a return or a full pool means: only how the step is made
atomic differs between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from providers.flexlm.errors import BadInput
from providers.flexlm.ledger.port import BorrowAsk, Grant, PoolView, Return, ReturnAsk

#: Grants and returns that ended this long ago are forgotten. The daemon repeats a token only while
#: it cannot tell whether a call took effect (minutes, at most its request timeout), so a month is ample.
RETENTION_S = 30 * 86400.0


def room(pool: int, cap: int, view: PoolView) -> int:
    """Units that may still be lent: within the pool, and within what the license server can still issue."""
    return max(min(pool, cap) - view.lent, 0)


def grant_size(asked: int, free: int, step: int) -> int:
    """As much of the ask as fits, in whole steps: a partial grant is better than none, a broken step is not."""
    n = min(asked, free)
    return n - n % step


def same_borrow(existing: Grant, ask: BorrowAsk) -> Grant:
    """A repeated token is the same call; the same token for another call is the daemon's bug, said loudly."""
    if (existing.pool, existing.resource, existing.requested) != (ask.pool, ask.resource, ask.count):
        raise BadInput(f"token {ask.token} was used for a request of {existing.requested} {existing.resource}, "
                       f"not {ask.count} {ask.resource}")
    return existing


def same_return(existing: Return, ask: ReturnAsk) -> Return:
    if (existing.pool, existing.resource, existing.asked, existing.named) != (
            ask.pool, ask.resource, ask.count, ask.named):
        raise BadInput(f"token {ask.token} was used for another return (of {existing.asked} {existing.resource})")
    return existing


def plan_return(live: Sequence[Grant], ask: ReturnAsk) -> list[tuple[str, int]]:
    """Which units go back: those of the named grants (``(token, None)`` is the whole grant), else the newest first.

    Never more than ``ask.count`` in all, nor more than a grant holds: taking
    back fewer units than named leaves a grant lent that nobody uses, taking
    back more would take units a job holds. A named grant the cluster no longer
    holds (already returned) gives nothing.
    """
    by_token = {g.token: g for g in live if g.pool == ask.pool and g.count > 0}
    if ask.named is None:
        order = sorted(by_token.values(), key=lambda g: (g.created, g.token), reverse=True)
        wanted: list[tuple[Grant, int | None]] = [(g, None) for g in order]
    else:
        wanted = [(by_token[t], n) for t, n in ask.named if t in by_token]
    left = ask.count
    takes: list[tuple[str, int]] = []
    for g, n in wanted:
        take = min(g.count if n is None else n, g.count, left)
        if take > 0:
            takes.append((g.token, take))
            left -= take
    return takes


def apply_takes(live: Sequence[Grant], takes: Sequence[tuple[str, int]], now: float) -> list[Grant]:
    """The grants the takes change, with their new counts (and the time they ended, at zero)."""
    by_token = {g.token: g for g in live}
    changed = []
    for token, n in takes:
        g = by_token[token]
        count = g.count - n
        changed.append(replace(g, count=count, ended=now if count == 0 else None))
    return changed


def forgettable(grants: Sequence[Grant], now: float) -> list[Grant]:
    return [g for g in grants if g.count == 0 and g.ended is not None and g.ended < now - RETENTION_S]
