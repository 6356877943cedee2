"""Demand pushed to first request script spawned: a real daemon on SQLite, the simulated cloud.

The spawn moment is taken by the runner itself (a subclass that notes when
``posix_spawn`` returned for a ``request``), so no timing code sits in the
daemon's own paths. Each round puts a snapshot with one fresh demand item, as
a scheduler would, and waits for its script to finish before a short, varying
pause: rounds do not line up with the daemon's ticks.

The floor is measured in the same rounds, right after each: one commit of
the same demand row into a fresh SQLite file (the controller's table, journal
mode and ``synchronous`` level: fsync'd as the demand's own commit), then one
``os.posix_spawn`` of the same script with the environment the daemon gave
its request, timed until the spawn returned. The floor's run is given no
action, so the simulated provider only prints its usage and exits (what a
script does after its spawn is not timed, and a second request would change
the provider the daemon is watching).
"""

from __future__ import annotations

import queue
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from actors.script_calls import ScriptCalls
from bench.floors import CommitAndSpawn, Measured, SqliteSettings, p99
from messages.demand import DemandSnapshot, HostItem
from messages.scripts import ScriptResult
from owner.calls import OnDone
from persistence.controller import open_controller
from persistence.port import Controller
from providers.runner import ScriptRunner
from provisioner.daemon.root import Daemon
from tests.support.daemons import HOSTS_SIM, make_config, sim_provider

#: Seconds a round may take before the bench gives up: something is broken, not slow.
ROUND_LIMIT = 30.0


class SpawnClock:
    """Hands the daemon runners that report when each request script started and when it ended."""

    def __init__(self) -> None:
        self.spawned: queue.SimpleQueue[float] = queue.SimpleQueue()
        self.finished: queue.SimpleQueue[ScriptResult] = queue.SimpleQueue()
        #: The argv and environment of the first request script spawned.
        self.request: tuple[list[str], dict[str, str]] | None = None

    def calls(self, provider: Any, work_dir: Path, on_done: OnDone, may_act: Callable[[], bool]) -> ScriptCalls:
        clock = self

        class Timed(ScriptRunner):
            def _spawn(self, argv: list[str], env: dict[str, str]) -> Any:
                started = super()._spawn(argv, env)
                if env.get("PROVISIONER_ACTION") == "request":
                    clock.spawned.put(time.perf_counter())
                    if clock.request is None:
                        clock.request = (list(argv), dict(env))
                return started

        def finished(result: ScriptResult) -> None:
            if result.action == "request":
                clock.finished.put(result)

        return ScriptCalls(lambda on_result: Timed(provider, work_dir, on_result), on_done, may_act, observe=finished)


def spawn_latencies(tmp: Path, rounds: int) -> tuple[list[float], list[float]]:
    """Milliseconds from each demand put (its commit included) to the request script's spawn, and the floor's."""
    sim = {**HOSTS_SIM, "templates": [{**HOSTS_SIM["templates"][0], "max_number": rounds + 10}]}
    cfg = make_config(tmp, [sim_provider(tmp, "hosts", sim)], lease={"ttl": "10s", "renew_every": "3s"},
                      policy={"poll_every": "5s", "plan_every": "5s"})
    clock = SpawnClock()
    daemon = Daemon(cfg, tmp / "home", calls_factory=clock.calls).start()
    scheduler = open_controller(cfg.controller.url)
    floor: CommitAndSpawn | None = None
    pause = random.Random(6)
    try:
        _wait_acting(scheduler)
        out, floors = [], []
        for k in range(rounds):
            snapshot = DemandSnapshot(items=[HostItem(id=f"d{k}", count=1)])
            started = time.perf_counter()
            scheduler.put_demand(snapshot)
            spawned = clock.spawned.get(timeout=ROUND_LIMIT)
            out.append((spawned - started) * 1000)
            result = clock.finished.get(timeout=ROUND_LIMIT)
            if not result.ok:
                raise RuntimeError(f"spawn bench: the request failed: {result.reason}")
            if floor is None:
                # The scheduler's connection wrote the demand: its durability is the floor's.
                settings = SqliteSettings(scheduler._db.connection(), "demand")
                floor = CommitAndSpawn(tmp / "floor.db", settings, ("time", "payload"))
            assert clock.request is not None
            argv, env = clock.request
            # The row put_demand stores (built untimed).
            row = (time.time(), orjson.dumps({"items": snapshot.model_dump(mode="json", exclude_none=True)["items"]}))
            floors.append(floor.sample(row, argv[:1], env))
            time.sleep(pause.uniform(0.02, 0.08))
        return out, floors
    finally:
        if floor is not None:
            floor.close()
        scheduler.close()
        daemon.stop()


def _wait_acting(c: Controller) -> None:
    """Until the daemon owns the provider and has described it: the planner can order from it."""
    deadline = time.monotonic() + ROUND_LIMIT
    while not any(f.kind == "provider_described" for f in c.read()):
        if time.monotonic() > deadline:
            raise RuntimeError("spawn bench: the daemon never described its provider")
        time.sleep(0.02)


def spawn_latency(tmp: Path, smoke: bool) -> tuple[float, Measured]:
    """p50, and p99 with the floor's p99, in milliseconds, over 100 rounds (5 in smoke mode)."""
    values, floors = spawn_latencies(tmp, 5 if smoke else 100)
    return statistics.median(values), Measured(p99(values), floor=p99(floors))
