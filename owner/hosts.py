"""The cluster's side of an owner's hosts: host events from the scheduler, and hosts that never join."""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable

from messages.demand import HostEventKind
from messages.facts import InstanceChanged, Payload
from messages.records import InstanceRecord
from messages.states import AWAITING_JOIN, INSTANCE, InstanceState
from owner.effects import NOTHING, Effects, Notes, OrderTaken, ReturnPlanned, write
from owner.settings import OwnerSettings
from state.projection import Projection

#: (the host's record, the event, the event's seq in the controller: None when it has none)
HostEvent = tuple[InstanceRecord, HostEventKind, "int | None"]


def host_events(s: OwnerSettings, events: Iterable[HostEvent], said: str = "host event",
                being_returned: Container[str] = ()) -> Effects:
    """Each event moves its host along the instance machine, where the table allows.

    ``said``: who said so, for the reason (a host event, or the scheduler's view of its hosts).
    A host seen ``provisioning`` that is reported idle or busy joined before a
    status poll saw it running: it goes through ``joined``. An event that the
    table does not allow from where the host is (a late ``busy`` for a host
    being returned) changes nothing; nor does one for a host a return being
    written moves to ``return_planned`` (``being_returned``): read against the
    state it leaves, it would be written after the return, a step the table refuses.
    """
    expected: dict[str, InstanceState] = {}
    payloads: list[Payload] = []
    for inst, event, seq in events:
        if inst.machine_id in being_returned:
            continue
        state = expected.get(inst.machine_id, inst.state)
        steps: list[InstanceState] = ["joined", event] if state == "provisioning" and event != "joined" else [event]
        for step in steps:
            if step == state or not INSTANCE.allowed(state, step):
                continue
            payloads.append(InstanceChanged.to(step, inst.machine_id, reason=f"{said} {event}", event_seq=seq))
            state = step
        expected[inst.machine_id] = state
    return write(Notes("host-events"), payloads)


def being_returned(p: Projection, busy: Collection[object]) -> set[str]:
    """Machines that a return's write under way moves to ``return_planned`` (read from its slot)."""
    out: set[str] = set()
    for slot in busy:
        if isinstance(slot, ReturnPlanned):
            out.update(slot.ids)
        elif isinstance(slot, OrderTaken) and (o := p.orders.get(slot.order_id)) is not None \
                and o.order.action == "return":
            out.update(o.order.machines)
    return out


def watch_joins(p: Projection, s: OwnerSettings, now: float, busy: Collection[object] = ()) -> Effects:
    """A host that never joins within join_timeout is an orphan: paid for, serving no one.

    A host made for a scheduler's named node waits as long as the scheduler does for it (the node's
    ``join_timeout``, Slurm's ResumeTimeout), when that is shorter: the scheduler gives up on it then.
    """
    if Notes("join-timeouts") in busy:
        return NOTHING
    payloads: list[Payload] = []
    for inst in p.instances_in(*AWAITING_JOIN, provider=s.name):
        limit, what = s.policy.join_timeout, "join_timeout"
        node = p.nodes.get(inst.node) if inst.node else None
        if node is not None and node.join_timeout is not None and node.join_timeout < limit:
            limit, what = node.join_timeout, f"the scheduler's wait for node {node.name}"
        if now - inst.seen_at > limit:
            payloads.append(InstanceChanged.to("orphaned", inst.machine_id,
                                               reason=f"never joined within {what} {limit:.0f}s"))
    return write(Notes("join-timeouts"), payloads)
