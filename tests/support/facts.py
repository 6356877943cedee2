"""Projections built from facts, and owner effects applied as the journal would commit them."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from messages.facts import Decision, Payload, make_fact
from owner.effects import Effects
from state.projection import Part, Projection
from state.shared import SharedProjection

T0 = 1_000_000.0


def projection(provider: str, facts: Sequence[tuple[str | None, Payload]], t0: float = T0) -> Projection:
    """A projection of ``facts`` (id or None, payload), written by ``provider`` one second apart from ``t0``."""
    p = Projection()
    p.apply_all(make_fact(payload, provider=provider, now=t0 + i, fact_id=fid).model_copy(update={"seq": i + 1})
                for i, (fid, payload) in enumerate(facts))
    return p


def commit(p: Projection, provider: str, fx: Effects, now: float) -> list[Payload]:
    """Apply an owner's writes in order, as committed facts (with ids where the owner named them)."""
    out: list[Payload] = []
    for w in fx.writes:
        for i, payload in enumerate(w.payloads):
            fid = w.ids[i] if i < len(w.ids) else None
            fact = make_fact(payload, provider=provider, now=now, fact_id=fid).model_copy(update={"seq": p.seq + 1})
            assert p.apply(fact), f"the projection refused {payload.kind}: {list(p.anomalies)[-1:]}"
            out.append(payload)
    return out


def kinds(payloads: Iterable[Payload]) -> list[str]:
    return [p.kind for p in payloads]


def shared_of(facts: Sequence) -> SharedProjection:
    """The daemon's shared projection, holding ``facts`` (committed facts, with their seq)."""
    shared = SharedProjection()
    shared.apply_all(list(facts))
    return shared


def state(p: Projection, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Everything a projection holds, with the order of its dicts and deques (iteration follows the log)."""
    out: dict[str, Any] = {}
    for name, value in vars(p).items():
        if name == "_only" or name in skip:
            continue
        if name == "parts":
            # Which provider's part came first follows the log in a replay, the snapshot in a restore.
            value = sorted((k, _ordered(part)) for k, part in value.items())
        elif isinstance(value, dict):
            value = [(k, list(v.items()) if isinstance(v, dict) else v) for k, v in value.items()]
        elif isinstance(value, deque):
            value = (value.maxlen, list(value))
        out[name] = value
    return out


def _ordered(part: Part) -> dict[str, Any]:
    """A part's ordered sets as lists, so that their order counts too (its counts by state have no order)."""
    return {f.name: (sorted if f.name == "live_states" else list)(getattr(part, f.name).items())
            for f in dataclasses.fields(part)}


def decisions(n: int, start: int = 1) -> list:
    """``n`` planner decisions as committed facts, numbered from ``start`` (audited lines to chain)."""
    out = []
    for i in range(start, start + n):
        f = make_fact(Decision(item=f"d{i}", need=i), lease="planner", fence=1, now=1_700_000_000.0 + i)
        out.append(f.model_copy(update={"seq": i}))
    return out
