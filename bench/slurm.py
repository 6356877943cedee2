"""Slurm's resume to the host bound to its node: a real daemon on SQLite, the simulated cloud, the bridge.

Each round is what slurmctld does for one cloud node: ``provisioner-slurm
resume cloudK`` (the power-saving program's own function, in process: its
fact committed), then the sync service's rounds until the bridge binds the
node to its host (``scontrol update nodename=cloudK nodeaddr=...``): the
daemon plans the name, the provider makes the host, the owner sees it
running, and the next sync round binds it. Slurm is a stand-in that lists
each resumed node as powering up until it is bound; the service runs its
rounds every ``sync_every`` (0.1 s here), the daemon plans and polls every
0.1 s, so the figure is the daemon's and the bridge's work plus those waits.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.floors import p99
from persistence.controller import open_controller
from provisioner.daemon import Daemon
from slurm.main import power
from slurm.sync import Sync
from tests.support.daemons import HOSTS_SIM, make_config, sim_provider

#: Seconds a round may take before the bench gives up: something is broken, not slow.
ROUND_LIMIT = 30.0


@dataclass(frozen=True)
class _Node:
    name: str
    state: str
    flags: frozenset[str]
    address: str | None
    hostname: str | None
    reason: str = ""


class StandInSlurm:
    """Lists each resumed node as powering up until the bridge binds it, then as idle at its address."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.resumed: list[str] = []
        self.bound: dict[str, tuple[str, str]] = {}
        self.bound_at: dict[str, float] = {}

    def nodes(self) -> list[_Node]:
        with self.lock:
            return [_Node(n, "IDLE", frozenset({"CLOUD"}), *self.bound[n]) if n in self.bound else
                    _Node(n, "IDLE", frozenset({"CLOUD", "POWERING_UP"}), n, n) for n in self.resumed]

    def jobs(self) -> list:
        return []

    def scontrol(self, args: list[str]) -> None:
        fields = dict(a.split("=", 1) for a in args[1:] if "=" in a)
        if args[0] == "update" and "nodeaddr" in fields:
            with self.lock:
                self.bound[fields["nodename"]] = (fields["nodeaddr"], fields.get("nodehostname", ""))
                self.bound_at.setdefault(fields["nodename"], time.perf_counter())


def resume_latencies(tmp: Path, rounds: int) -> list[float]:
    """Seconds from each resume (its commit included) to its node bound."""
    sim = {**HOSTS_SIM, "templates": [{**HOSTS_SIM["templates"][0], "max_number": rounds + 10}]}
    cfg = make_config(tmp, [sim_provider(tmp, "hosts", sim)], lease={"ttl": "10s", "renew_every": "3s"},
                      slurm={"nodes": [{"names": f"cloud[1-{rounds}]", "provider": "hosts", "template": "small"}],
                             "sync_every": "0.1s"})
    daemon = Daemon(cfg, tmp / "home").start()
    bridge = open_controller(cfg.controller.url)
    slurm = StandInSlurm()
    stopping = threading.Event()
    service = threading.Thread(target=Sync(cfg, bridge, slurm).run, args=(stopping,), name="sync", daemon=True)
    try:
        _wait_described(bridge)
        service.start()
        out = []
        for k in range(1, rounds + 1):
            name = f"cloud{k}"
            started = time.perf_counter()
            if power("resume", name, cfg) != 0:
                raise RuntimeError(f"slurm bench: resume {name} failed")
            with slurm.lock:
                slurm.resumed.append(name)
            deadline = time.monotonic() + ROUND_LIMIT
            while name not in slurm.bound_at:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"slurm bench: {name} was never bound")
                time.sleep(0.005)
            out.append(slurm.bound_at[name] - started)
        return out
    finally:
        stopping.set()
        service.join(10)
        bridge.close()
        daemon.stop()


def _wait_described(c) -> None:
    deadline = time.monotonic() + ROUND_LIMIT
    while not any(f.kind == "provider_described" for f in c.read()):
        if time.monotonic() > deadline:
            raise RuntimeError("slurm bench: the daemon never described its provider")
        time.sleep(0.02)


def resume_to_bound(tmp: Path, smoke: bool) -> tuple[float, float]:
    """p50 and p99 in seconds over 40 resumes (3 in smoke mode)."""
    values = resume_latencies(tmp, 3 if smoke else 40)
    return statistics.median(values), p99(values) if len(values) >= 2 else values[0]
