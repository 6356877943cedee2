"""The daemon's drain requests carried to Slurm (issue 32, consolidation): a dynamic node whose host is asked to
drain is drained by ``scontrol`` while its job runs, reported busy until the job ends, then idle; never twice, and
a power-saving node is left alone."""

from __future__ import annotations

from messages.facts import InstanceChanged, InstanceSeen, Order, RequestPlanned, make_fact
from tests.slurm.test_drift import N
from tests.slurm.test_sync import host_for, world  # noqa: F401  (the fixture)
from tests.support.policy import T0

WHY = "consolidating to cheap/node: saves 0.9/h (1/h to 0.1/h)"
DYN = frozenset({"DYNAMIC_NORM"})


def dynamic_host(controller, machine: str, name: str, state: str = "busy") -> None:
    controller.append([
        make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1), provider="aws", now=T0,
                  fact_id=f"r-{machine}"),
        make_fact(InstanceSeen(machine_id=machine, name=name, request_id=f"r-{machine}", state="running",
                               private_ip="127.0.0.1"), provider="aws", now=T0),
        make_fact(InstanceChanged(kind="instance_joined", machine_id=machine, state="joined"), provider="aws", now=T0),
        make_fact(InstanceChanged(kind=f"instance_{state}", machine_id=machine, state=state), provider="aws", now=T0),
    ])


def drain(controller, machine: str, reason: str = WHY) -> None:
    controller.append([make_fact(Order(action="return", supply="hosts", item_id=f"consolidate/aws/{machine}",
                                       machines=[machine], count=1, when_idle=True, reason=reason),
                                 provider="aws", now=T0 + 1)])


def test_a_busy_dynamic_node_asked_to_drain_is_drained_its_job_left_to_run_then_it_is_idle(world):  # noqa: F811
    sync, controller, slurm, _ = world
    dynamic_host(controller, "i-1", "dyn-1")
    dynamic_host(controller, "i-2", "dyn-2")
    running = N("dyn-1", "ALLOCATED", flags=DYN, address="127.0.0.1", hostname="dyn-1")
    other = N("dyn-2", "ALLOCATED", flags=DYN, address="127.0.0.1", hostname="dyn-2")
    slurm.listed = [running, other]
    sync.round()
    assert slurm.calls == [], "no drain asked: nothing drained"
    drain(controller, "i-1")
    sync.round()
    assert slurm.calls == [["update", "nodename=dyn-1", "state=drain", f"reason=provisioner: {WHY}"]], \
        "only the node asked for, and no delete, no down: its job runs on"
    slurm.calls.clear()
    draining = N("dyn-1", "ALLOCATED", flags=DYN | {"DRAIN"}, address="127.0.0.1", hostname="dyn-1",
                 reason=f"provisioner: {WHY}")
    slurm.listed = [draining, other]
    sync.round()
    assert slurm.calls == [], "drained already: not asked again"
    assert dict((h.name, h.state) for h in controller.get_supply().hosts)["dyn-1"] == "busy", "its job runs"
    drained = N("dyn-1", "IDLE", flags=DYN | {"DRAIN"}, address="127.0.0.1", hostname="dyn-1",
                reason=f"provisioner: {WHY}")
    slurm.listed = [drained, other]
    sync.round()
    assert dict((h.name, h.state) for h in controller.get_supply().hosts)["dyn-1"] == "idle", \
        "its job ended: idle, for its owner to return"
    assert slurm.calls == []


def test_an_operators_drain_is_carried_too_and_a_power_saving_node_is_left_to_slurm(world):  # noqa: F811
    sync, controller, slurm, _ = world
    host_for(controller, "cloud1", "i-1", "10.0.0.7")
    controller.append([make_fact(InstanceChanged(kind="instance_busy", machine_id="i-1", state="busy"),
                                 provider="aws", now=T0 + 1)])
    dynamic_host(controller, "i-2", "dyn-2")
    drain(controller, "i-1", "operator: bad image")
    drain(controller, "i-2", "operator: bad image")
    slurm.listed = [N("cloud1", "ALLOCATED", address="10.0.0.7", hostname="ip-i-1"),
                    N("dyn-2", "MIXED", flags=DYN, address="127.0.0.1", hostname="dyn-2")]
    sync.round()
    assert slurm.calls == [["update", "nodename=dyn-2", "state=drain", "reason=provisioner: operator: bad image"]]


def test_without_dynamic_partitions_the_bridge_drains_nothing(world):  # noqa: F811
    sync, controller, slurm, _ = world
    sync.scfg = sync.scfg.model_copy(update={"partitions": []})
    dynamic_host(controller, "i-1", "dyn-1")
    drain(controller, "i-1")
    slurm.listed = [N("dyn-1", "ALLOCATED", flags=DYN, address="127.0.0.1", hostname="dyn-1")]
    sync.round()
    assert slurm.calls == []


