"""Synthetic demand traces: a daily cycle, quieter weekends, noise and bursts, from a seed.

Each item's want follows ``base + (peak - base) * shape(hour)``, where the
shape is a cosine lowest at 03:00 and highest at 15:00 UTC; weekends scale
the swing by ``weekend``; multiplicative noise blurs it; bursts arrive as a
Poisson process and each adds ``burst_size * peak`` to one host or bundle item,
decaying over half an hour. Lines are written only when a count changes,
so a quiet night costs nothing. The same arguments and seed give the same
trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from config.located import one_line
from sim.trace import KINDS

BURST_DECAY = 1800.0


@dataclass(frozen=True)
class Load:
    """One demand item's want over the day."""

    id: str
    kind: str  # hosts, units or bundles
    peak: int
    base: int = 0
    select: dict[str, str] = field(default_factory=dict)
    resource: str = ""
    #: Bundles: what one needs of a host.
    resources: dict[str, float] = field(default_factory=dict)

    def shape(self) -> dict[str, Any]:
        if self.kind == "units":
            return {"id": self.id, "kind": "units", "resource": self.resource}
        if self.kind == "bundles":
            return {"id": self.id, "kind": "bundles", "resources": self.resources,
                    **({"select": self.select} if self.select else {})}
        return {"id": self.id, "kind": "hosts", **({"select": self.select} if self.select else {})}


FORMS = {"hosts": "ID:PEAK[:BASE[:SELECT]]", "units": "ID:RESOURCE:PEAK[:BASE]",
         "bundles": "ID:RESOURCES:PEAK[:BASE[:SELECT]]"}


def parse_load(kind: str, spec: str) -> Load:
    """``ID:PEAK[:BASE[:SELECT]]`` for hosts (SELECT like ``ncpus>=16;type=X86_64``), ``ID:RESOURCE:PEAK[:BASE]``
    for units, ``ID:RESOURCES:PEAK[:BASE[:SELECT]]`` for bundles (RESOURCES like ``ncpus=2;mem=8192``).

    The item is checked as the trace's reader will check it, so a name or selector it would refuse is
    refused here, naming the option, instead of in a trace written to be refused."""
    load = _parsed(kind, spec)
    model = KINDS[kind]
    shape = {**load.shape(), "count": max(0, load.peak)}
    try:
        model.model_validate(shape)
    except ValidationError as exc:
        raise ValueError(f"--{kind} {spec!r}: {one_line(exc, shape, model)}") from None
    return load


def _parsed(kind: str, spec: str) -> Load:
    parts = spec.split(":")
    try:
        if kind == "units":
            if len(parts) not in (3, 4):
                raise ValueError
            return Load(id=parts[0], kind="units", resource=parts[1], peak=int(parts[2]),
                        base=int(parts[3]) if len(parts) > 3 else 0)
        resources: dict[str, float] = {}
        if kind == "bundles":
            if len(parts) < 3 or not parts[1]:
                raise ValueError
            for clause in parts.pop(1).split(";"):
                name, sep, amount = clause.partition("=")
                value = float(amount)
                if not sep or not name or not (0 < value < math.inf):
                    raise ValueError
                resources[name] = int(value) if value.is_integer() else value
        if len(parts) not in (2, 3, 4):
            raise ValueError
        select: dict[str, str] = {}
        if len(parts) == 4 and parts[3]:
            for clause in parts[3].split(";"):
                key = next((clause[:i] for i, ch in enumerate(clause) if ch in "<>="), None)
                if not key:
                    raise ValueError
                select[key] = clause[len(key):]
        return Load(id=parts[0], kind=kind, peak=int(parts[1]), base=int(parts[2]) if len(parts) > 2 else 0,
                    select=select, resources=resources)
    except ValueError:
        raise ValueError(f"--{kind} {spec!r}: expected {FORMS[kind]}") from None


@dataclass(frozen=True)
class Shape:
    days: float = 7.0
    step: float = 60.0
    weekend: float = 0.3
    noise: float = 0.05
    bursts_per_day: float = 2.0
    burst_size: float = 0.5
    #: (provider, how many in the whole trace), spread evenly
    failovers: tuple[tuple[str, int], ...] = ()
    #: (provider, hosts lost per day), at random moments
    lost: tuple[tuple[str, float], ...] = ()


def problems(loads: list[Load], shape: Shape) -> list[str]:
    """What makes these arguments an empty or meaningless trace, each naming its option: negative rates
    and sizes, a base above the peak, a period with no sample in it."""
    out = []
    for ld in loads:
        flag = f"--{ld.kind} {ld.id}"
        if ld.peak < 0 or ld.base < 0:
            out.append(f"{flag}: peak {ld.peak} and base {ld.base} must be 0 or more")
        elif ld.base > ld.peak:
            out.append(f"{flag}: base {ld.base} is above the peak {ld.peak} (ID:PEAK:BASE: the peak comes first)")
    if not shape.days > 0:
        out.append(f"--days {shape.days:g}: must be more than 0")
    if not shape.step > 0:
        out.append(f"--step {shape.step:g}s: must be more than 0")
    elif shape.days > 0 and shape.step > shape.days * 86400.0:
        out.append(f"--step {shape.step:g}s is longer than --days {shape.days:g} ({shape.days * 86400.0:g}s): "
                   "the trace would have no sample after its start")
    for flag, value in (("--bursts-per-day", shape.bursts_per_day), ("--burst-size", shape.burst_size),
                        ("--noise", shape.noise), ("--weekend", shape.weekend)):
        if value < 0 or math.isnan(value):
            out.append(f"{flag} {value:g}: cannot be negative")
    for provider, n in shape.failovers:
        if n < 0:
            out.append(f"--failover {provider}:{n}: a count cannot be negative")
    for provider, per_day in shape.lost:
        if per_day < 0 or math.isnan(per_day):
            out.append(f"--lost {provider}:{per_day:g}: a rate cannot be negative")
    return out


def generate(loads: list[Load], shape: Shape, start: float, seed: int) -> Iterator[dict[str, Any]]:
    """The trace's steps as JSON-ready objects (the header is ``sim.trace.write_trace``'s)."""
    rng = random.Random(f"trace:{seed}")
    span = shape.days * 86400.0
    hosts = [ld for ld in loads if ld.kind != "units"]
    bursts: list[tuple[float, str, float]] = []
    t = 0.0
    while hosts and shape.bursts_per_day > 0:
        t += rng.expovariate(shape.bursts_per_day / 86400.0)
        if t >= span:
            break
        target = rng.choice(hosts)
        bursts.append((t, target.id, shape.burst_size * target.peak * rng.uniform(0.5, 1.5)))
    events: dict[float, dict[str, Any]] = {}
    for provider, n in shape.failovers:
        for i in range(n):
            events.setdefault(round(span * (i + 1) / (n + 1)), {}).setdefault("failover", []).append(provider)
    for provider, per_day in shape.lost:
        at = 0.0
        while per_day > 0:
            at += rng.expovariate(per_day / 86400.0)
            if at >= span:
                break
            events.setdefault(round(at), {}).setdefault("hosts", []).append(
                {"provider": provider, "event": "lost", "count": 1})
    last: dict[str, int] = {}
    declared: set[str] = set()
    steps = int(span // shape.step)
    for k in range(steps + 1):
        now = k * shape.step
        items = []
        for ld in loads:
            count = _want(ld, start + now, now, bursts, shape, rng)
            if last.get(ld.id) == count:
                continue
            last[ld.id] = count
            items.append({**ld.shape(), "count": count} if ld.id not in declared else {"id": ld.id, "count": count})
            declared.add(ld.id)
        extra: dict[str, list[Any]] = {}
        for at in [a for a in events if now - shape.step < a <= now]:
            for key, value in events.pop(at).items():
                extra.setdefault(key, []).extend(value)
        if items or extra:
            yield {"time": now, **({"items": items} if items else {}), **extra}
    yield {"time": steps * shape.step}


def _want(ld: Load, epoch: float, now: float, bursts: list[tuple[float, str, float]], shape: Shape,
          rng: random.Random) -> int:
    t = datetime.fromtimestamp(epoch, tz=UTC)
    hour = t.hour + t.minute / 60.0
    swing = 0.5 - 0.5 * math.cos(2 * math.pi * (hour - 3.0) / 24.0)
    if t.weekday() >= 5:
        swing *= shape.weekend
    level = ld.base + (ld.peak - ld.base) * swing
    if shape.noise:
        level *= max(0.0, 1.0 + rng.gauss(0.0, shape.noise))
    for at, item, size in bursts:
        if item == ld.id and at <= now < at + 6 * BURST_DECAY:
            level += size * math.exp(-(now - at) / BURST_DECAY)
    return max(0, round(level))
