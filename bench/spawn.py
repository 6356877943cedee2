"""Demand pushed to first request script spawned: a real daemon on SQLite, the simulated cloud.

The spawn moment is taken by the runner itself (a subclass that notes when
``posix_spawn`` returned for a ``request``), so no timing code sits in the
daemon's own paths. Each round puts a snapshot with one fresh demand item, as
a scheduler would, and waits for its script to finish before a short, varying
pause: rounds do not line up with the daemon's ticks.
"""

from __future__ import annotations

import queue
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.script_calls import ScriptCalls
from messages.demand import DemandSnapshot, HostItem
from messages.scripts import ScriptResult
from owner.calls import OnDone
from persistence.controller import open_controller
from persistence.port import Controller
from providers.runner import ScriptRunner
from provisioner.daemon import Daemon
from tests.support.daemons import HOSTS_SIM, make_config, sim_provider

#: Seconds a round may take before the bench gives up: something is broken, not slow.
ROUND_LIMIT = 30.0


class SpawnClock:
    """Hands the daemon runners that report when each request script started and when it ended."""

    def __init__(self) -> None:
        self.spawned: queue.SimpleQueue[float] = queue.SimpleQueue()
        self.finished: queue.SimpleQueue[ScriptResult] = queue.SimpleQueue()

    def calls(self, provider: Any, work_dir: Path, on_done: OnDone, may_act: Callable[[], bool]) -> ScriptCalls:
        clock = self

        class Timed(ScriptRunner):
            def _spawn(self, argv: list[str], env: dict[str, str]) -> Any:
                started = super()._spawn(argv, env)
                if env.get("PROVISIONER_ACTION") == "request":
                    clock.spawned.put(time.perf_counter())
                return started

        def finished(result: ScriptResult) -> None:
            if result.action == "request":
                clock.finished.put(result)

        return ScriptCalls(lambda on_result: Timed(provider, work_dir, on_result), on_done, may_act, observe=finished)


def spawn_latencies(tmp: Path, rounds: int) -> list[float]:
    """Milliseconds from each demand put (its commit included) to the request script's spawn."""
    sim = {**HOSTS_SIM, "templates": [{**HOSTS_SIM["templates"][0], "max_number": rounds + 10}]}
    cfg = make_config(tmp, [sim_provider(tmp, "hosts", sim)], lease={"ttl": "10s", "renew_every": "3s"},
                      policy={"poll_every": "5s", "plan_every": "5s"})
    clock = SpawnClock()
    daemon = Daemon(cfg, tmp / "home", calls_factory=clock.calls).start()
    scheduler = open_controller(cfg.controller.url)
    pause = random.Random(6)
    try:
        _wait_acting(scheduler)
        out = []
        for k in range(rounds):
            started = time.perf_counter()
            scheduler.put_demand(DemandSnapshot(items=[HostItem(id=f"d{k}", count=1)]))
            spawned = clock.spawned.get(timeout=ROUND_LIMIT)
            out.append((spawned - started) * 1000)
            result = clock.finished.get(timeout=ROUND_LIMIT)
            if not result.ok:
                raise RuntimeError(f"spawn bench: the request failed: {result.reason}")
            time.sleep(pause.uniform(0.02, 0.08))
        return out
    finally:
        scheduler.close()
        daemon.stop()


def _wait_acting(c: Controller) -> None:
    """Until the daemon owns the provider and has described it: the planner can order from it."""
    deadline = time.monotonic() + ROUND_LIMIT
    while not any(f.kind == "provider_described" for f in c.read()):
        if time.monotonic() > deadline:
            raise RuntimeError("spawn bench: the daemon never described its provider")
        time.sleep(0.02)


def spawn_latency(tmp: Path, smoke: bool) -> tuple[float, float]:
    """p50 and p99, in milliseconds, over 100 rounds (5 in smoke mode)."""
    values = spawn_latencies(tmp, 5 if smoke else 100)
    return statistics.median(values), statistics.quantiles(values, n=100, method="inclusive")[98]
