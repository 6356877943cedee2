"""One sync round: Slurm's nodes crossed with the daemon's hosts, as what to send and what to fix.

Pure: given the nodes Slurm lists, the facts (a projection), the config and
the time, ``reconcile`` says what the round does, and ``slurm.sync`` does it.
A node is the daemon's when the config declares it (power saving:
``slurm.nodes``) or when a live host of the daemon's has its name (dynamic
nodes register under their host's name). For those:

- **the scheduler's view**: a node up and idle is an idle host, one running
  work (allocated, mixed, completing) a busy one; a node powering up, down
  or not responding is not listed (a host not yet listed is not idle). With
  dynamic nodes an idle node counts as busy until it is drained and empty:
  Slurm may start work on it any moment, so only a drained node may go back;
- **binding**: a host up (running, or serving) is bound to its node with its
  address and host name, once Slurm's differ (``scontrol update nodename=N
  nodeaddr=A nodehostname=H``);
- **drift** (the states of slurm-gcp's sync, with facts behind them):
  - a node Slurm has powered down whose host still stands: its suspend was
    missed (a SuspendProgram that failed): the name is let go
    (``nodes_suspended``) and its host returned;
  - a node Slurm counts as up whose host is gone (lost, returned, never
    made), for two rounds in a row: Slurm is told (``state=power_down_force``
    with a reason), so its jobs are requeued and it can be resumed afresh;
  - a host made for a name Slurm no longer lists (taken out of slurm.conf):
    let go after ``slurm.undeclared_grace``;
- **dynamic nodes**: a node idle for ``slurm.drain_after`` is drained; a
  drained node whose host is gone is deleted (``scontrol delete``); an
  idle node warm capacity holds (``slurm.warm``) is listed idle and not
  drained (one drained for idling is resumed).

Nothing here ever lets go of a node that runs a job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from config.models import SlurmConfig
from messages.demand import SupplyHost, SupplySnapshot
from messages.facts import NodesChanged, Payload
from messages.records import InstanceRecord
from slurm.warm import WarmHold
from state.projection import Projection

#: Base states of a node that runs work.
WORKING = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
#: Flags of a node that is not up, whatever its base state.
NOT_UP = frozenset({"POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "POWER_DOWN", "NOT_RESPONDING"})
#: Host states that stand for a node: made, and not on their way out.
STANDING = frozenset({"requested", "provisioning", "running", "joined", "idle", "busy"})
#: Host states in which it is up and can be bound to its node.
UP = frozenset({"running", "joined", "idle", "busy"})
#: What the bridge writes as a node's reason, so a drain it made is known as its own.
REASON = "provisioner"
#: The reason this bridge gives a node it takes down because its host is gone.
HOST_GONE = f"{REASON}: its host is gone"
#: The reason this bridge gives a dynamic node it drains for idling (``slurm.drain_after``).
IDLE_DRAIN = f"{REASON}: idle"


class Node(Protocol):
    """What a round reads of one of Slurm's nodes (``slurm.formats``)."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def flags(self) -> frozenset[str]: ...
    @property
    def address(self) -> str | None: ...
    @property
    def hostname(self) -> str | None: ...
    @property
    def reason(self) -> str: ...


@dataclass(frozen=True)
class Update:
    """One ``scontrol update nodename=...`` (``fields`` in its order) or ``scontrol delete nodename=...``."""

    node: str
    fields: tuple[tuple[str, str], ...] = ()
    delete: bool = False

    def argv(self) -> list[str]:
        if self.delete:
            return ["delete", f"nodename={self.node}"]
        return ["update", f"nodename={self.node}", *(f"{k}={v}" for k, v in self.fields)]


@dataclass(frozen=True)
class Memory:
    """What earlier rounds saw, kept by the service (memory only: a restarted bridge looks afresh, which only
    delays a verdict)."""

    #: node -> rounds in a row it was up with no host
    hostless: Mapping[str, int] = field(default_factory=dict)
    #: node -> when a host of ours was first seen whose name Slurm does not list
    undeclared: Mapping[str, float] = field(default_factory=dict)
    #: dynamic node -> since when it has been idle (not drained)
    idle_since: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Round:
    supply: SupplySnapshot
    updates: list[Update]
    #: (provider, payload): facts to write, unfenced
    facts: list[tuple[str, Payload]]
    #: lines for the log
    notes: list[str]
    memory: Memory


def hosts_by_node(p: Projection, providers: Iterable[str] | None = None) -> dict[str, InstanceRecord]:
    """The daemon's live hosts by the name Slurm knows them by (their node's, else their own)."""
    out: dict[str, InstanceRecord] = {}
    for provider in (providers if providers is not None else list(p.parts)):
        for key in p.part(provider).live_instances:
            inst = p.instances[key]
            out[inst.host] = inst
    return out


def reconcile(nodes: Iterable[Node], p: Projection, cfg: SlurmConfig, declared: Mapping[str, tuple[str, str]],
              now: float, memory: Memory, idle_time: float = 600.0, warm: WarmHold | None = None) -> Round:
    """The round's view, updates and facts. ``declared``: the config's power-saving nodes (name -> provider,
    template). With ``cfg.partitions`` (dynamic nodes), a node of a live host's own name is a dynamic node;
    ``warm``: the warm rules, for which idle dynamic nodes are held ready (``slurm.warm``)."""
    nodes = list(nodes)
    hosts = hosts_by_node(p)
    held = warm.held(_idle_dynamic(nodes, hosts, cfg, declared), p, now) if warm else set()
    listed = {n.name for n in nodes}
    view: list[SupplyHost] = []
    updates: list[Update] = []
    facts: list[tuple[str, Payload]] = []
    notes: list[str] = []
    hostless: dict[str, int] = {}
    idle_since: dict[str, float] = {}
    let_go: dict[str, list[str]] = {}
    drain_after = cfg.drain_after if cfg.drain_after is not None else idle_time
    for n in nodes:
        inst = hosts.get(n.name)
        is_dynamic = bool(cfg.partitions) and inst is not None and not inst.node and n.name not in declared
        if n.name not in declared and not is_dynamic:
            if inst is None and n.reason.startswith(REASON) and n.flags & {"DRAIN", "DRAINED"} \
                    and n.state not in WORKING and "DRAINING" not in n.flags:
                updates.append(Update(n.name, delete=True))  # a dynamic node of ours whose host is gone
            continue
        up = not (n.flags & NOT_UP) and n.state not in ("DOWN", "FUTURE", "UNKNOWN")
        powered_down = bool(n.flags & {"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"})
        standing = inst is not None and inst.state in STANDING
        node = p.nodes.get(n.name)
        # --- the view
        if up and standing:
            if n.state in WORKING or "DRAINING" in n.flags:
                view.append(SupplyHost(name=n.name, provider=inst.provider, state="busy"))
            elif n.state == "IDLE":
                drained = "DRAIN" in n.flags or "DRAINED" in n.flags
                if is_dynamic and n.name in held:
                    # Held ready for warm capacity: idle, and not drained (its idle time still counts); one this
                    # bridge drained for idling is taken back into service.
                    idle_since[n.name] = memory.idle_since.get(n.name, now)
                    view.append(SupplyHost(name=n.name, provider=inst.provider, state="idle"))
                    if drained:
                        updates.append(Update(n.name, (("state", "resume"),)))
                elif is_dynamic and not drained:
                    first = idle_since[n.name] = memory.idle_since.get(n.name, now)
                    view.append(SupplyHost(name=n.name, provider=inst.provider, state="busy"))
                    if now - first >= drain_after:
                        updates.append(Update(n.name, (("state", "drain"),
                                                       ("reason", f"{IDLE_DRAIN} for {now - first:.0f}s"))))
                else:
                    view.append(SupplyHost(name=n.name, provider=inst.provider, state="idle"))
        # --- binding
        if inst is not None and inst.state in UP and not powered_down and inst.private_ip and (
                n.address != inst.private_ip or n.hostname != inst.name):
            updates.append(Update(n.name, (("nodeaddr", inst.private_ip), ("nodehostname", inst.name))))
        # --- drift
        if powered_down and standing and node is not None and node.wanted and inst is not None \
                and inst.node == n.name:
            let_go.setdefault(inst.provider, []).append(n.name)
            notes.append(f"node {n.name}: Slurm has it powered down, yet its host {inst.name} stands: given back")
        if up and not standing and n.name in declared:
            rounds = hostless[n.name] = memory.hostless.get(n.name, 0) + 1
            if rounds >= 2:
                # DOWN first: it requeues the node's jobs and ends them there at once, where a power down
                # alone leaves them completing until Slurm hears from a slurmd that is gone. Then powered down,
                # so that it can be resumed afresh (below).
                why = ("reason", HOST_GONE)
                updates += [Update(n.name, (("state", "down"), why)),
                            Update(n.name, (("state", "power_down_force"), why))]
                notes.append(f"node {n.name}: Slurm counts it up, but it has no host: taken down, its jobs "
                             "requeued, and powered down")
                hostless.pop(n.name)
        if n.state == "DOWN" and "POWERED_DOWN" in n.flags and n.reason == HOST_GONE and not standing \
                and n.name in declared:
            # Taken down by this bridge for a lost host and now powered down: back to idle~, for Slurm to resume
            # when it wants it. A node Slurm took down itself (ResumeTimeout) is left to an administrator.
            updates.append(Update(n.name, (("state", "resume"),)))
            notes.append(f"node {n.name}: powered down after its host was lost: returned to service (idle~)")
    undeclared: dict[str, float] = {}
    for name, inst in hosts.items():
        if not inst.node or name in listed or inst.state not in STANDING:
            continue
        node = p.nodes.get(name)
        if node is None or not node.wanted:
            continue
        first = undeclared[name] = memory.undeclared.get(name, now)
        if now - first >= cfg.undeclared_grace:
            let_go.setdefault(inst.provider, []).append(name)
            notes.append(f"node {name}: Slurm no longer lists it (slurm.conf): its host {inst.name} is given back")
            undeclared.pop(name)
    for provider, names in sorted(let_go.items()):
        facts.append((provider, NodesChanged(kind="nodes_suspended", names=sorted(names),
                                             reason="the Slurm bridge's sync: " + _why(names, listed))))
    return Round(SupplySnapshot(hosts=view), updates, facts, notes, Memory(hostless, undeclared, idle_since))


def _idle_dynamic(nodes: Iterable[Node], hosts: Mapping[str, InstanceRecord], cfg: SlurmConfig,
                  declared: Mapping[str, tuple[str, str]]) -> list[InstanceRecord]:
    """The standing hosts of dynamic nodes that are up and idle, not drained or drained by this bridge for
    idling: what warm capacity may hold."""
    out = []
    for n in nodes:
        inst = hosts.get(n.name)
        drained = bool(n.flags & {"DRAIN", "DRAINED"})
        if cfg.partitions and inst is not None and not inst.node and n.name not in declared \
                and inst.state in STANDING and n.state == "IDLE" and not n.flags & NOT_UP \
                and (not drained or n.reason.startswith(IDLE_DRAIN)):
            out.append(inst)
    return out


def _why(names: list[str], listed: set[str]) -> str:
    if all(n in listed for n in names):
        return "powered down in Slurm while its host stood"
    return "no longer in Slurm's nodes"
