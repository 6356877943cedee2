"""Settings and results the owner's decisions are tested with."""

from __future__ import annotations

import itertools

import pytest

from config.models import PolicyConfig, ProviderConfig, ResourceConfig
from messages.scripts import Accepted, ScriptResult
from owner.settings import OwnerSettings


def settings(kind: str = "hosts", style: str = "v2", resources: list[dict] | None = None, **policy) -> OwnerSettings:
    cfg = ProviderConfig.model_validate({"name": "p", "kind": kind, "script": {"style": style, "path": "x"}})
    counter = itertools.count(1)
    return OwnerSettings.of(cfg, PolicyConfig(**policy), [ResourceConfig(**r) for r in resources or []],
                            new_id=lambda prefix: f"{prefix}-{next(counter)}")


def result(action: str, outcome: str = "ok", output=None, reason: str = "") -> ScriptResult:
    return ScriptResult(provider="p", action=action, outcome=outcome, output=output, reason=reason)


def accepted(pid: str, action: str = "request") -> ScriptResult:
    return result(action, output=Accepted(provider_request_id=pid))


@pytest.fixture
def hosts() -> OwnerSettings:
    return settings("hosts")


@pytest.fixture
def units() -> OwnerSettings:
    return settings("units", resources=[{"name": "vcs", "elastic": True, "base": 2, "provider": "p"}])
