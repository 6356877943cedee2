"""Consolidation on a real Slurm (issue 32): a busy host of a dear provider is drained by Slurm once a cheaper one
has room again, its job runs to its end, a cheap host is made and the dear one returned; no job is killed.

Two providers sell the same dynamic node (16 CPUs) from ``tests.support.slurmd_provider``: ``big`` at 1.0 an
hour, ``cheap`` at 0.1. ``cheap`` is paused at first (no room), so the job's host is ``big``'s. Once ``cheap`` is
resumed, the planner drains the busy ``big`` host and orders a ``cheap`` one. The job waits for a file the drill
writes only after it has seen Slurm drain the node with the job still running. One dynamic slurmd fits this
machine at a time (one ``SlurmdPort``), so the cheap machine, made at once, comes up once the dear one is gone,
as a machine that boots slowly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.slurm.test_slurm_drills import PROVIDER, SlurmCluster
from tests.support.daemons import free_port, wait_until
from tests.support.slurm import SlurmWorld, installed, kill_machines, machines

pytestmark = pytest.mark.slow
SHAPE = "CPUs=16 RealMemory=16000 Feature=dyn"
PRICES = {"big": 1.0, "cheap": 0.1}


class TwoPrices(SlurmCluster):
    """One daemon serving ``big`` and ``cheap``, each a slurmd provider of its own, with consolidation on."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp, nodes=2, dynamic=SHAPE, idle_time="0s",
                         consolidation={"enabled": True, "max_hosts": 1, "min_saving": 0.5})

    def state_of(self, name: str) -> Path:
        return self.tmp / f"machines-{name}"

    def provider(self, name: str, caller: str) -> dict:
        folder = self.tmp / name
        folder.mkdir(exist_ok=True)
        wrapper = folder / f"run-{caller}"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PROVIDER}" "$@"\n')
        wrapper.chmod(0o755)
        env = folder / f"{caller}.env"
        assert self.slurm is not None
        env.write_text(f"SLURMD_STATE={self.state_of(name)}\nSLURM_CONF={self.slurm.conf}\nSLURMD=/usr/sbin/slurmd\n"
                       f"SLURMD_DYNAMIC={SHAPE}\nSLURMD_PREFIX={name}-\nSLURMD_PRICE={PRICES[name]}\n"
                       f"SLURMD_PORT={self.tmp / 'slurmd-port'}\nSLURMD_MAX=2\n")
        env.chmod(0o600)
        return {"name": name, "kind": "hosts", "env_file": str(env),
                "script": {"style": "v2", "path": str(wrapper), "timeout": "20s"}}

    def config(self, instance: str) -> Path:
        cfg = {
            "instance": {"id": instance, "serves": list(PRICES), "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{self.ttl}s", "renew_every": f"{self.ttl / 4}s"},
            "policy": self.policy,
            "providers": [self.provider(name, instance) for name in PRICES],
            "slurm": {"partitions": ["dyn"], "drain_after": "5s", "sync_every": "1s"},
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def steer(self, action: str, provider: str) -> None:
        """``provisioner provider pause|resume PROVIDER``, as an operator runs it."""
        r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", self.url, "provider", action,
                            provider, "--reason", "the drill"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PROVISIONER_HOME": str(self.tmp / "cli-home")})
        assert r.returncode == 0, r.stderr

    def hosts(self, provider: str) -> list:
        return [i for i in self.state().instances.values() if i.provider == provider]


@pytest.fixture
def world(tmp_path):
    assert not installed(), f"Slurm is not installed ({', '.join(installed())}): .ci/run installs it"
    cluster = TwoPrices(tmp_path)
    yield cluster
    for proc in cluster.syncs:
        proc.kill()
        proc.wait(10)
    cluster.close()
    for name in PRICES:
        kill_machines(cluster.state_of(name))
    if cluster.slurm is not None:
        print("----- slurmctld -----\n" + cluster.slurm.log(60))
        cluster.slurm.stop()
    print(cluster.tails())
    sync_log = tmp_path / "sync.log"
    print("----- sync -----\n" + (sync_log.read_text()[-4000:] if sync_log.exists() else ""))


@pytest.mark.timeout(600)
def test_a_busy_dear_host_is_drained_by_slurm_its_job_ends_a_cheap_host_is_made_and_the_dear_one_returned(
        world, tmp_path):
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", nodes=2, dynamic=True)
    world.config("a")
    daemon = world.start("a")
    daemon.wait(lambda: all((rec := world.state().providers.get(n)) is not None and rec.description is not None
                            for n in PRICES), "both providers described")
    world.steer("pause", "cheap")  # the cheap template has no room
    world.sync()
    flag = tmp_path / "go-on"
    job = world.slurm.submit("-p", "dyn", "-c2", "--mem=500", "--wrap",
                             f"timeout 400 sh -c 'until [ -e {flag} ]; do sleep 1; done'; echo finished")
    wait_until(lambda: world.slurm.jobs().get(job) == "RUNNING" and [i.state for i in world.hosts("big")] == ["busy"],
               240, "the job running on a host of big, busy in the facts",
               said=lambda: world.slurm.log() + daemon.tail())
    (dear,) = world.hosts("big")
    assert not world.hosts("cheap"), "cheap was paused: nothing made there"
    world.steer("resume", "cheap")  # room again
    wait_until(lambda: "DRAIN" in world.slurm.nodes().get(dear.name, ("", frozenset()))[1], 120,
               f"Slurm draining {dear.name}, its job still running",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:] + daemon.tail())
    assert world.slurm.jobs()[job] == "RUNNING", "drained, not killed: the job runs on"
    decisions = [f.payload for f in world.c.read() if f.kind == "decision"
                 and f.payload.item.startswith("consolidate/")]
    assert [(d.item, d.saving_per_hour) for d in decisions] == [(f"consolidate/big/{dear.machine_id}", 0.9)]
    drains = [f.payload for f in world.c.read() if f.kind == "order" and f.payload.when_idle]
    assert [(o.machines, o.reason) for o in drains] == [
        ([dear.machine_id], "consolidating to cheap/node: saves 0.9/h (1/h to 0.1/h)")]
    wait_until(lambda: [r for r in world.state().requests.values() if r.provider == "cheap" and r.action == "request"
                        and r.item_id == f"consolidate/big/{dear.machine_id}" and r.state in ("submitted", "running")],
               60, "the cheap host ordered, and being made", said=daemon.tail)
    assert world.state().instances[dear.key].state == "busy", "not returned while its job runs"
    flag.write_text("")
    wait_until(lambda: world.slurm.jobs().get(job) == "COMPLETED", 120, "the job ending on the drained node",
               said=world.slurm.log)
    (record,) = [j for j in json.loads(world.slurm.run("squeue", "--json").stdout)["jobs"] if j["job_id"] == job]
    assert (record["job_state"], record["restart_cnt"], record["nodes"]) == ("COMPLETED", 0, dear.name), record
    assert "finished" in (world.slurm.tmp / "log" / f"job-{job}.out").read_text(), "it ran to its end"
    wait_until(lambda: world.state().instances[dear.key].state == "returned", 120, "the dear host returned once idle",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:] + daemon.tail())
    wait_until(lambda: [i.joined_at is not None for i in world.hosts("cheap")] == [True], 180,
               "the cheap host up (once the dear one's slurmd left the port) and in Slurm",
               said=lambda: world.slurm.log() + daemon.tail())
    said = (world.slurm.tmp / "log" / "slurmctld.log").read_text(errors="replace")
    assert f"node {dear.name} reason set to: provisioner: consolidating to cheap/node" in said, \
        "drained by Slurm with the daemon's reason"
    wait_until(lambda: world.live() == [], 180, "the cheap host, idle with no work, drained and given back too",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:] + daemon.tail())
    made = {**machines(world.state_of("big")), **machines(world.state_of("cheap"))}
    assert sorted(m["name"] for m in made.values()) == ["big-1", "cheap-1"] and all(m["returned"] for m in
                                                                                   made.values()), made
