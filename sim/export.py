"""Past demand as a simulator trace: what ``provisioner trace export`` writes.

A trace says what the workload wanted *in total* at each moment; the
controller knows the scheduler's *unmet* need (its past demand snapshots,
``Controller.demand_history``) and, in the fact log, what served the rest.
So each item's want is rebuilt as its unmet count plus what was busy with
its work then:

- a host item: its hosts that were ``busy`` (the scheduler's host events);
- a bundle item: its bundles on busy hosts (a packed order says how many
  each of its hosts carries);
- a units item: the units in use at the license server (``usage`` reads,
  which count the owned base too, as a trace's units do).

Hosts the provider took back (``lost``) become ``hosts`` lost events, and a
provider lease taken over from a holder that never gave it back (a daemon
that died) becomes a ``failover``. Everything is sampled on a ``step`` grid,
and a line is written only when something changed. It is an estimate: work
on a host reported ``idle`` or ``joined`` is not counted, and what the
scheduler never reported cannot be rebuilt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from messages.demand import BundleItem, DemandItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import Fact, LeaseChanged, UsageObserved
from state.projection import Projection


@dataclass
class Exported:
    steps: list[dict[str, Any]]
    start: float
    #: The items of the trace, by id, in order of first appearance.
    items: list[str] = field(default_factory=list)
    snapshots: int = 0


@dataclass(order=True)
class _Event:
    at: float
    order: int  # demand first at one instant, then use, then host changes
    what: str = field(compare=False)
    key: str = field(compare=False)
    value: Any = field(compare=False)


def _shape(item: DemandItem) -> dict[str, Any]:
    """An item's declaration in a trace: everything but its count."""
    doc = item.model_dump(mode="json", exclude_none=True, exclude={"count"})
    if isinstance(item, (HostItem, BundleItem)) and not doc.get("select"):
        doc.pop("select", None)
    if isinstance(item, BundleItem):
        if not doc.get("exclusive"):
            doc.pop("exclusive", None)
        if not doc.get("priority"):
            doc.pop("priority", None)
    return doc


def _busy_spells(history: tuple[Any, ...]) -> Iterator[tuple[float, float | None]]:
    """(from, until) of each busy spell in a flat state history; until None while it lasts."""
    since: float | None = None
    for i in range(0, len(history), 3):
        state, at = history[i], history[i + 1]
        if state == "busy" and since is None:
            since = at
        elif state != "busy" and since is not None:
            yield since, at
            since = None
    if since is not None:
        yield since, None


def export(history: list[DemandSnapshot], p: Projection, facts: Iterable[Fact], since: float, until: float,
           step: float = 60.0) -> Exported:
    """The trace of ``[since, until]`` from the demand history, the projection and the log's usage and leases."""
    if not history:
        return Exported(steps=[], start=since)
    start = max(since, history[0].time or since)
    events: list[_Event] = []
    for snap in history:
        events.append(_Event(snap.time or start, 0, "demand", "", snap))
    # What served each item: busy hosts, as (item, weight) per host.
    for inst in p.instances.values():
        weights = _carries(p, inst)
        if not weights:
            continue
        for begin, end in _busy_spells(tuple(inst.history)):
            for item, w in weights.items():
                events.append(_Event(begin, 2, "busy", item, w))
                if end is not None:
                    events.append(_Event(end, 2, "busy", item, -w))
        lost = inst.history.since("lost")
        if lost is not None and start <= lost <= until:
            events.append(_Event(lost, 3, "lost", inst.provider, 1))
    holders: dict[str, str] = {}
    released: set[str] = set()
    for fact in facts:
        payload = fact.payload
        if isinstance(payload, UsageObserved):
            events.append(_Event(fact.time, 1, "use", payload.resource, payload.in_use))
        elif isinstance(payload, LeaseChanged) and payload.name.startswith("provider:"):
            provider = payload.name.split(":", 1)[1]
            if payload.kind == "lease_lost":
                if holders.get(provider) == payload.holder:
                    released.add(provider)
                continue
            before = holders.get(provider)
            if before is not None and before != payload.holder and provider not in released \
                    and start <= fact.time <= until:
                events.append(_Event(fact.time, 3, "failover", provider, 1))
            holders[provider] = payload.holder
            released.discard(provider)
    events.sort()
    return _sweep(events, start, until, step)


def _carries(p: Projection, inst: Any) -> dict[str, float]:
    """What one host served: its item (a host item's), or its share of a packed order's bundles per item."""
    if inst.item_id:
        return {inst.item_id: 1.0}
    req = p.requests.get(inst.request_id)
    order = p.orders.get(req.order_id) if req is not None and req.order_id else None
    if order is None or not order.order.loads:
        return {}
    hosts = sum(ld.hosts for ld in order.order.loads) or 1
    return {item: n / hosts for item, n in order.order.bundles.items()}


def _sweep(events: list[_Event], start: float, until: float, step: float) -> Exported:
    out = Exported(steps=[], start=start)
    unmet: dict[str, int] = {}
    shapes: dict[str, DemandItem] = {}
    busy: dict[str, float] = {}
    use: dict[str, int] = {}
    written: dict[str, int] = {}
    declared: dict[str, dict[str, Any]] = {}
    pending: dict[str, list[Any]] = {"lost": [], "failover": []}

    def want(item: DemandItem) -> int:
        if isinstance(item, UnitItem):
            return unmet.get(item.id, 0) + use.get(item.resource, 0)
        return unmet.get(item.id, 0) + int(math.ceil(busy.get(item.id, 0.0) - 1e-9))

    def flush(at: float) -> None:
        items = []
        for item_id, item in shapes.items():
            count = want(item)
            shape = _shape(item)
            if declared.get(item_id) != shape:
                declared[item_id] = shape
                items.append({**shape, "count": count})
                written[item_id] = count
            elif written.get(item_id) != count:
                items.append({"id": item_id, "count": count})
                written[item_id] = count
        line: dict[str, Any] = {}
        if items:
            line["items"] = items
        lost: dict[str, int] = {}
        for provider in pending["lost"]:
            lost[provider] = lost.get(provider, 0) + 1
        if lost:
            line["hosts"] = [{"provider": prov, "event": "lost", "count": n} for prov, n in sorted(lost.items())]
        if pending["failover"]:
            line["failover"] = sorted(set(pending["failover"]))
        pending["lost"], pending["failover"] = [], []
        if line:
            out.steps.append({"time": round(at - start, 3), **line})

    grid = start
    for ev in events:
        if ev.at > until:
            break
        if ev.at > grid:
            if ev.at >= start:
                flush(grid)
            grid = max(grid, start + math.ceil((ev.at - start) / step) * step)
        if ev.what == "demand":
            snap: DemandSnapshot = ev.value
            out.snapshots += 1
            unmet = {i.id: i.count for i in snap.items}
            for i in snap.items:
                shapes[i.id] = i
                if i.id not in out.items:
                    out.items.append(i.id)
        elif ev.what == "busy":
            busy[ev.key] = busy.get(ev.key, 0.0) + ev.value
        elif ev.what == "use":
            use[ev.key] = ev.value
        elif ev.at >= start:
            pending[ev.what].append(ev.key)
    flush(min(grid, until))
    out.steps.append({"time": round(until - start, 3)})
    return out
