"""Whose host an event names: two providers may each make a host of the same name.

A host event names its host as the provider reported it, or, for a host
made for a scheduler's named node, by that node's name (``InstanceRecord.host``). When it names the
provider too, it belongs there. When it does not, the name must be live at
one provider only: applied to two, one join would mark both hosts joined and
let the one that never joined escape its ``join_timeout``; so an event whose
name is live at several providers, or at none, is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from messages.demand import HostEvent, SupplySnapshot
from state.projection import Projection


@dataclass
class Placed:
    """Events with the provider each belongs to, and those that belong nowhere or to more than one."""

    placed: list[HostEvent] = field(default_factory=list)
    unknown: list[HostEvent] = field(default_factory=list)
    #: (event, the providers its name is live at)
    ambiguous: list[tuple[HostEvent, list[str]]] = field(default_factory=list)


def live_providers(p: Projection, names: Iterable[str]) -> dict[str, list[str]]:
    """For each name, the providers where a live host has it (one pass over the live hosts)."""
    wanted = set(names)
    out: dict[str, list[str]] = {name: [] for name in wanted}
    if not wanted:
        return out
    instances = p.instances
    for key in p.live_keys():
        inst = instances[key]
        host = inst.host
        if host in wanted and inst.provider not in out[host]:
            out[host].append(inst.provider)
    return out


def place(p: Projection, events: Sequence[HostEvent]) -> Placed:
    """Each event's provider: the one it names, or the only one its name is live at."""
    out = Placed()
    where = live_providers(p, (e.name for e in events if e.provider is None))
    for event in events:
        if event.provider is not None:
            out.placed.append(event)
            continue
        providers = where[event.name]
        if len(providers) == 1:
            out.placed.append(event.model_copy(update={"provider": providers[0]}))
        elif providers:
            out.ambiguous.append((event, sorted(providers)))
        else:
            out.unknown.append(event)
    return out


def place_supply(p: Projection, view: SupplySnapshot) -> tuple[SupplySnapshot, list[tuple[str, list[str]]]]:
    """The view with each host's provider named; hosts whose name is live at several providers are left out
    (returned with those providers), as are names no live host has (hosts the daemon did not make)."""
    where = live_providers(p, (h.name for h in view.hosts if h.provider is None))
    hosts, ambiguous = [], []
    for h in view.hosts:
        if h.provider is not None:
            hosts.append(h)
        elif len(where[h.name]) == 1:
            hosts.append(h.model_copy(update={"provider": where[h.name][0]}))
        elif where[h.name]:
            ambiguous.append((h.name, sorted(where[h.name])))
    return view.model_copy(update={"hosts": hosts}), ambiguous
