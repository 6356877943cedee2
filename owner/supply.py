"""The scheduler's view of its hosts: it corrects host events that were lost.

Each scheduling session the scheduler may send its whole view of the hosts
made for it (``PUT /v1/supply``): each host's name and whether work runs on
it. A host event can be lost (a scheduler restarted between two events, a
daemon stopped while hosts were busy); the view cannot, since the next one
says it all again. So a host the view lists as idle is idle, and as busy is
busy, whatever the last event said. A joined host the view no longer lists
serves no one: after ``policy.unlisted_grace`` (a view may be a moment
behind a join) it is handled as idle, and so returned after its idle time
(``policy.orphans: return``), or reported as an orphan (``report``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from messages.demand import SupplySnapshot
from messages.facts import InstanceChanged, Payload
from messages.states import INSTANCE, SERVING
from owner.effects import NOTHING, Effects, Notes, write
from owner.hosts import HostEvent, being_returned, host_events
from owner.settings import OwnerSettings
from state.projection import Projection


@dataclass(frozen=True)
class Unlisted:
    """Since when each serving host has been missing from the views (memory only: a new owner
    counts afresh from the next view, which only delays a verdict)."""

    since: dict[str, float] = field(default_factory=dict)


def hosts_of(s: OwnerSettings, view: SupplySnapshot | None) -> dict[str, Literal["idle", "busy"]]:
    """The view's hosts of this provider: name -> idle or busy (the journal names each host's provider)."""
    if view is None:
        return {}
    return {h.name: h.state for h in view.hosts if h.provider in (None, s.name)}


def correct(p: Projection, s: OwnerSettings, view: SupplySnapshot, now: float,
            unlisted: Unlisted, busy: Collection[object] = ()) -> tuple[Effects, Unlisted]:
    """What the view says of this provider's hosts, as facts; and who is still missing from it.

    ``busy``: the owner's writes under way (a host a return being written moves on is left alone).
    """
    listed = hosts_of(s, view)
    by_name = p.live_by_name(s.name)
    returning = being_returned(p, busy)
    events: list[HostEvent] = [(inst, state, None) for name, state in listed.items()
              if (inst := by_name.get(name)) is not None and inst.state != state
              and inst.state not in ("return_planned", "returning")]
    fx = host_events(s, events, said="the scheduler's view says", being_returned=returning)
    seen_at = view.time if view.time is not None else now
    since: dict[str, float] = {}
    payloads: list[Payload] = []
    for inst in p.instances_in(*sorted(SERVING), provider=s.name):
        if inst.host in listed or (inst.joined_at is not None and inst.joined_at > seen_at) \
                or inst.machine_id in returning:
            continue  # in the view, joined after it was made, or on its way back
        first = since[inst.machine_id] = unlisted.since.get(inst.machine_id, seen_at)
        if now - first < s.policy.unlisted_grace:
            continue
        why = f"not in the scheduler's view for {now - first:.0f}s (unlisted_grace)"
        if s.policy.orphans == "report":
            payloads.append(InstanceChanged.to("orphaned", inst.machine_id, reason=why))
            del since[inst.machine_id]
        elif inst.state != "idle" and INSTANCE.allowed(inst.state, "idle"):
            payloads.append(InstanceChanged.to("idle", inst.machine_id,
                                               reason=why))
    return fx + (write(Notes("host-events"), payloads) if payloads else NOTHING), Unlisted(since)
