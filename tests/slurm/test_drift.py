"""One sync round (issue 29): Slurm's nodes crossed with the daemon's hosts, edge by edge; and the service's rounds."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from config.models import SlurmConfig
from messages.facts import InstanceChanged, InstanceSeen, NodesChanged, RequestPlanned
from slurm.drift import Memory, reconcile
from slurm.dynamic import demand, features_select
from state.projection import Projection
from tests.support.policy import T0, feed

CFG = SlurmConfig.model_validate({"nodes": [{"names": "cloud[1-4]", "provider": "aws", "template": "t"}]})
DECLARED = {f"cloud{i}": ("aws", "t") for i in range(1, 5)}


@dataclass(frozen=True)
class N:
    name: str
    state: str = "IDLE"
    flags: frozenset[str] = frozenset({"CLOUD"})
    address: str | None = None
    hostname: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class J:
    partition: str = "dyn"
    state: str = "PENDING"
    reason: str = "Resources"
    node_count: int = 1
    cpus_per_node: int = 2
    memory_per_node: int | None = None
    features: str = ""


def made(p: Projection, node: str, state: str = "running", ip: str = "10.0.0.7", name: str = "ip-10-0-0-7",
         machine: str = "i-1") -> None:
    """A host made for ``node``, wanted, and ``state`` by now."""
    feed(p, "aws", NodesChanged(kind="nodes_resumed", names=[node], template="t"), now=T0)
    feed(p, "aws", RequestPlanned(action="request", supply="hosts", template="t", count=1, names=[node]), now=T0,
         ids=[f"r-{machine}"])
    feed(p, "aws", InstanceSeen(machine_id=machine, name=name, request_id=f"r-{machine}", state="running",
                                private_ip=ip, node=node), now=T0 + 1)
    if state != "running":
        feed(p, "aws", InstanceChanged(kind=f"instance_{state}", machine_id=machine, state=state), now=T0 + 2)


def rnd(nodes, p, memory=Memory(), now=T0 + 10, cfg=CFG, declared=DECLARED):
    return reconcile(nodes, p, cfg, declared, now, memory, idle_time=60)


def test_the_view_lists_up_nodes_of_standing_hosts_idle_or_busy_and_leaves_the_rest_out():
    p = Projection()
    made(p, "cloud1", "idle", machine="i-1")
    made(p, "cloud2", "busy", machine="i-2", ip="10.0.0.8", name="ip-10-0-0-8")
    made(p, "cloud3", machine="i-3", ip="10.0.0.9", name="ip-10-0-0-9")
    r = rnd([N("cloud1", address="10.0.0.7", hostname="ip-10-0-0-7"),
             N("cloud2", "MIXED", address="10.0.0.8", hostname="ip-10-0-0-8"),
             N("cloud3", flags=frozenset({"CLOUD", "POWERING_UP"}), address="10.0.0.9", hostname="ip-10-0-0-9"),
             N("static9")], p)
    assert [(h.name, h.provider, h.state) for h in r.supply.hosts] == [("cloud1", "aws", "idle"),
                                                                        ("cloud2", "aws", "busy")]
    assert r.updates == [] and r.facts == []


def test_a_host_up_is_bound_to_its_node_with_its_address_and_host_name():
    p = Projection()
    made(p, "cloud1")
    (u,) = rnd([N("cloud1", flags=frozenset({"CLOUD", "POWERING_UP"}), address="cloud1")], p).updates
    assert u.argv() == ["update", "nodename=cloud1", "nodeaddr=10.0.0.7", "nodehostname=ip-10-0-0-7"]


def test_a_node_slurm_powered_down_whose_host_stands_is_let_go():
    p = Projection()
    made(p, "cloud1", "idle")
    r = rnd([N("cloud1", flags=frozenset({"CLOUD", "POWERED_DOWN"}))], p)
    ((provider, fact),) = r.facts
    assert (provider, fact.kind, fact.names) == ("aws", "nodes_suspended", ["cloud1"])
    assert r.supply.hosts == [] and "powered down" in r.notes[0]


def test_a_node_up_without_a_host_is_powered_down_on_the_second_round_so_its_jobs_requeue():
    p = Projection()
    made(p, "cloud1", "idle")
    feed(p, "aws", InstanceChanged(kind="instance_lost", machine_id="i-1", state="lost"), now=T0 + 3)
    nodes = [N("cloud1", "ALLOCATED", address="10.0.0.7", hostname="ip-10-0-0-7")]
    first = rnd(nodes, p)
    assert first.updates == [], "one look is not a verdict"
    down, off = rnd(nodes, p, first.memory, now=T0 + 20).updates
    assert down.argv() == ["update", "nodename=cloud1", "state=down", "reason=provisioner: its host is gone"], \
        "DOWN ends its jobs there at once (requeued), where a power down alone leaves them completing"
    assert off.argv() == ["update", "nodename=cloud1", "state=power_down_force", "reason=provisioner: its host is gone"]
    assert rnd([N("cloud1", flags=frozenset({"CLOUD", "POWERING_UP"}))], p, first.memory).updates == [], \
        "a node being resumed has no host yet: no drift"


def test_a_host_for_a_name_slurm_no_longer_lists_goes_after_the_grace():
    p = Projection()
    made(p, "cloud4", "idle", machine="i-4")
    cfg = SlurmConfig.model_validate({"nodes": CFG.model_dump()["nodes"], "undeclared_grace": "5m"})
    first = rnd([N("cloud1")], p, cfg=cfg)
    assert first.facts == []
    assert rnd([N("cloud1")], p, first.memory, now=T0 + 200, cfg=cfg).facts == []
    ((_, fact),) = rnd([N("cloud1")], p, first.memory, now=T0 + 320, cfg=cfg).facts
    assert fact.names == ["cloud4"] and "no longer in Slurm" in fact.reason


def test_a_dynamic_node_idles_as_busy_until_drained_then_is_idle_and_deleted_once_its_host_is_gone():
    cfg = SlurmConfig.model_validate({"partitions": ["dyn"], "drain_after": "30s"})
    p = Projection()
    feed(p, "aws", InstanceSeen(machine_id="i-9", name="h-9", state="running", private_ip="10.0.0.9"), now=T0)
    feed(p, "aws", InstanceChanged(kind="instance_idle", machine_id="i-9", state="idle"), now=T0 + 1)
    node = N("h-9", flags=frozenset({"DYNAMIC_NORM"}), address="10.0.0.9", hostname="h-9")
    first = rnd([node], p, cfg=cfg, declared={})
    assert [(h.name, h.state) for h in first.supply.hosts] == [("h-9", "busy")], "Slurm may start work on it"
    (drain,) = rnd([node], p, first.memory, now=T0 + 45, cfg=cfg, declared={}).updates
    assert drain.argv()[:3] == ["update", "nodename=h-9", "state=drain"]
    drained = N("h-9", flags=frozenset({"DYNAMIC_NORM", "DRAIN"}), address="10.0.0.9", hostname="h-9",
                reason="provisioner: idle for 35s")
    assert [(h.name, h.state) for h in rnd([drained], p, cfg=cfg, declared={}).supply.hosts] == [("h-9", "idle")]
    feed(p, "aws", InstanceChanged(kind="instance_return_planned", machine_id="i-9", state="return_planned"),
         now=T0 + 50)
    feed(p, "aws", InstanceChanged(kind="instance_returning", machine_id="i-9", state="returning"), now=T0 + 51)
    feed(p, "aws", InstanceChanged(kind="instance_returned", machine_id="i-9", state="returned"), now=T0 + 52)
    (delete,) = rnd([drained], p, cfg=cfg, declared={}).updates
    assert delete.argv() == ["delete", "nodename=h-9"]
    running = N("h-9", "ALLOCATED", flags=frozenset({"DYNAMIC_NORM", "DRAIN"}), reason="provisioner: idle")
    assert rnd([running], p, cfg=cfg, declared={}).updates == [], "never a node that runs a job"


def test_pending_jobs_of_the_configured_partitions_become_bundles_one_item_per_shape():
    jobs = [J(), J(), J(node_count=3), J(cpus_per_node=4, memory_per_node=8000, features="ssd&avx512"),
            J(partition="other"), J(state="RUNNING"), J(reason="Dependency"), J(reason="JobHeldUser"),
            J(features="a|b")]
    snapshot, skipped = demand(jobs, ["dyn"])
    assert [(i.id, i.count, i.resources, i.select) for i in snapshot.items] == [
        ("slurm-dyn-2c", 5, {"ncpus": 2}, {}),
        ("slurm-dyn-4c8000m-avx512-ssd", 1, {"ncpus": 4, "mem": 8000}, {"avx512": "true", "ssd": "true"})]
    assert len(skipped) == 1 and "'a|b'" in skipped[0]


@pytest.mark.parametrize(("constraint", "select"), [("", {}), ("gpu", {"gpu": "true"}), ("a&b", {"a": "true",
                                                                                              "b": "true"}),
                                                    ("a|b", None), ("[a|b]", None), ("a*2", None)])
def test_a_constraint_is_a_selector_only_when_it_asks_for_all_of_its_features(constraint, select):
    assert features_select(constraint) == select


def test_a_node_this_bridge_took_down_for_a_lost_host_is_returned_to_service_once_powered_down():
    p = Projection()
    made(p, "cloud1", "idle")
    feed(p, "aws", InstanceChanged(kind="instance_lost", machine_id="i-1", state="lost"), now=T0 + 3)
    ours = "provisioner: its host is gone"
    powering = rnd([N("cloud1", "DOWN", frozenset({"CLOUD", "POWERING_DOWN"}), reason=ours)], p)
    assert powering.updates == [], "still powering down: not yet"
    (u,) = rnd([N("cloud1", "DOWN", frozenset({"CLOUD", "POWERED_DOWN"}), reason=ours)], p).updates
    assert u.argv() == ["update", "nodename=cloud1", "state=resume"]
    slurms = rnd([N("cloud1", "DOWN", frozenset({"CLOUD", "POWERED_DOWN"}), reason="ResumeTimeout reached")], p)
    assert slurms.updates == [], "a node Slurm took down itself is an administrator's to return"
