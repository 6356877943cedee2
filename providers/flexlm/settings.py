"""The provider's settings file, named by ``FLEXLM_PROVIDER_CONFIG`` (YAML or JSON).

Read on every call, like the daemon's env_file, so an edited file takes effect
at the next call. Any error is a configuration error (exit 78) that names the
key, as ``features[0].pool: ...``: the daemon disables the provider and an
operator reads that line, so it must point at what to fix.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from providers.flexlm.errors import ConfigError

ENV = "FLEXLM_PROVIDER_CONFIG"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_SERVER = re.compile(r"^(?P<port>\d{1,5})@(?P<host>[A-Za-z0-9][A-Za-z0-9._-]*)$")
_FEATURE = re.compile(r"^[^\s:\"()]+$")
_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|d)?$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def seconds(value: Any) -> float:
    """``15m``, ``90s``, ``1.5h`` or a bare number of seconds, as in the daemon's own config."""
    if isinstance(value, bool):
        raise ValueError("not a duration")
    if isinstance(value, (int, float)):
        n = float(value)
    else:
        match = _DURATION.match(str(value).strip())
        if match is None:
            raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 15m, 2h)")
        n = float(match["n"]) * _UNITS[match["unit"]]
    if not (0 <= n < math.inf):
        raise ValueError("must be a duration of 0 or more")
    return n


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Feature(_Strict):
    """One FlexNet feature lent as one of the daemon's resources."""

    feature: str = Field(min_length=1)
    resource: str
    #: The tokens of this feature that the borrowing clusters share; the sum of their borrowings stays within it.
    pool: int = Field(ge=0)
    step: int = Field(default=1, ge=1)
    min_hold: float = 0.0
    #: Only needed when two vendor daemons serve a feature of this name.
    vendor: str | None = Field(default=None, min_length=1)

    @field_validator("feature")
    @classmethod
    def _feature(cls, value: str) -> str:
        if not _FEATURE.match(value):
            raise ValueError(f"not a FlexNet feature name: {value!r}")
        return value

    @field_validator("resource")
    @classmethod
    def _resource(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"not a resource name: {value!r} (letters, digits, '.', '_', '-')")
        return value

    @field_validator("min_hold", mode="before")
    @classmethod
    def _min_hold(cls, value: Any) -> float:
        return seconds(value)

    @property
    def pool_key(self) -> str:
        """How the ledger names the pool: every cluster borrowing this feature must name it the same."""
        return f"{self.vendor}/{self.feature}" if self.vendor else self.feature


class Settings(_Strict):
    lmutil: str = Field(min_length=1)
    #: ``PORT@HOST``, or the three servers of a redundant triad.
    server: str | list[str]
    cluster: str
    hosts: list[str] = Field(min_length=1)
    ledger: str
    features: list[Feature] = Field(min_length=1)

    @field_validator("server", mode="before")
    @classmethod
    def _server(cls, value: Any) -> str | list[str]:
        if not isinstance(value, (str, list)) or not all(isinstance(s, str) for s in value):
            raise ValueError("expected PORT@HOST, or a list of the three PORT@HOST of a triad")
        servers = [value] if isinstance(value, str) else value
        if not isinstance(value, str) and len(value) != 3:
            raise ValueError(f"a list names the three servers of a triad, got {len(value)}")
        for s in servers:
            if not _SERVER.match(s.strip()):
                raise ValueError(f"expected PORT@HOST, got {s!r}")
        return value

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"not a cluster name: {value!r} (letters, digits, '.', '_', '-')")
        return value

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for glob in value:
            if not glob.strip() or any(c.isspace() for c in glob):
                raise ValueError(f"not a host glob: {glob!r}")
        return [g.lower() for g in value]

    @field_validator("ledger")
    @classmethod
    def _ledger(cls, value: str) -> str:
        from providers.flexlm.ledger import check_url

        check_url(value)
        return value

    @model_validator(mode="after")
    def _unique(self) -> Settings:
        resources: set[str] = set()
        pools: set[str] = set()
        for i, f in enumerate(self.features):
            if f.resource in resources:
                raise ValueError(f"features[{i}].resource: {f.resource!r} is named twice")
            if f.pool_key in pools:
                raise ValueError(f"features[{i}].feature: {f.pool_key!r} is named twice")
            resources.add(f.resource)
            pools.add(f.pool_key)
        return self

    @property
    def license_spec(self) -> str:
        """What ``lmutil lmstat -c`` takes: a triad is its three servers joined by commas."""
        return self.server.strip() if isinstance(self.server, str) else ",".join(s.strip() for s in self.server)

    def feature(self, resource: str) -> Feature:
        for f in self.features:
            if f.resource == resource:
                return f
        known = ", ".join(f.resource for f in self.features)
        raise ConfigError(f"no feature is lent as resource {resource!r} (settings features: {known})")


def load(environ: Mapping[str, str] | None = None) -> Settings:
    env: Mapping[str, str] = os.environ if environ is None else environ
    name = env.get(ENV, "")
    if not name:
        raise ConfigError(f"{ENV} is not set: it names the provider's settings file")
    path = Path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"settings {path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"settings {path}:{where} not YAML or JSON: {getattr(exc, 'problem', None) or exc}") from None
    return parse(data, str(path))


def parse(data: Any, where: str = "settings") -> Settings:
    if not isinstance(data, dict):
        raise ConfigError(f"settings {where}: expected a mapping of keys (lmutil, server, cluster, ...)")
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"settings {where}: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    """``features[0].pool: Input should be ...``; for a mistyped key, its name and that it is unknown."""
    err = exc.errors()[0]
    path = ""
    for part in err["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    elif err["type"] == "missing":
        message = "missing required key"
    # A cross-field check names its own key: "features[1].resource: ... is named twice".
    if not path or message.startswith("features["):
        return message
    return f"{path}: {message}"
