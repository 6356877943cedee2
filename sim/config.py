"""The simulator's config: the daemon's own policy and budget sections, and simulated providers.

``policy:`` and ``budget:`` are the very models of ``config.models``,
so a section can be pasted from a production config and back. Each provider
is its ``description`` (what its ``describe`` would say: the planner sees
only this), the operator's ``policy`` for it (billing unit, caps, return
window) and a ``behaviour`` block (what really happens: lead times,
failures, capacity, reclaims), which the planner never sees.

Errors name the file, line and field, as the daemon's config loader does
(whose helpers this reuses).
"""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, ValidationError, model_validator

from config.located import (
    ConfigError,
    ConfigIssue,
    describe_error,
    dotted,
    empty_means_default,
    parse_located,
    validation_issues,
)
from config.models import (
    BudgetConfig,
    Duration,
    LeaseConfig,
    PolicyConfig,
    ProviderConfig,
    ProviderPolicy,
    ResourceConfig,
    ScriptConfig,
)
from messages.base import Model
from messages.description import ProviderDescription


def _spread(value: object) -> object:
    """A bare duration is a fixed spread."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return {"fixed": value}
    return value


class Spread(Model):
    """A duration drawn anew for every machine, grant or call.

    ``3m`` (fixed), ``{min: 2m, max: 5m}`` (uniform), ``{mean: 3m}``
    (exponential), or ``{median: 3m, sigma: 0.5}`` (log-normal).
    """

    fixed: Duration | None = None
    min: Duration | None = None
    max: Duration | None = None
    mean: Duration | None = None
    median: Duration | None = None
    sigma: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_shape(self) -> "Spread":
        shapes = {
            "fixed": self.fixed is not None,
            "uniform": self.min is not None or self.max is not None,
            "exponential": self.mean is not None,
            "log-normal": self.median is not None or self.sigma is not None,
        }
        given = [k for k, v in shapes.items() if v]
        if len(given) != 1:
            raise ValueError("give a duration, {min, max}, {mean} or {median, sigma}"
                             + (f" (got parts of {' and '.join(given)})" if given else ""))
        if shapes["uniform"] and (self.min is None or self.max is None or self.max < self.min):
            raise ValueError("a uniform spread needs min and max, with min <= max")
        if shapes["log-normal"] and (self.median is None or self.sigma is None):
            raise ValueError("a log-normal spread needs median and sigma")
        return self

    def draw(self, rng: random.Random) -> float:
        if self.fixed is not None:
            return self.fixed
        if self.min is not None and self.max is not None:
            return rng.uniform(self.min, self.max)
        if self.mean is not None:
            return rng.expovariate(1.0 / self.mean) if self.mean > 0 else 0.0
        assert self.median is not None and self.sigma is not None
        return self.median * math.exp(rng.gauss(0.0, self.sigma))

    @property
    def typical(self) -> float:
        """The spread's middle, for what a provider would say of itself."""
        if self.fixed is not None:
            return self.fixed
        if self.min is not None and self.max is not None:
            return (self.min + self.max) / 2
        return self.mean if self.mean is not None else self.median or 0.0


SpreadField = Annotated[Spread, BeforeValidator(_spread)]
Rate = Annotated[float, Field(ge=0, le=1)]


class Fault(Model):
    """A scripted failure: the next ``times`` calls of ``action`` exit with ``exit``."""

    action: Literal["request", "return"]
    #: 1: failed (retried), 75: transient (retried), 69: capacity unavailable (moves on).
    exit: Literal[1, 69, 75]
    times: int = Field(default=1, ge=1)


class Behaviour(Model):
    """What the simulated provider really does; the planner only sees the description."""

    #: Until a machine runs or units are granted; default: the description's ``lead_time_s``.
    lead_time: SpreadField | None = None
    #: How long a request or return script takes to answer.
    call_time: SpreadField = Field(default_factory=lambda: Spread(fixed=1.0))
    #: Until a returned machine or grant is gone.
    return_time: SpreadField = Field(default_factory=lambda: Spread(fixed=30.0))
    #: Chance a request or return call fails (exit 1; the owner retries it).
    fail_rate: Rate = 0.0
    #: Chance a call fails transiently (exit 75; retried).
    transient_rate: Rate = 0.0
    #: Chance a request finds no capacity (exit 69: the template cools down, the need moves on).
    capacity_error_rate: Rate = 0.0
    #: Chance a machine fails instead of starting.
    machine_fail_rate: Rate = 0.0
    #: What the provider can really hold at once, whatever its description says.
    capacity: int | None = Field(default=None, ge=0)
    #: Spot-style reclaims: chance per host-hour that the provider takes a running host back.
    reclaim_rate: float = Field(default=0.0, ge=0)
    #: Whether the provider honours idempotency tokens (v2); false: LSF style, whose
    #: inherited unsent requests are failed after a failover and left to the orphan search.
    tokens: bool = True
    faults: list[Fault] = Field(default_factory=list)


class SimProvider(Model):
    description: ProviderDescription
    policy: ProviderPolicy = Field(default_factory=ProviderPolicy)
    behaviour: Behaviour = Field(default_factory=Behaviour)

    @property
    def name(self) -> str:
        return self.description.name

    def as_config(self) -> ProviderConfig:
        """The daemon config entry this provider stands for (its policy is what the planner uses)."""
        return ProviderConfig(name=self.name, kind=self.description.kind, policy=self.policy,
                              script=ScriptConfig(style="v2" if self.behaviour.tokens else "lsf", path=Path("sim")))

    def lead_time(self) -> Spread:
        return self.behaviour.lead_time or Spread(fixed=self.description.lead_time_s)


class SchedulerConfig(Model):
    """The simulated scheduler: how soon a running host joins, how often it publishes its need."""

    join_delay: SpreadField = Field(default_factory=lambda: Spread(fixed=30.0))
    #: It publishes the unmet need at most this often (once per scheduling cycle); 0: at every change.
    publish_every: Duration = 10.0


class SimConfig(Model):
    #: Seeds every random draw: the same seed gives the same report.
    seed: int = 0
    #: ``ttl`` is how long a provider has no owner after a failover.
    lease: LeaseConfig = Field(default_factory=LeaseConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    providers: list[SimProvider] = Field(min_length=1)
    resources: list[ResourceConfig] = Field(default_factory=list)
    #: Interval of the series written to series.csv and plotted.
    series_every: Duration = 300.0

    @model_validator(mode="after")
    def _consistent(self) -> "SimConfig":
        names = [p.name for p in self.providers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate provider names: {', '.join(dup)}")
        kinds = {p.name: p.description.kind for p in self.providers}
        warm_units = [p.name for p in self.providers if p.policy.warm and p.description.kind != "hosts"]
        if warm_units:
            raise ValueError(f"provider {warm_units[0]}: warm capacity keeps hosts, and it lends units")
        for r in self.resources:
            if r.provider is not None and kinds.get(r.provider) != "units":
                raise ValueError(f"resource {r.name}: {r.provider!r} is not a units provider of this config")
        if self.series_every <= 0:
            raise ValueError("series_every must be longer than 0s")
        return self

    def provider(self, name: str) -> SimProvider | None:
        return next((p for p in self.providers if p.name == name), None)


# --- loading ---------------------------------------------------------------------------


def load_sim_config(path: Path) -> tuple[SimConfig, dict[str, Any]]:
    """The config, and its raw data for variants; ``ConfigError`` names every problem's file:line."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(file, None, "", f"cannot read: {exc}")]) from None
    data, where, issues = parse_located(text, file)
    if issues:
        raise ConfigError(issues)
    if not isinstance(data, dict):
        raise ConfigError([where.issue((), "the top level must be a mapping (policy:, budget:, providers:, ...)")])
    empty_means_default(data, SimConfig)
    try:
        cfg = SimConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_issues(exc, data, where, SimConfig)) from None
    return cfg, data


def with_settings(data: dict[str, Any], settings: list[str], origin: str) -> SimConfig:
    """The config with ``KEY=VALUE`` settings applied (``idle_time=5m`` means ``policy.idle_time``).

    Keys are dotted paths; a provider is named by its name: ``providers.spot.policy.billing_unit=1h``.
    Values are YAML scalars (``5m``, ``12``, ``null``). Errors name ``origin`` and the setting.
    """
    doc = copy.deepcopy(data)
    paths: dict[tuple, str] = {}
    for setting in settings:
        key, sep, raw = setting.partition("=")
        if not sep or not key.strip():
            raise ConfigError([ConfigIssue(origin, None, "", f"{setting!r}: expected KEY=VALUE")])
        parts = key.strip().split(".")
        if parts[0] not in SimConfig.model_fields:
            parts = ["policy", *parts]
        elems = _assign(doc, parts, yaml.safe_load(raw) if raw.strip() else None, origin, setting)
        paths[elems] = setting
    try:
        return SimConfig.model_validate(doc)
    except ValidationError as exc:
        issues = []
        for err in exc.errors(include_url=False):
            e = describe_error(err, doc, {}, SimConfig)
            named = next((s for p, s in paths.items() if e.elems[:len(p)] == p), None)
            what = f"{named!r}: " if named else ""
            issues.append(ConfigIssue(origin, None, "", f"{what}{dotted(e.elems)}: {e.message}"))
        raise ConfigError(issues) from None


def _assign(doc: dict[str, Any], parts: list[str], value: Any, origin: str, setting: str) -> tuple:
    cur: Any = doc
    elems: list[Any] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            idx = next((j for j, p in enumerate(cur) if isinstance(p, dict)
                        and (p.get("name") == part or (p.get("description") or {}).get("name") == part)), None)
            if idx is None:
                raise ConfigError([ConfigIssue(origin, None, "", f"{setting!r}: no entry named {part!r}")])
            elems.append(idx)
            if last:
                raise ConfigError([ConfigIssue(origin, None, "", f"{setting!r}: name a field of {part!r}")])
            cur = cur[idx]
            continue
        if not isinstance(cur, dict):
            raise ConfigError([ConfigIssue(origin, None, "", f"{setting!r}: {'.'.join(parts[:i])} has no fields")])
        elems.append(part)
        if last:
            cur[part] = value
        else:
            if cur.get(part) is None:
                cur[part] = {}
            cur = cur[part]
    return tuple(elems)

