"""How long a daemon takes to be ready on a long fact log: the journal, budget and planner caught up.

The realistic start follows a daemon that stopped cleanly (or crashed) after
its last snapshot: it restores the snapshot and replays the facts written
since. The cold start has no snapshot and replays the whole log.
"""

from __future__ import annotations

import time
from pathlib import Path

from actors.base import Ping
from config.models import Config
from messages.facts import InstanceChanged, InstanceSeen, RequestPlanned, make_fact
from persistence.controller import open_controller
from provisioner.daemon.root import Daemon

#: Facts written after the last snapshot in the realistic start (the snapshotter's default interval).
TAIL = 5_000


def fill(url: str, n: int, start: int = 0) -> None:
    """Append ``n`` facts of instance lifecycles (four facts each), numbering them from ``start``."""
    c = open_controller(url)
    facts, i = [], start
    while len(facts) < n:
        rid = f"r{i}"
        facts.append(make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1),
                               provider="p", fact_id=rid))
        facts.append(make_fact(InstanceSeen(machine_id=f"m{i}", name=f"n{i}", request_id=rid, state="running"),
                               provider="p"))
        facts.append(make_fact(InstanceChanged(kind="instance_joined", machine_id=f"m{i}", state="joined"),
                               provider="p"))
        facts.append(make_fact(InstanceChanged(kind="instance_idle", machine_id=f"m{i}", state="idle"),
                               provider="p"))
        i += 1
    for first in range(0, len(facts), 5_000):
        c.append(facts[first:first + 5_000])
    c.close()


def _config(tmp: Path, url: str) -> Config:
    return Config.model_validate({"instance": {"id": "bench", "serves": [], "planner": True},
                                  "controller": {"url": url}, "home": str(tmp / "home")})


def _time_start(cfg: Config, home: Path) -> float:
    """Seconds from start until the journal, budget and planner have replayed the whole log."""
    started = time.perf_counter()
    daemon = Daemon(cfg, home).start()
    try:
        deadline = time.monotonic() + 120
        while True:
            actors = daemon.leases.proxy().actors().get(timeout=30)
            if actors and not daemon.journal.proxy().replaying().get(timeout=30):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("bench: the daemon never became ready")
            time.sleep(0.005)
        for ref in [daemon.budget, *actors]:
            ref.ask(Ping(), timeout=120)
        return time.perf_counter() - started
    finally:
        daemon.stop()


def ready_time(tmp: Path, smoke: bool) -> float:
    """Ready after a clean stop, with ``TAIL`` facts written after its snapshot: 100,000 facts in all."""
    n = 1_000 if smoke else 100_000
    tail = n // 20 if smoke else TAIL
    url = f"sqlite:///{tmp / 'ready.db'}"
    fill(url, n - tail)
    cfg = _config(tmp, url)
    Daemon(cfg, tmp / "home").start().stop()  # a clean stop writes the snapshot
    fill(url, tail, start=n)
    return _time_start(cfg, tmp / "home")


def ready_time_cold(tmp: Path, smoke: bool) -> float:
    """Ready with no snapshot: every fact replayed."""
    url = f"sqlite:///{tmp / 'ready.db'}"
    fill(url, 1_000 if smoke else 100_000)
    return _time_start(_config(tmp, url), tmp / "home")
