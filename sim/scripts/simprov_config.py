"""The simulator's configuration, read on every call and checked field by field.

A problem is reported with the file and the dotted field and exit 78, so a
typo in a demo config disables the provider with a message that says where,
instead of a simulator that quietly behaves unlike what was written.
"""

from __future__ import annotations

import re
from typing import Any, Dict, NamedTuple, Optional, Tuple

from simprov_exit import CONFIG, SimExit, read_json

ACTIONS = ("describe", "request", "status", "return", "list", "reclaims", "usage")
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_MISSING = object()


class Span(NamedTuple):
    """A duration in seconds, fixed (low == high) or drawn uniformly from [low, high]."""

    low: float
    high: float

    def pick(self, u: float) -> float:
        return self.low + (self.high - self.low) * u

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2


class TemplateConf(NamedTuple):
    id: str
    max_number: int
    attributes: Dict[str, Any]
    cost_per_hour: Optional[float]
    priority: Optional[int]
    zone: Optional[str]


class PoolConf(NamedTuple):
    resource: str
    capacity: int
    cost_per_unit_hour: Optional[float]


#: What a ``print`` fault writes instead of the answer: a line that is not JSON, or one past every output limit.
PRINTS = ("garbage", "huge")


class FaultConf(NamedTuple):
    """The next ``times`` calls of ``action`` exit with ``exit``, or do their work and then hang, or do their
    work and then ``print`` garbage or a huge line instead of their answer."""

    action: str
    times: int
    exit: Optional[int]
    hang: Optional[float]
    print: Optional[str] = None


class SimConfig(NamedTuple):
    kind: str
    seed: Any
    name_prefix: str
    priority: int
    cost_per_hour: float
    lead_time: Span
    min_hold: float
    min_request: int
    step: int
    capacity: Optional[int]
    region: Optional[str]
    zone: Optional[str]
    attributes: Dict[str, Any]
    templates: Tuple[TemplateConf, ...]
    pools: Tuple[PoolConf, ...]
    fail_rate: float
    transient_rate: float
    capacity_error_rate: float
    hang_rate: float
    hang_seconds: float
    machine_fail_rate: float
    reclaim_rate: float
    reclaim_after: Span
    return_time: Span
    faults: Tuple[FaultConf, ...]
    #: LSF mode: take no token from the caller, as IBM's plugins do (every call is a new request).
    ignores_tokens: bool = False

    def template(self, template_id: str) -> Optional[TemplateConf]:
        return next((t for t in self.templates if t.id == template_id), None)

    def pool(self, resource: str) -> Optional[PoolConf]:
        return next((p for p in self.pools if p.resource == resource), None)


class _Section:
    """One JSON object of the config and the dotted place where it sits."""

    def __init__(self, doc: Any, place: str, file: str) -> None:
        self.file = file
        self.place = place
        if not isinstance(doc, dict):
            raise SimExit(CONFIG, f"sim config {file}: {place or '(top level)'}: must be a JSON object")
        self.doc: Dict[str, Any] = doc
        self.known: set = set()

    def where(self, key: str) -> str:
        return f"{self.place}.{key}" if self.place else key

    def error(self, key: str, problem: str) -> SimExit:
        return SimExit(CONFIG, f"sim config {self.file}: {self.where(key)}: {problem}")

    def raw(self, key: str, default: Any) -> Any:
        self.known.add(key)
        value = self.doc.get(key)
        if value is None:
            if default is _MISSING:
                raise self.error(key, "is required")
            return default
        return value

    def number(self, key: str, default: Any = _MISSING, low: float = 0.0, high: Optional[float] = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, found {value!r}")
        if value < low or (high is not None and value > high):
            bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
            raise self.error(key, f"must be {bound}, found {value!r}")
        return float(value)

    def integer(self, key: str, default: Any = _MISSING, low: Optional[int] = 0, high: Optional[int] = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, found {value!r}")
        if low is not None and value < low:
            raise self.error(key, f"must be >= {low}, found {value}")
        if high is not None and value > high:
            raise self.error(key, f"must be <= {high}, found {value}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, found {value!r}")
        return value

    def string(self, key: str, default: Any = _MISSING, pattern: Optional["re.Pattern[str]"] = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, f"must be a non-empty string, found {value!r}")
        if pattern is not None and not pattern.match(value):
            raise self.error(key, f"must match {pattern.pattern}, found {value!r}")
        return value

    def span(self, key: str, default: float) -> Span:
        value = self.raw(key, default)
        if isinstance(value, dict):
            inner = _Section(value, self.where(key), self.file)
            low = inner.number("min")
            high = inner.number("max")
            inner.finish()
            if high < low:
                raise self.error(key, f"max ({high:g}) is below min ({low:g})")
            return Span(low, high)
        seconds = self.number(key, default)
        return Span(seconds, seconds)

    def attributes(self, key: str) -> Dict[str, Any]:
        value = self.raw(key, {})
        if not isinstance(value, dict):
            raise self.error(key, "must be an object of name: string | number | boolean")
        for name, item in value.items():
            if not isinstance(item, (str, int, float, bool)):
                raise self.error(f"{key}.{name}", f"must be a string, number or boolean, found {item!r}")
        return dict(value)

    def items(self, key: str) -> list:
        value = self.raw(key, [])
        if not isinstance(value, list):
            raise self.error(key, "must be a list")
        return [_Section(item, f"{self.where(key)}[{i}]", self.file) for i, item in enumerate(value)]

    def finish(self) -> None:
        unknown = sorted(set(self.doc) - self.known)
        if unknown:
            raise self.error(unknown[0], f"unknown key (known keys: {', '.join(sorted(self.known))})")


def _template(s: _Section, provider_zone: Optional[str]) -> TemplateConf:
    t = TemplateConf(
        id=s.string("id"),
        max_number=s.integer("max_number"),
        attributes=s.attributes("attributes"),
        cost_per_hour=s.number("cost_per_hour", None),
        priority=s.integer("priority", None, low=None),
        zone=s.string("zone", provider_zone),
    )
    s.finish()
    return t


def _pool(s: _Section) -> PoolConf:
    p = PoolConf(
        resource=s.string("resource"),
        capacity=s.integer("capacity"),
        cost_per_unit_hour=s.number("cost_per_unit_hour", None),
    )
    s.finish()
    return p


def _fault(s: _Section) -> FaultConf:
    action = s.string("action")
    if action not in ACTIONS:
        raise s.error("action", f"must be one of {', '.join(ACTIONS)}, found {action!r}")
    f = FaultConf(
        action=action,
        times=s.integer("times", 1, low=1),
        exit=s.integer("exit", None, low=1, high=255),
        hang=s.number("hang", None),
        print=s.string("print", None),
    )
    s.finish()
    if sum(x is not None for x in (f.exit, f.hang, f.print)) != 1:
        raise s.error("exit", "give exactly one of 'exit' (a code), 'hang' (seconds) or 'print' (garbage or huge)")
    if f.print is not None and f.print not in PRINTS:
        raise s.error("print", f"must be one of {', '.join(PRINTS)}, found {f.print!r}")
    return f


def _unique(s: _Section, key: str, names: list) -> None:
    seen = set()
    for i, name in enumerate(names):
        if name in seen:
            raise s.error(f"{key}[{i}]", f"duplicate {name!r}")
        seen.add(name)


def parse_config(doc: Any, file: str) -> SimConfig:
    s = _Section(doc, "", file)
    kind = s.string("kind")
    if kind not in ("hosts", "units"):
        raise s.error("kind", f"must be 'hosts' or 'units', found {kind!r}")
    zone = s.string("zone", None)
    templates = tuple(_template(t, zone) for t in s.items("templates"))
    pools = tuple(_pool(p) for p in s.items("pools"))
    if kind == "hosts" and not templates:
        raise s.error("templates", "a hosts provider needs at least one template")
    if kind == "hosts" and pools:
        raise s.error("pools", "only a units provider has pools")
    if kind == "units" and not pools:
        raise s.error("pools", "a units provider needs at least one pool")
    if kind == "units" and templates:
        raise s.error("templates", "only a hosts provider has templates")
    _unique(s, "templates", [t.id for t in templates])
    _unique(s, "pools", [p.resource for p in pools])
    seed = s.raw("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise s.error("seed", f"must be an integer or a string, found {seed!r}")
    cfg = SimConfig(
        kind=kind,
        seed=seed,
        name_prefix=s.string("name_prefix", "sim", pattern=_PREFIX),
        priority=s.integer("priority", 0, low=None),
        cost_per_hour=s.number("cost_per_hour", 0.0),
        lead_time=s.span("lead_time", 0.0),
        min_hold=s.number("min_hold", 0.0),
        min_request=s.integer("min_request", 1, low=1),
        step=s.integer("step", 1, low=1),
        capacity=s.integer("capacity", None),
        region=s.string("region", None),
        zone=zone,
        attributes=s.attributes("attributes"),
        templates=templates,
        pools=pools,
        fail_rate=s.number("fail_rate", 0.0, high=1.0),
        transient_rate=s.number("transient_rate", 0.0, high=1.0),
        capacity_error_rate=s.number("capacity_error_rate", 0.0, high=1.0),
        hang_rate=s.number("hang_rate", 0.0, high=1.0),
        hang_seconds=s.number("hang_seconds", 3600.0),
        machine_fail_rate=s.number("machine_fail_rate", 0.0, high=1.0),
        reclaim_rate=s.number("reclaim_rate", 0.0, high=1.0),
        reclaim_after=s.span("reclaim_after", 300.0),
        return_time=s.span("return_time", 0.0),
        faults=tuple(_fault(f) for f in s.items("faults")),
        ignores_tokens=s.boolean("ignores_tokens", False),
    )
    s.finish()
    if cfg.fail_rate + cfg.transient_rate + cfg.capacity_error_rate > 1.0:
        raise s.error("fail_rate", "fail_rate + transient_rate + capacity_error_rate must not exceed 1")
    return cfg


def load_config(path: str) -> SimConfig:
    return parse_config(read_json(path, CONFIG, "sim config"), path)
