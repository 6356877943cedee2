"""The scheduler's inputs, placed and sorted for the actors that want them.

Besides facts, the controller holds three things the scheduler writes: its
demand, its view of its hosts (a supply view) and host events. Views and
events name hosts by the scheduler's names; whose host a name is, is read in
the shared projection (``state.host_names``), and an event naming no live
host, or a name live at several providers, is refused (logged and counted
for the metrics), never guessed. Each subscriber is then told what it wants
(``Interest``), an owner only of its own providers' hosts.

This is a part of the journal's feed, called on the journal's thread, not an
actor of its own, because of two orders a second actor could not keep: a
batch's host events are placed once its facts are in the shared projection
(a host recorded in the same batch is found), and a joining planner has the
demand before its ``CaughtUp`` (one that caught up without it would take "no
demand seen yet" for "nothing wanted" and give back what is in use).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from messages.commands import DemandChanged, HostEvents, Interest, SupplyChanged
from messages.demand import DemandSnapshot, HostEvent, SupplySnapshot
from persistence.port import Controller
from state.host_names import place, place_supply
from state.shared import SharedProjection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inputs:
    """The scheduler's inputs of one batch (or as they stand, for a joining subscriber), hosts placed."""

    demand: DemandSnapshot | None = None
    supply: SupplySnapshot | None = None
    events: list[HostEvent] = field(default_factory=list)

    def demand_for(self, wants: Collection[Interest]) -> DemandChanged | None:
        return DemandChanged(demand=self.demand) if self.demand is not None and Interest.DEMAND in wants else None

    def supply_for(self, wants: Collection[Interest]) -> SupplyChanged | None:
        return SupplyChanged(supply=self.supply) if self.supply is not None and Interest.SUPPLY in wants else None

    def events_for(self, wants: Collection[Interest], providers: Collection[str] | None) -> HostEvents | None:
        """The events of ``providers``' hosts (all of them for None): an owner hears only of its own."""
        if Interest.HOST_EVENTS not in wants:
            return None
        events = self.events
        if providers is not None:
            events = [e for e in events if e.provider is None or e.provider in providers]
        return HostEvents(events=events) if events else None


class SchedulerInputs:
    """Places the scheduler's host events and supply views by host name, against the shared projection."""

    def __init__(self, shared: SharedProjection, refused: Counter[str] | None = None) -> None:
        """``refused``: counts host events that name no live host (``unknown``) or a name live at several
        providers (``ambiguous``); the daemon's metrics read it."""
        self.shared = shared
        self.refused: Counter[str] = refused if refused is not None else Counter()

    def fresh(self, demand: DemandSnapshot | None, supply: SupplySnapshot | None,
              events: list[HostEvent]) -> Inputs:
        """A batch from the controller's tail: its refused events are news, logged and counted."""
        return Inputs(demand=demand, supply=self._place_supply(supply) if supply is not None else None,
                      events=self._place(events, fresh=True))

    def current(self, controller: Controller) -> Inputs:
        """The inputs as they stand, for subscribers joining (``ControllerUnavailable`` when unread).

        Every host event is read again; those of hosts long gone name no live host, and their
        refusals say nothing new: they are neither logged nor counted.
        """
        demand = controller.get_demand()
        supply = controller.get_supply()
        return Inputs(demand=demand, supply=self._place_supply(supply) if supply is not None else None,
                      events=self._place(controller.read_host_events(after=0), fresh=False))

    def _place(self, events: list[HostEvent], fresh: bool) -> list[HostEvent]:
        """Each event with the provider whose host it is; those that name none, or several, are refused."""
        if not events:
            return events
        with self.shared.reading() as p:
            found = place(p, events)
        if fresh:
            for ev in found.unknown:
                self.refused["unknown"] += 1
                log.warning("host event %s %s (seq %s) refused: no live host has that name", ev.name, ev.event,
                            ev.seq)
            for ev, providers in found.ambiguous:
                self.refused["ambiguous"] += 1
                log.error("host event %s %s (seq %s) refused: the name is live at providers %s; the scheduler "
                          "must name the provider", ev.name, ev.event, ev.seq, ", ".join(providers))
        return found.placed

    def _place_supply(self, view: SupplySnapshot) -> SupplySnapshot:
        """The scheduler's view with each host's provider named (see ``state.host_names``)."""
        with self.shared.reading() as p:
            placed, ambiguous = place_supply(p, view)
        for name, providers in ambiguous:
            log.error("supply view %d: host %s left out: the name is live at providers %s; the scheduler must "
                      "name the provider", view.seq, name, ", ".join(providers))
        return placed
