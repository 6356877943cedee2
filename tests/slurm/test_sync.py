"""The sync service's rounds (issue 29) against a real SQLite controller and a fake Slurm: what reaches the
controller, and that a round that could not read Slurm or the controller sends nothing."""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from config.load import load_config
from messages.facts import InstanceSeen, NodesChanged, RequestPlanned, make_fact
from persistence.controller import open_controller
from slurm.sync import SlurmError, Sync
from tests.slurm.test_drift import J, N
from tests.support.policy import T0

CONFIG = """
instance: {id: a, serves: [aws], planner: true}
controller: {url: "sqlite:///%s"}
providers:
  - {name: aws, kind: hosts, script: {style: v2, path: /bin/true}}
policy: {idle_time: 60s}
slurm:
  nodes:
    - {names: "cloud[1-4]", provider: aws, template: t}
  partitions: [dyn]
"""


@dataclass
class FakeSlurm:
    """Slurm's commands as a test says they answer; records every scontrol call."""
    listed: list = field(default_factory=list)
    pending: list = field(default_factory=list)
    broken: str = ""
    calls: list = field(default_factory=list)
    refuse_updates: bool = False

    def nodes(self):
        if self.broken == "nodes":
            raise SlurmError("sinfo --json: timed out after 10s")
        return self.listed

    def jobs(self):
        if self.broken == "jobs":
            raise SlurmError("squeue --json: exit 1: slurm_load_jobs error: Unable to contact slurm controller")
        return self.pending

    def scontrol(self, args):
        self.calls.append(args)
        if self.refuse_updates:
            raise SlurmError("scontrol update: exit 1: Invalid node name specified")


@pytest.fixture
def world(tmp_path: Path):
    path = tmp_path / "provisioner.yaml"
    path.write_text(textwrap.dedent(CONFIG % (tmp_path / "state.db")))
    cfg = load_config(path, check_files=False)
    controller = open_controller(cfg.controller.url)
    slurm = FakeSlurm()
    now = [T0 + 10]
    yield Sync(cfg, controller, slurm, clock=lambda: now[0]), controller, slurm, now
    controller.close()


def host_for(controller, node: str, machine: str, ip: str) -> None:
    controller.append([
        make_fact(NodesChanged(kind="nodes_resumed", names=[node], template="t"), provider="aws", now=T0),
        make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1, names=[node]),
                  provider="aws", now=T0, fact_id=f"r-{machine}"),
        make_fact(InstanceSeen(machine_id=machine, name=f"ip-{machine}", request_id=f"r-{machine}",
                               state="running", private_ip=ip, node=node), provider="aws", now=T0 + 1),
    ])


def test_a_round_sends_the_view_binds_the_host_and_puts_demand_only_when_it_changes(world):
    sync, controller, slurm, _ = world
    host_for(controller, "cloud1", "i-1", "10.0.0.7")
    slurm.listed = [N("cloud1", address="10.0.0.7", hostname="ip-i-1"), N("cloud2", flags=frozenset({"CLOUD",
                                                                                                     "POWERED_DOWN"}))]
    slurm.pending = [J(), J(), J(partition="other")]
    sync.round()
    assert [(h.name, h.state) for h in controller.get_supply().hosts] == [("cloud1", "idle")]
    (item,) = controller.get_demand().items
    assert item.count == 2 and item.resources == {"ncpus": 2}
    first = controller.get_demand()
    slurm.listed = [N("cloud1", "ALLOCATED", address="10.0.0.7", hostname="ip-i-1")]
    sync.round()
    assert [(h.name, h.state) for h in controller.get_supply().hosts] == [("cloud1", "busy")]
    assert controller.get_demand() == first, "the same demand was put again"
    slurm.pending = []
    sync.round()
    assert controller.get_demand().items == []


def test_a_host_up_but_unbound_is_bound_with_scontrol(world):
    sync, controller, slurm, _ = world
    host_for(controller, "cloud2", "i-2", "10.0.0.8")
    slurm.listed = [N("cloud2", flags=frozenset({"CLOUD", "POWERING_UP"}), address="cloud2", hostname="cloud2")]
    sync.round()
    assert slurm.calls == [["update", "nodename=cloud2", "nodeaddr=10.0.0.8", "nodehostname=ip-i-2"]]


@pytest.mark.parametrize("broken", ["nodes", "jobs"])
def test_a_round_that_cannot_read_slurm_sends_nothing(world, broken, caplog):
    sync, controller, slurm, _ = world
    host_for(controller, "cloud1", "i-1", "10.0.0.7")
    slurm.listed = [N("cloud1", address="10.0.0.7", hostname="ip-i-1")]
    sync.round()
    before = controller.get_supply()
    seq = controller.last_seq()
    slurm.broken, slurm.listed = broken, []
    caplog.set_level(logging.ERROR, logger="provisioner-slurm")
    assert sync.round() is None
    assert controller.get_supply() == before, "a view that was not read was sent"
    assert controller.last_seq() == seq
    assert "Slurm could not be read, nothing sent this round" in caplog.text


def test_a_drifted_node_is_recorded_as_a_fact_and_a_failed_scontrol_is_logged_not_fatal(world, caplog):
    sync, controller, slurm, now = world
    slurm.refuse_updates = True
    slurm.listed = [N("cloud3", address="10.9.9.9", hostname="gone")]  # Slurm counts it up; no host stands
    controller.append([make_fact(NodesChanged(kind="nodes_resumed", names=["cloud3"], template="t"),
                                 provider="aws", now=T0)])
    caplog.set_level(logging.ERROR, logger="provisioner-slurm")
    sync.round()
    now[0] += 30
    r = sync.round()
    assert [u.argv()[:3] for u in r.updates] == [["update", "nodename=cloud3", "state=down"],
                                                 ["update", "nodename=cloud3", "state=power_down_force"]]
    assert "Invalid node name specified" in caplog.text
    now[0] += 30
    assert sync.round() is not None, "the service goes on after a refused update"
