"""How long a daemon takes to be ready on a long fact log: replay into every actor's projection."""

from __future__ import annotations

import time
from pathlib import Path

from actors.base import Ping
from messages.facts import InstanceChanged, InstanceSeen, RequestPlanned, make_fact
from persistence.controller import open_controller
from provisioner.config import Config
from provisioner.daemon import Daemon


def fill(url: str, n: int) -> None:
    c = open_controller(url)
    facts, i = [], 0
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
    for start in range(0, len(facts), 5_000):
        c.append(facts[start:start + 5_000])
    c.close()


def ready_time(tmp: Path, smoke: bool) -> float:
    """Seconds from start until the journal, budget and planner have replayed the whole log."""
    url = f"sqlite:///{tmp / 'ready.db'}"
    fill(url, 1_000 if smoke else 100_000)
    cfg = Config.model_validate({"instance": {"id": "bench", "serves": [], "planner": True},
                                 "controller": {"url": url}, "home": str(tmp / "home")})
    started = time.perf_counter()
    daemon = Daemon(cfg, tmp / "home").start()
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
