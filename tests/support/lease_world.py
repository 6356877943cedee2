"""A lease actor on a real SQLite controller with a hand-turned clock; its roles and its journal stand-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.lease import LeaseActor, Revocation
from config.models import Config
from lease.port import Lease
from state.shared import SharedProjection

ROLES = {"planner", "provider:hosts", "provider:units"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Role:
    """Stands in for the planner or a provider actor: records whether it was stopped."""

    def __init__(self, name: str, lease: Lease, revoked: Revocation) -> None:
        self.name, self.lease, self.revoked = name, lease, revoked
        self.stopped = False

    def stop(self, block: bool = True, timeout: float | None = None) -> None:
        self.stopped = True


class Recorder:
    """The journal and the ticker: both only told things; as the ticker, it notes when it was asked to wake
    an actor (``wakes``: the clock's moments)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.told: list[Any] = []
        self.refs: set[Any] = set()
        self.clock = clock
        self.wakes: list[float] = []

    def wake(self, ref: Any, delay: float) -> None:
        assert self.clock is not None, "a journal is not asked to wake anyone"
        self.wakes.append(self.clock.now + delay)

    def tell(self, msg: Any) -> None:
        self.told.append(msg)

    def add(self, ref: Any) -> None:
        self.refs.add(ref)

    def remove(self, ref: Any) -> None:
        self.refs.discard(ref)


def lease_actor(world, holder: str) -> tuple[LeaseActor, list[Role]]:
    clock, controller = world
    script = {"style": "v2", "path": "/bin/true"}
    cfg = Config.model_validate({
        "instance": {"id": holder, "serves": ["hosts", "units"], "planner": True},
        "controller": {"url": "sqlite:///unused.db"}, "lease": {"ttl": "4s", "renew_every": "1s"},
        "providers": [{"name": "hosts", "kind": "hosts", "script": script},
                      {"name": "units", "kind": "units", "script": script}],
    })
    started: list[Role] = []

    def start_role(name: str, lease: Lease, revoked: Revocation) -> Role:
        started.append(Role(name, lease, revoked))
        return started[-1]

    ticker = Recorder(clock)
    actor = LeaseActor(cfg, controller, Recorder(), None, ticker, None, Path("/nonexistent"), SharedProjection(),
                       clock=clock, monotonic=clock, start_role=start_role)
    return actor, started


def held(actor: LeaseActor) -> set[str]:
    return set(actor.held)
