"""The EC2 provider under a real daemon: ``provisioner run`` processes, moto's EC2 on loopback.

The daemon runs ``provisioner-ec2`` as it would in production, with its
settings and credentials from an env_file; the tests play the scheduler with
the CLI (``demand put``, ``host joined``, ``host idle``), read the daemon's
views over its REST API, and check what EC2 itself holds at the end.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from persistence.controller import open_controller
from persistence.replay import replay
from tests.support.daemons import STARTUP
from tests.support.ec2.faults import FaultProxy
from tests.support.ec2.world import SCRIPT, Moto, World, env_lines, wait_for

pytestmark = pytest.mark.slow

PROVISIONER = Path(sys.executable).parent / "provisioner"
SLURM_BRIDGE = Path(sys.executable).parent / "provisioner-slurm"
TEMPLATE = "c6i-4x"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """One ``provisioner run`` process serving the provider ``aws``; restarted on the same controller."""

    def __init__(self, world: World) -> None:
        self.world = world
        folder = world.folder
        env_file = folder / "aws.env"
        env_file.write_text(env_lines(world.env()))
        env_file.chmod(0o600)
        self.port = free_port()
        self.config = folder / "provisioner.yaml"
        self.config.write_text(yaml.safe_dump({
            "instance": {"id": "a", "serves": ["aws"], "planner": True},
            "controller": {"url": f"sqlite:///{folder / 'state.db'}"},
            "api": {"listen": f"127.0.0.1:{self.port}"},
            "lease": {"ttl": "3s", "renew_every": "1s"},
            "policy": {"poll_every": "0.25s", "plan_every": "0.25s", "idle_time": "0s", "join_grace": "10m",
                       "cooldown": "1s", "backoff_max": "1s"},
            "providers": [{"name": "aws", "kind": "hosts", "env_file": str(env_file),
                           "script": {"style": "v2", "path": str(SCRIPT), "timeout": "20s"}}],
            "home": str(folder / "home"),
            "slurm": {"nodes": [{"names": "cloud[1-3]", "provider": "aws", "template": TEMPLATE}]},
        }))
        self.log = folder / "daemon.log"
        self.proc: subprocess.Popen | None = None

    def start(self, failpoints: str = "") -> "Daemon":
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.world.folder),
               "PROVISIONER_FAILPOINTS": failpoints}
        self.proc = subprocess.Popen([str(PROVISIONER), "--config", str(self.config), "run"],
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(self._ready, STARTUP, "the daemon's API to answer", tell=self.tail)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"the daemon died:\n{self.tail()}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def cli(self, *args: str) -> str:
        """The ``provisioner`` CLI, as the scheduler or an operator runs it, on the daemon's controller."""
        proc = subprocess.run([str(PROVISIONER), "--config", str(self.config), *args], capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"provisioner {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def resume(self, hostlist: str) -> None:
        """Slurm's ResumeProgram: the bridge records the nodes it wants (no slurm.conf: Slurm's own timeout)."""
        proc = subprocess.run([str(SLURM_BRIDGE), "--config", str(self.config), "resume", hostlist],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                              env={"PATH": "/usr/bin:/bin", "SLURM_CONF": str(self.world.folder / "no-slurm.conf")})
        assert proc.returncode == 0, f"provisioner-slurm resume {hostlist}: {proc.stderr}"

    def bound(self) -> dict[str, str | None]:
        """Machine id -> the node the daemon bound it to, as its facts say (the views do not show it)."""
        controller = open_controller(f"sqlite:///{self.world.folder / 'state.db'}")
        try:
            return {i.machine_id: i.node for i in replay(controller).instances.values()}
        finally:
            controller.close()

    def demand(self, count: int) -> None:
        path = self.world.folder / "demand.json"
        path.write_text(json.dumps({"items": [{"id": "jobs", "kind": "hosts", "count": count, "template": TEMPLATE}]}))
        self.cli("demand", "put", str(path))

    def view(self, name: str) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/{name}?limit=1000", timeout=5) as r:
            return json.loads(r.read())["items"]

    def hosts(self, state: str) -> list[dict[str, Any]]:
        return [i for i in self.view("instances") if i["state"] == state]


@pytest.fixture
def daemon(moto: Moto, tmp_path) -> Iterator[Daemon]:
    """A daemon whose EC2 holds pending and shutting-down a moment, as AWS does."""
    proxy = FaultProxy(moto.url, pending_s=1.0, shutting_down_s=1.0).start()
    d = Daemon(World(moto=moto, folder=tmp_path, proxy=proxy))
    yield d
    d.stop()
    proxy.stop()


def test_lifecycle_through_the_daemon(daemon):
    world = daemon.world
    daemon.start()
    daemon.demand(2)
    running = wait_for(lambda: len(daemon.hosts("running")) == 2 and daemon.hosts("running"), 30,
                       "two running hosts", tell=daemon.tail)
    assert {h["template"] for h in running} == {TEMPLATE}
    ec2 = {i["InstanceId"]: i for i in world.live()}
    assert sorted(ec2) == sorted(h["machine_id"] for h in running)
    assert {h["name"] for h in running} == {i["PrivateDnsName"] for i in ec2.values()}

    for h in running:
        daemon.cli("host", "joined", h["name"])
    daemon.demand(0)
    wait_for(lambda: len(daemon.hosts("joined")) == 2, 15, "both hosts joined")
    for h in running:
        daemon.cli("host", "idle", h["name"])
    wait_for(lambda: len(daemon.hosts("returned")) == 2, 30, "both idle hosts returned", tell=daemon.tail)
    assert {i["State"]["Name"] for i in world.instances()} == {"terminated"}
    assert len(world.instances()) == 2


def test_a_kill_during_run_instances_then_a_restart_makes_one_set_of_instances(daemon):
    world = daemon.world
    daemon.start(failpoints="request.after_script")
    daemon.demand(2)
    # The script answered (its instances exist), the daemon dies before it records the answer.
    wait_for(lambda: daemon.proc.poll() is not None, 30, "the daemon to die at the failpoint",
             tell=daemon.tail)
    assert daemon.proc.returncode == -signal.SIGKILL
    assert len(world.instances()) == 2
    daemon.start()
    wait_for(lambda: len(daemon.hosts("running")) == 2, 30, "the restarted daemon to see two hosts",
             tell=daemon.tail)
    requests = [r for r in daemon.view("requests") if r["action"] == "request"]
    assert len(requests) == 1, "the restart repeats the request it had planned; it plans no other"
    assert requests[0]["provider_request_id"] == f"run:{requests[0]['id']}:2"
    assert len(world.proxy.actions("RunInstances")) == 1, "the repeated token found its instances by tag"
    assert len(world.instances()) == 2, "the repeat launched a second set"
    held = sorted(h["machine_id"] for h in daemon.hosts("running"))
    assert sorted(i["InstanceId"] for i in world.instances()) == held


def test_an_instance_of_ours_unknown_to_the_facts_is_returned_as_an_orphan(daemon):
    world = daemon.world
    daemon.start()
    tags = [{"Key": "provisioner:cluster", "Value": world.cluster}, {"Key": "provisioner-provider", "Value": "aws"}]
    orphan = world.moto.ec2().run_instances(
        ImageId="ami-0123456789abcdef0", InstanceType="c6i.4xlarge", MinCount=1, MaxCount=1,
        SubnetId=world.moto.subnets[0], TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]["InstanceId"]
    wait_for(lambda: [h for h in daemon.hosts("returned") if h["machine_id"] == orphan], 30,
             "the orphan found and returned", tell=daemon.tail)
    assert [i["State"]["Name"] for i in world.instances()] == ["terminated"]


def test_the_daemon_binds_each_named_node_to_the_instance_ec2_named_after_it(daemon):
    world = daemon.world
    daemon.start()
    daemon.resume("cloud[1-3]")
    running = wait_for(lambda: len(daemon.hosts("running")) == 3 and daemon.hosts("running"), 30,
                       "three running hosts", tell=daemon.tail)
    named = {t["Value"]: i["InstanceId"] for i in world.live() for t in i["Tags"] if t["Key"] == "Name"}
    assert sorted(named) == ["cloud1", "cloud2", "cloud3"]
    bound = daemon.bound()
    assert {bound[h["machine_id"]]: h["machine_id"] for h in running} == named, "each node bound to its own host"
    assert {h["name"] for h in running} == set(named), "the host is known by its node's name"
    assert len(world.instances()) == 3 and len(world.proxy.actions("RunInstances")) == 3, "one launch per name"
