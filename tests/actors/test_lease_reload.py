"""A reloaded config reaches the lease actor by message: roles stop and are released, are replaced, are told,
or are taken up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.lease import LeaseActor, Revocation
from actors.reconfigure import Reconfigure
from config.models import Config
from lease.port import Lease
from state.shared import SharedProjection
from tests.support.lease_world import Recorder

SCRIPT = {"style": "v2", "path": "/bin/true"}


def cfg(serves: list[str], planner: bool = True, path: str = "/bin/true") -> Config:
    return Config.model_validate({
        "instance": {"id": "a", "serves": serves, "planner": planner},
        "controller": {"url": "sqlite:///unused.db"}, "lease": {"ttl": "4s", "renew_every": "1s"},
        "providers": [{"name": n, "kind": "hosts", "script": {**SCRIPT, "path": path if n == "b" else "/bin/true"}}
                      for n in ("a", "b", "c")]})


class Role:
    def __init__(self, name: str, lease: Lease, revoked: Revocation) -> None:
        self.name, self.lease, self.revoked = name, lease, revoked
        self.stopped = False
        self.told: list[Any] = []

    def stop(self, block: bool = True, timeout: float | None = None) -> None:
        self.stopped = True

    def tell(self, msg: Any) -> None:
        self.told.append(msg)

    def is_alive(self) -> bool:
        return not self.stopped


def test_a_reload_stops_replaces_tells_and_takes_up_roles(world) -> None:
    clock, controller = world
    started: list[Role] = []

    def start_role(name: str, lease: Lease, revoked: Revocation) -> Role:
        started.append(Role(name, lease, revoked))
        return started[-1]

    actor = LeaseActor(cfg(["a", "b"]), controller, Recorder(), None, Recorder(), None, Path("/x"),
                       SharedProjection(), clock=clock, monotonic=clock, start_role=start_role)
    actor.on_start()
    first = {r.name: r for r in started}
    assert set(first) == {"planner", "provider:a", "provider:b"}

    new = cfg(["b", "c"], planner=True, path="/usr/bin/true")
    actor.on_receive(Reconfigure(config=new, restart=frozenset({"b"})))

    assert first["provider:a"].stopped and first["provider:a"].revoked.is_set(), "no longer served: stopped"
    assert not any(lease.name == "provider:a" for lease in controller.leases.all()), "and its lease released"
    assert first["provider:b"].stopped, "its script changed: the old owner stops"
    assert [r.name for r in started[3:]] == ["provider:b", "provider:c"], "a fresh owner, and the new provider"
    assert not first["planner"].stopped and first["planner"].told == [Reconfigure(config=new,
                                                                                  restart=frozenset({"b"}))]
    assert set(actor.held) == {"planner", "provider:b", "provider:c"}
    holders = {lease.name: lease.holder for lease in controller.leases.all() if not lease.name.startswith("instance:")}
    assert holders == {"planner": "a", "provider:b": "a", "provider:c": "a"}, "roles: the reload's, still a's"

    actor.on_receive(Reconfigure(config=cfg(["b", "c"], planner=False, path="/usr/bin/true")))
    assert first["planner"].stopped and "planner" not in actor.held
