"""The controller port: facts, demand, host events, shared-resource totals.

The controller is the system of record. A backend implements ``Controller``
(which also carries a ``LeasePort``); the contract test-suite in
``tests/contract/`` holds every backend to the same behaviour.

Expected outcomes (a stale fence, nothing new yet) are results, not
exceptions; only an unreachable controller raises ``ControllerUnavailable``.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from pydantic import Field

from lease.port import LeasePort
from messages.base import Model
from messages.demand import DemandSnapshot, HostEvent, HostEventKind, SupplySnapshot
from messages.errors import ControllerUnavailable
from messages.facts import Fact

__all__ = [
    "AppendResult",
    "Changes",
    "Controller",
    "ControllerUnavailable",
    "Cursor",
    "DEMAND_HISTORY",
    "RefusedFact",
    "ResourceTotal",
]


#: How long the controller keeps past demand snapshots (35 days: a month of demand, and some).
DEMAND_HISTORY = 35 * 86400.0


class RefusedFact(Model):
    id: str
    lease: str
    fence: int
    reason: str


class AppendResult(Model):
    #: Accepted facts with their store-assigned ``seq``, in log order.
    accepted: list[Fact] = Field(default_factory=list)
    refused: list[RefusedFact] = Field(default_factory=list)


class ResourceTotal(Model):
    """A shared resource's cluster total as the scheduler should see it (docs/config.md, resources)."""

    name: str
    base: int
    borrowed: int
    total: int
    time: float


class Cursor(Model):
    """How far a reader has seen each stream."""

    facts: int = 0
    demand: int = 0
    host_events: int = 0
    supply: int = 0


class Changes(Model):
    cursor: Cursor
    facts: list[Fact] = Field(default_factory=list)
    demand: DemandSnapshot | None = None
    host_events: list[HostEvent] = Field(default_factory=list)
    supply: SupplySnapshot | None = None


class Controller(Protocol):
    leases: LeasePort

    # --- facts ---------------------------------------------------------------
    def append(self, facts: Sequence[Fact]) -> AppendResult:
        """Append facts atomically per lease, in one transaction (group commit).

        A fact whose ``lease`` is non-empty is refused unless that lease is
        currently granted (unexpired) with exactly ``fact.fence``; a refusal of
        one lease's facts does not affect other leases' facts in the batch.
        Facts with ``lease == ""`` are unfenced inputs and always accepted.
        Appending a fact whose id is already stored is a no-op that returns
        the stored fact as accepted (so a retry after an unknown outcome is safe).
        Durable when it returns.
        """

    def read(self, after: int = 0, limit: int = 10_000) -> list[Fact]:
        """Facts with ``seq > after`` in seq order, at most ``limit``."""

    def last_seq(self) -> int:
        """The highest seq stored, 0 when empty."""

    # --- inputs from the scheduler and operators ----------------------------
    def put_demand(self, snapshot: DemandSnapshot) -> DemandSnapshot:
        """Replace the demand; returns it with the controller's ``seq`` (strictly growing) and time."""

    def get_demand(self) -> DemandSnapshot | None:
        """The current demand snapshot, None before the first put."""

    def demand_history(self, since: float, until: float | None = None) -> list[DemandSnapshot]:
        """The demand snapshots put from ``since`` to ``until`` (times), oldest first, with their seq and time.

        Kept for ``DEMAND_HISTORY`` seconds (past demand for the simulator: ``provisioner trace
        export``); a snapshot whose items equal the one kept before it is not kept again.
        """

    def post_host_event(self, name: str, event: HostEventKind, time: float,
                        provider: str | None = None) -> HostEvent:
        """Record a host event (of ``provider``'s host, when the scheduler knows it); returns it with its ``seq``."""

    def read_host_events(self, after: int = 0, limit: int = 10_000) -> list[HostEvent]:
        """Host events with ``seq > after`` in order."""

    def put_supply(self, snapshot: SupplySnapshot) -> SupplySnapshot:
        """Replace the scheduler's view of its hosts; returns it with the controller's ``seq`` and time."""

    def get_supply(self) -> SupplySnapshot | None:
        """The current supply view, None before the first put."""

    def resource_totals(self) -> list[ResourceTotal]:
        """All published totals, by name: each the last ``resource_total_changed`` fact accepted for it.

        There is no other way to change one: a total is published by the append that accepts its
        fact, under the lending provider's lease and fence, so a daemon that lost the lease cannot.
        """

    # --- push -----------------------------------------------------------------
    def changes(self, cursor: Cursor, timeout: float) -> Changes:
        """What is new beyond ``cursor``: facts, the latest demand, host events, the latest supply view.

        Returns as soon as anything is new, or empty (same cursor) after
        ``timeout`` seconds. Facts come at most 10,000 per call, in seq order.
        """

    def close(self) -> None:
        """Release connections; the object is unusable after."""
