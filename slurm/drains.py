"""The daemon's drain requests carried to Slurm: a dynamic node whose host is asked to drain is drained.

The daemon asks for a busy host back only through the scheduler
(``policy.consolidation``, an operator's ``instances drain``): the request
is a fact, read here from the bridge's projection (``policy.consolidation.drains``).
For each dynamic node of such a host that Slurm has not drained yet, the
round sends ``scontrol update nodename=N state=drain reason="provisioner:
consolidating to ..."``. Slurm starts no new job there and lets the jobs
running end; the node is then drained and idle, the round's view lists the
host as idle, and its owner returns it (the drain order waits for exactly
that). Once the host is gone the drained node is deleted, as any drained
dynamic node of ours (``slurm.drift``). No job is ever ended here.

A power-saving node (``slurm.nodes``) is left alone: its host is the
scheduler's to power down, and consolidation never moves one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policy.consolidation import drains
from slurm.drift import REASON, Node, Update, hosts_by_node
from state.projection import Projection

#: Flags of a node that Slurm drains or has drained already.
DRAINED = frozenset({"DRAIN", "DRAINED", "DRAINING"})


def drain_updates(nodes: Iterable[Node], p: Projection, declared: Mapping[str, tuple[str, str]]) -> list[Update]:
    """The ``scontrol update ... state=drain`` of every dynamic node whose host is asked to drain and that
    Slurm has not drained yet."""
    asked = drains(p.open().orders, p.instances)
    if not asked:
        return []
    hosts = hosts_by_node(p)
    out = []
    for n in nodes:
        inst = hosts.get(n.name)
        if inst is None or inst.node or n.name in declared or inst.key not in asked or n.flags & DRAINED:
            continue
        out.append(Update(n.name, (("state", "drain"), ("reason", f"{REASON}: {asked[inst.key]}"))))
    return out
