"""Demand traces: what a workload wanted over time, as JSON lines.

One JSON object per line (blank lines and lines starting with ``#`` are
skipped). An optional first line is a header: ``{"trace": {"start":
"2024-05-06T00:00:00Z", "note": "..."}}``; without it the trace starts at
2024-01-01T00:00:00Z. Every other line is a step:

```json
{"time": 0, "items": [{"id": "batch", "kind": "hosts", "count": 12, "select": {"ncpus": ">=8"}},
                      {"id": "lic", "kind": "units", "resource": "vcs", "count": 30},
                      {"id": "sim", "kind": "bundles", "count": 200, "resources": {"ncpus": 2, "mem": 8192}}]}
{"time": 60, "items": [{"id": "batch", "count": 14}, {"id": "sim", "count": 260}]}
{"time": 3600, "hosts": [{"provider": "spot", "event": "lost", "count": 2}]}
{"time": 7200, "failover": ["aws-east"]}
{"time": 86400}
```

- ``time``: seconds since the start (or a duration such as ``90m``), never
  going back.
- ``items``: demand items in the shape of a demand snapshot's items, except
  that ``count`` is what the workload wants *in total* (hosts busy with its
  work, license units in use, bundles running), not the unmet need: the
  simulated scheduler works out the unmet part as the supply arrives, as a
  real one does. An item is declared by its first line (``kind`` and
  ``template``, ``select``, ``resource`` or, for bundles, ``resources`` with
  ``select``, ``exclusive`` and ``priority`` if wanted); later lines may
  give just ``id`` and ``count``. Items a line does not name keep their
  count.
- ``hosts``: events at the providers: ``lost`` takes ``count`` running hosts
  of ``provider`` (newest first), or the host called ``name``, away.
- ``failover``: the owner of each named provider dies; a standby takes over
  after the lease TTL and resumes what was in flight by the restart rules
  of ``messages/states.py``.

The last line's time is the end of the run (a line with only ``time`` marks
it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BeforeValidator, Field, ValidationError, model_validator

from config.located import ConfigIssue, describe_error, labelled, one_line
from config.values import Duration
from messages.base import Model
from messages.demand import BundleItem, DemandItem, HostItem, Name, UnitItem

DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
#: A trace longer than this is surely a mistake (seconds given as milliseconds).
MAX_SPAN = 400 * 86400.0


def _epoch(value: object) -> object:
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not a time: {value!r} (use e.g. 2024-05-06T00:00:00Z)") from None
        return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
    return value


class Header(Model):
    start: Annotated[float, BeforeValidator(_epoch)] = DEFAULT_START
    note: str = ""


class HeaderLine(Model):
    trace: Header


class ItemLine(Model):
    """An item as a line gives it: the full shape when first declared, then ``id`` and ``count`` suffice."""

    id: Name
    count: int = Field(ge=0, le=1_000_000_000)
    kind: Literal["hosts", "units", "bundles"] | None = None
    template: Name | None = None
    select: dict[str, Any] | None = None
    resource: Name | None = None
    #: Bundle items: what one bundle needs of a host, whether it keeps a host to itself, its priority.
    resources: dict[str, Any] | None = None
    exclusive: Any = None
    priority: Any = None


class HostChange(Model):
    event: Literal["lost"]
    provider: Name | None = None
    name: Name | None = None
    count: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _which(self) -> "HostChange":
        if (self.provider is None) == (self.name is None):
            raise ValueError("name the host (name) or the provider whose hosts are lost (provider), not both")
        return self


class StepLine(Model):
    time: Duration
    items: list[ItemLine] = Field(default_factory=list)
    hosts: list[HostChange] = Field(default_factory=list)
    failover: list[Name] = Field(default_factory=list)


@dataclass(frozen=True)
class Step:
    #: Seconds since the trace's start.
    at: float
    #: Items this step sets, with ``count`` the total the workload wants.
    items: tuple[DemandItem, ...] = ()
    hosts: tuple[HostChange, ...] = ()
    failover: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class Trace:
    file: str
    start: float
    steps: tuple[Step, ...]
    #: Every item the trace declares, as first declared (count 0).
    items: dict[str, DemandItem] = field(default_factory=dict)
    note: str = ""

    @property
    def span(self) -> float:
        return self.steps[-1].at if self.steps else 0.0

    def problems(self, providers: dict[str, str]) -> list[str]:
        """Events the config cannot carry out (a failover or a host lost at a provider it lacks), each as
        ``file:line: ...``; ``providers`` maps each provider to its kind.

        Items are not among them: demand nobody can serve (a license nobody lends, a selector no template
        satisfies) is what an exported trace may well hold, and the report warns of it and counts it unmet
        (``sim.report.unservable_items``).
        """
        out = []
        for step in self.steps:
            where = f"{self.file}:{step.line}"
            for name in step.failover:
                if name not in providers:
                    out.append(f"{where}: failover: no provider named {name!r}")
            for h in step.hosts:
                if h.provider is not None and providers.get(h.provider) != "hosts":
                    out.append(f"{where}: hosts: no hosts provider named {h.provider!r}")
        return out


class TraceError(ValueError):
    """A trace that cannot be used; every problem as ``file:line: ...``."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


def read_trace(path: Path) -> Trace:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError([ConfigIssue(str(path), None, "", f"cannot read: {exc}")]) from None
    return parse_trace(text.splitlines(), str(path))


def parse_trace(lines: Iterable[str], file: str = "<trace>") -> Trace:
    issues: list[ConfigIssue] = []
    header = Header()
    steps: list[Step] = []
    declared: dict[str, DemandItem] = {}
    last = 0.0
    first = True
    for n, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            issues.append(ConfigIssue(file, n, "", f"not JSON: {exc}"))
            continue
        if not isinstance(data, dict):
            issues.append(ConfigIssue(file, n, "", "each line must be a JSON object"))
            continue
        if first and "trace" in data:
            first = False
            try:
                header = HeaderLine.model_validate(data).trace
            except ValidationError as exc:
                issues += _issues(exc, data, file, n, HeaderLine)
            continue
        first = False
        try:
            line = StepLine.model_validate(data)
        except ValidationError as exc:
            issues += _issues(exc, data, file, n, StepLine)
            continue
        if line.time < last:
            issues.append(ConfigIssue(file, n, "time", f"goes back in time ({line.time:g}s after {last:g}s)"))
            continue
        if line.time > MAX_SPAN:
            issues.append(ConfigIssue(file, n, "time", f"{line.time:g}s is beyond {MAX_SPAN / 86400:.0f} days"))
            continue
        last = line.time
        items = []
        for i, it in enumerate(line.items):
            try:
                items.append(_resolve(it, declared))
            except ValueError as exc:
                issues.append(ConfigIssue(file, n, f"items[{i}]", str(exc)))
        steps.append(Step(at=line.time, items=tuple(items), hosts=tuple(line.hosts), failover=tuple(line.failover),
                          line=n))
    if not steps and not issues:
        issues.append(ConfigIssue(file, 1, "", "no steps: a trace needs at least one line with a time"))
    if issues:
        raise TraceError(issues)
    return Trace(file=file, start=header.start, steps=tuple(steps), items=declared, note=header.note)


def _issues(exc: ValidationError, data: Any, file: str, line: int, root: Any) -> list[ConfigIssue]:
    out = []
    for err in exc.errors(include_url=False):
        e = describe_error(err, data, {}, root)
        out.append(ConfigIssue(file, line, labelled(e.elems, data), e.message))
    return out


def _resolve(it: ItemLine, declared: dict[str, DemandItem]) -> DemandItem:
    """The item a line names, as a demand item whose count is the workload's total want."""
    shape = it.model_dump(exclude_none=True)
    if it.kind is None:
        if it.id not in declared:
            raise ValueError(f"item {it.id!r} is not declared yet: give its kind (hosts, units or bundles) "
                             "on its first line")
        if len(shape) > 2:
            raise ValueError(f"item {it.id!r}: to change its shape, give its kind again with the whole shape")
        return declared[it.id].model_copy(update={"count": it.count})
    prev = declared.get(it.id)
    try:
        item: DemandItem = KINDS[it.kind].model_validate(shape)
    except ValidationError as exc:
        raise ValueError(f"item {it.id!r}: {one_line(exc, shape, KINDS[it.kind])}") from None
    if prev is not None and prev.kind != item.kind:
        raise ValueError(f"item {it.id!r} was declared as {prev.kind}; an id keeps its kind")
    declared[it.id] = item.model_copy(update={"count": 0})
    return item


#: The demand item each ``kind`` declares.
KINDS: dict[str, type[HostItem] | type[UnitItem] | type[BundleItem]] = {
    "hosts": HostItem, "units": UnitItem, "bundles": BundleItem}


def write_trace(path: Path, steps: Iterable[dict[str, Any]], start: float, note: str = "") -> int:
    """Write a header and one line per step; returns the number of steps."""
    n = 0
    with Path(path).open("wb") as out:
        header = {"start": datetime.fromtimestamp(start, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if note:
            header["note"] = note
        out.write(orjson.dumps({"trace": header}) + b"\n")
        for step in steps:
            out.write(orjson.dumps(step) + b"\n")
            n += 1
    return n

