"""Drills against a real Slurm (issue 29): slurmctld calls provisioner-slurm, a real daemon makes the hosts, each
host a real ``slurmd -b -N NAME`` on this machine, and the sync service binds them, so jobs really run on them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from messages.states import REQUEST
from tests.support.daemons import free_port, wait_until
from tests.support.drills import Cluster
from tests.support.slurm import SlurmWorld, installed, kill_machines, machines

pytestmark = pytest.mark.slow
PROVIDER = Path(__file__).parents[1] / "support" / "slurmd_provider.py"
LIVE = ("requested", "provisioning", "running", "joined", "idle", "busy", "return_planned", "returning")


class SlurmCluster(Cluster):
    """One daemon serving a provider whose machines are local slurmds, and the bridge's config beside it."""

    def __init__(self, tmp: Path, deliver: str = "yes", **policy) -> None:
        super().__init__(tmp, ttl=3.0, **policy)
        self.deliver = deliver
        self.state_dir = tmp / "machines"
        self.slurm: SlurmWorld | None = None

    def provider(self, name: str, caller: str) -> dict:
        folder = self.tmp / name
        wrapper = folder / f"run-{caller}"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PROVIDER}" "$@"\n')
        wrapper.chmod(0o755)
        env = folder / f"{caller}.env"
        assert self.slurm is not None
        env.write_text(f"SLURMD_STATE={self.state_dir}\nSLURM_CONF={self.slurm.conf}\nSLURMD=/usr/sbin/slurmd\n"
                       f"SLURMD_DELIVER={self.deliver}\nSLURMD_MAX=8\n")
        env.chmod(0o600)
        return {"name": name, "kind": "hosts", "env_file": str(env),
                "script": {"style": "v2", "path": str(wrapper), "timeout": "20s"}}

    def config(self, instance: str) -> Path:
        cfg = {
            "instance": {"id": instance, "serves": ["hosts"], "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{self.ttl}s", "renew_every": f"{self.ttl / 4}s"},
            "policy": self.policy,
            "providers": [self.provider("hosts", instance)],
            "slurm": {"nodes": [{"names": "cloud[1-4]", "provider": "hosts", "template": "node"}],
                      "sync_every": "1s"},
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def sync(self) -> subprocess.Popen:
        assert self.slurm is not None
        proc = subprocess.Popen([sys.executable, "-m", "slurm.main", "--config", str(self.tmp / "a.yaml"), "sync"],
                                stdout=open(self.tmp / "sync.log", "ab"), stderr=subprocess.STDOUT,
                                env=self.slurm.env, start_new_session=True)
        self.syncs.append(proc)
        return proc

    def live(self) -> list[str]:
        """The names of hosts standing or being made (a request in flight counts: a machine may come of it)."""
        p = self.state()
        hosts = {i.host for i in p.instances.values() if i.state in LIVE}
        for r in p.requests.values():
            if r.action == "request" and r.state not in REQUEST.terminal:
                hosts.update(r.names)
        return sorted(hosts)


@pytest.fixture
def world(tmp_path):
    cluster = SlurmCluster(tmp_path, idle_time="0s")
    cluster.syncs = []
    assert not installed(), f"Slurm is not installed ({', '.join(installed())}): .ci/run installs it"
    yield cluster
    for proc in cluster.syncs:
        proc.kill()
        proc.wait(10)
    cluster.close()
    kill_machines(cluster.state_dir)
    if cluster.slurm is not None:
        print("----- slurmctld -----\n" + cluster.slurm.log(60))
        cluster.slurm.stop()
    print(cluster.tails())
    sync_log = tmp_path / "sync.log"
    print("----- sync -----\n" + (sync_log.read_text()[-4000:] if sync_log.exists() else ""))


@pytest.mark.timeout(420)
def test_power_saving_three_jobs_resume_three_nodes_run_and_are_given_back(world, tmp_path):
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", suspend_time=10)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    jobs = [world.slurm.submit("-N1", "-c2", "--wrap", "sleep 2") for _ in range(3)]
    wait_until(lambda: len(world.live()) == 3, 90, "three hosts made for three resumed nodes",
               said=lambda: world.slurm.said("resume") + daemon.tail())
    wait_until(lambda: all(world.slurm.jobs().get(j) == "COMPLETED" for j in jobs), 180,
               "the three jobs run on the hosts the daemon made", said=world.slurm.log)
    ran = {m["name"] for m in machines(world.state_dir).values()}
    assert len(ran) == 3 and ran <= set(world.slurm.names)
    wait_until(lambda: world.live() == [], 120, "the suspended nodes' hosts given back",
               said=lambda: world.slurm.said("suspend") + daemon.tail())
    made = [i for i in world.state().instances.values()]
    assert len(made) == 3 and {i.state for i in made} == {"returned"}, [(i.host, i.state) for i in made]
    assert not any(world_alive(m) for m in machines(world.state_dir).values()), "a slurmd still runs"


def world_alive(m) -> bool:
    return bool(m.get("pid")) and Path(f"/proc/{m['pid']}").exists() and \
        Path(f"/proc/{m['pid']}/stat").read_text().split(")")[-1].split()[0] not in ("Z", "X")


@pytest.mark.timeout(420)
def test_a_provider_that_never_delivers_the_node_goes_down_resume_fail_ends_it_and_it_can_be_resumed(tmp_path):
    world = SlurmCluster(tmp_path, deliver="never", idle_time="0s")
    world.syncs = []
    try:
        world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", resume_timeout=25)
        world.config("a")
        daemon = world.start("a")
        world.sync()
        job = world.slurm.submit("-N1", "-c2", "--wrap", "true")
        wait_until(lambda: world.live() == ["cloud1"], 90, "a host ordered for the resumed node",
                   said=lambda: world.slurm.said("resume") + daemon.tail())
        wait_until(lambda: "nodes_resume_failed" in {f.kind for f in world.c.read()}, 150,
                   "Slurm giving up on the node at ResumeTimeout and calling ResumeFailProgram",
                   said=lambda: world.slurm.log() + world.slurm.said("resume-fail"))
        state, flags = world.slurm.nodes()["cloud1"]
        assert state == "DOWN" and ("POWERED_DOWN" in flags or "POWERING_DOWN" in flags), (state, flags)
        wait_until(lambda: world.live() == [], 90, "what was being made for the node ended",
                   said=daemon.tail)
        first = {r.id for r in world.state().requests.values() if r.action == "request"}
        world.slurm.run("scontrol", "update", "nodename=cloud1", "state=resume")
        wait_until(lambda: world.live() == ["cloud1"], 150, "the node resumed again: a new host ordered for it",
                   said=lambda: world.slurm.log() + daemon.tail())
        again = {r.id for r in world.state().requests.values() if r.action == "request"} - first
        assert len(again) == 1, again
        world.slurm.run("scancel", str(job))
    finally:
        for proc in world.syncs:
            proc.kill()
            proc.wait(10)
        world.close()
        kill_machines(world.state_dir)
        if world.slurm is not None:
            print("----- slurmctld -----\n" + world.slurm.log(60))
            world.slurm.stop()
        print(world.tails())
