"""Cooldowns: a provider (or one of its templates) that keeps failing is left alone for a while.

Derived from the request history alone, so a restarted or newly elected
planner reaches the same cooldowns. Each request for supply that ends badly
is a *strike* against a scope:

- ``failed`` with outcome ``capacity`` (exit 69): the template or pool it asked
  for, since other templates of the same provider may still have room;
- any other failure (retries used up, unknown outcome) or ``timed_out``: the
  whole provider.

A request that completes clears both its template's and its provider's
strikes. The n-th strike in a row cools the scope down for
``min(cap, base * 2 ** (n - 1))`` from when the request ended; a strike
arriving more than ``cap`` after the previous cooldown ended starts the count
afresh, so an old bad spell does not punish a provider forever.

A provider's strikes are also cleared by a fact: a reload that changed what
its calls run with (``provider_reconfigured``), or an operator's ``provider
resume``. Requests that ended at or before it (``cleared``, per provider:
``ProviderRecord.strikes_cleared_at``) count nothing, so a restart agrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from messages.records import ProviderRecord, RequestRecord

#: Scope of a cooldown: (provider, template or resource); "" for the whole provider.
Scope = tuple[str, str]

_SUCCESS = frozenset({"complete", "complete_with_error"})
_STRIKE = frozenset({"failed", "timed_out"})


@dataclass(frozen=True)
class Cooldown:
    provider: str
    #: Template id or resource name; "" when the whole provider cools down.
    key: str
    until: float
    #: Strikes in a row that led here.
    strikes: int
    #: What the last strike was, in a few words.
    cause: str


def _cause(req: RequestRecord) -> str:
    if req.state == "timed_out":
        return "a request timed out"
    if req.outcome == "capacity":
        return "capacity error"
    if req.outcome == "timeout":
        return "a request of unknown outcome"
    return "a failed request"


def cooldowns(requests: Iterable[RequestRecord], now: float, base: float, cap: float,
              cleared: Mapping[str, float] | None = None) -> dict[Scope, Cooldown]:
    """The scopes cooling down at ``now``, from every request's history; ``cleared``: per provider, the time
    up to which its requests' ends count nothing (a provider not named there: none)."""
    ended: list[tuple[float, int, str, RequestRecord]] = []
    for req in requests:
        if req.action != "request" or (req.state not in _SUCCESS and req.state not in _STRIKE):
            continue
        at = req.history.since(req.state)
        if at is not None and (not cleared or at > cleared.get(req.provider, 0.0)):
            ended.append((at, req.seq, req.id, req))
    ended.sort(key=lambda e: e[:3])
    state: dict[Scope, Cooldown] = {}
    for at, _, _, req in ended:
        key = req.template or req.resource or ""
        if req.state in _SUCCESS:
            state.pop((req.provider, key), None)
            state.pop((req.provider, ""), None)
            continue
        scope = (req.provider, key if req.outcome == "capacity" and req.state == "failed" else "")
        prev = state.get(scope)
        strikes = 1 if prev is None or at - prev.until > cap else prev.strikes + 1
        wait = min(cap, base * 2 ** min(strikes - 1, 60))
        state[scope] = Cooldown(provider=req.provider, key=scope[1], until=at + wait, strikes=strikes,
                                cause=_cause(req))
    return {scope: c for scope, c in state.items() if c.until > now}


def cleared(providers: Mapping[str, ProviderRecord]) -> dict[str, float]:
    """Per provider whose strikes a fact cleared, up to when (``cooldowns``' ``cleared``)."""
    return {name: rec.strikes_cleared_at for name, rec in providers.items() if rec.strikes_cleared_at}
