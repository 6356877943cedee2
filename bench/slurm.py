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

import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.floors import Measured, p99
from config.models import SlurmConfig, SlurmNodeSet
from messages.facts import InstanceSeen, NodesChanged, make_fact
from persistence.controller import open_controller
from provisioner.daemon.root import Daemon
from slurm import formats
from slurm.drift import Memory, reconcile
from slurm.main import power
from slurm.power import node_sets
from slurm.sync import Sync
from state.projection import Projection
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


#: The sync round's bench: nodes in Slurm's answer, and of them the ones up on a host of the daemon's.
SYNC_NODES = 10_000
SYNC_HOSTS = 5_000
SYNC_ROUNDS = 5


def _sinfo_document(n: int, hosts: int) -> bytes:
    """A ``sinfo --json`` answer of 22.05 (the captured fixture's shape) listing ``n`` cloud nodes: the first
    ``hosts`` up on the daemon's hosts (a third of them running jobs), the rest powered down."""
    fixture = Path(__file__).parents[1] / "tests" / "slurm" / "fixtures" / "sinfo-v0.0.38.json"
    doc = orjson.loads(fixture.read_bytes())
    model = doc["nodes"][0]
    nodes = []
    for k in range(1, n + 1):
        node = dict(model, name=f"cloud{k}", hostname=f"ip-{k}", address=f"10.0.{k // 250}.{k % 250}")
        if k <= hosts:
            node.update(state="allocated" if k % 3 == 0 else "idle", state_flags=["CLOUD"])
        else:
            node.update(state="idle", state_flags=["CLOUD", "POWERED_DOWN"])
        nodes.append(node)
    doc["nodes"] = nodes
    return orjson.dumps(doc)


def _bound_projection(hosts: int) -> Projection:
    """The bridge's projection: one named node per host, each host running at its node's address."""
    p = Projection()
    facts = [make_fact(NodesChanged(kind="nodes_resumed", names=[f"cloud{k}" for k in range(1, hosts + 1)],
                                    template="small"), provider="hosts", now=1.0, seq=1)]
    facts += [make_fact(InstanceSeen(machine_id=f"i-{k}", name=f"ip-{k}", node=f"cloud{k}", state="running",
                                     private_ip=f"10.0.{k // 250}.{k % 250}"), provider="hosts", now=2.0, seq=k + 1)
              for k in range(1, hosts + 1)]
    p.apply_all(facts)
    return p


def sync_round(_: Path, smoke: bool) -> Measured:
    """Seconds of one sync round over a 10,000-node ``sinfo --json`` (parse, reconcile against the facts, the
    supply view built), the best of five; the floor: ``orjson.loads`` of the same document."""
    n, hosts = (1_000, 500) if smoke else (SYNC_NODES, SYNC_HOSTS)
    text = _sinfo_document(n, hosts)
    p = _bound_projection(hosts)
    cfg = SlurmConfig(nodes=[SlurmNodeSet(names=f"cloud[1-{n}]", provider="hosts", template="small")])
    declared = node_sets(cfg)
    times, floors = [], []
    memory = Memory()
    for _ in range(SYNC_ROUNDS):
        started = time.perf_counter()
        r = reconcile(formats.nodes(text), p, cfg, declared, 10.0, memory)
        times.append(time.perf_counter() - started)
        if len(r.supply.hosts) != hosts or r.updates or r.facts:
            raise RuntimeError(f"slurm bench: the round saw {len(r.supply.hosts)} hosts, "
                               f"{len(r.updates)} updates, {len(r.facts)} facts; expected {hosts}, 0, 0")
        started = time.perf_counter()
        orjson.loads(text)
        floors.append(time.perf_counter() - started)
    return Measured(min(times), floor=min(floors))


#: Nodes in the one ``resume`` call of its bench, and how many calls it times.
RESUME_NODES = 100
RESUME_CALLS = 7


def resume_call(tmp: Path, smoke: bool) -> float:
    """Seconds of ``provisioner-slurm resume cloud[1-100]`` as slurmctld runs it (a new process: interpreter,
    config, one commit of the facts into a SQLite controller), the median of seven."""
    cfg_path = tmp / "slurm.yaml"
    cfg_path.write_text(orjson.dumps({
        "instance": {"id": "a", "serves": ["hosts"]}, "controller": {"url": f"sqlite:///{tmp / 'state.db'}"},
        "providers": [{"name": "hosts", "kind": "hosts", "script": {"style": "v2", "path": sys.executable}}],
        "slurm": {"nodes": [{"names": f"cloud[1-{RESUME_NODES}]", "provider": "hosts", "template": "small"}]},
    }).decode())
    open_controller(f"sqlite:///{tmp / 'state.db'}").close()
    env = {**os.environ, "SLURM_CONF": str(tmp / "no-slurm.conf")}
    times = []
    for _ in range(2 if smoke else RESUME_CALLS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "slurm.main", "--config", str(cfg_path), "resume",
                        f"cloud[1-{RESUME_NODES}]"], check=True, timeout=60, env=env, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)
