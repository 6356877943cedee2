"""The ownership-lease port.

A lease names one role ("provider:aws-east", "planner"), one holder (a daemon
instance id) and a fencing token, ``fence``, that only ever grows: every new
grant of the lease to anyone gets a larger fence than any grant before it,
even after a release or an expiry. Facts are written under a fence and the
fact store rejects them once that fence is no longer current, so a paused or
partitioned former owner can never overwrite its successor.

Backends keep leases outside the fact log (see docs/architecture.md): the
fence in each fact is enough to start new epochs above any fence ever used.

Methods return results instead of raising for the expected outcomes (held by
someone else, lost); they raise only ``ControllerUnavailable`` when the
controller cannot be reached at all
(``messages.errors``).
"""

from __future__ import annotations

from typing import Iterable, Protocol

from messages.base import Model

#: The planner role's lease.
PLANNER = "planner"
#: A provider's lease is ``provider:<name>``.
PROVIDER = "provider:"
#: A daemon process's lease is ``instance:<id>``, held by that one process (``actors.lease``).
INSTANCE = "instance:"


class Lease(Model):
    name: str
    holder: str
    fence: int
    #: Controller clock (epoch seconds) after which the lease is void unless renewed.
    expires_at: float


class LeaseRecord(Model):
    """One row of the lease table as read at one moment: a current grant, a lapsed one, or a release.

    Times are seconds from that reading, by the controller clock, so a reader
    on any host and with any clock of its own can use them (a lapse moment is
    its own now plus ``expires_in``). A lapsed record is a holder that stopped
    renewing without giving the lease up (killed, frozen, cut off): nobody
    has taken the lease since.
    """

    name: str
    #: The holder of the grant; "" once released.
    holder: str
    fence: int
    #: Seconds until the grant lapses, negative once it has; None once released, or where the controller
    #: clock it counts by is not the reader's (a lease of an earlier boot of an SQLite host).
    expires_in: float | None
    #: Seconds since the grant was made (renewals keep it); None where not known (granted by an older
    #: version, or in an earlier boot) and once released.
    granted_ago: float | None

    @property
    def held(self) -> bool:
        """Whether the grant is current."""
        return bool(self.holder) and self.expires_in is not None and self.expires_in > 0

    @property
    def lapsed(self) -> bool:
        """Whether a holder let the grant run out without releasing it."""
        return bool(self.holder) and not self.held

    @property
    def free_in(self) -> float:
        """Seconds until anyone may be granted the lease: 0 when it is free now."""
        return self.expires_in if self.held and self.expires_in is not None else 0.0


def free_in(table: Iterable[LeaseRecord], names: Iterable[str]) -> float | None:
    """Seconds until the first of ``names`` that is held now lapses, by ``table``; None if none is held.

    What a standby waiting for those leases needs to ask again the moment one
    frees, instead of at its next round.
    """
    wanted = set(names)
    waits = [record.free_in for record in table if record.name in wanted and record.held]
    return min(waits) if waits else None


class LeasePort(Protocol):
    def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        """Grant ``name`` to ``holder`` if it is free or expired; None if another holds it.

        Asking again while holding it renews it (same fence). A new grant gets a
        fence larger than every earlier grant of that name.
        """

    def acquire_all(self, names: list[str], holder: str, ttl: float) -> list[Lease | None]:
        """``acquire`` for each name, in order, in one round trip where the backend can.

        A daemon starting with a thousand providers asks for a thousand
        leases; one by one, that took it most of a minute.
        """

    def renew(self, lease: Lease, ttl: float) -> Lease | None:
        """Extend a lease still held under the same fence; None if it expired or was lost.

        An expired lease is never revived: its holder must acquire again and
        gets a new fence, because facts under the old one were already refused.
        """

    def renew_all(self, leases: list[Lease], ttl: float) -> list[Lease | None]:
        """``renew`` for each lease, in order, in one round trip where the backend can.

        A daemon serving a thousand providers renews a thousand leases each
        round; one by one, the round could outlast the TTL.
        """

    def release(self, lease: Lease) -> bool:
        """Give the lease up now (keeps its fence history); False if it was not held."""

    def get(self, name: str) -> Lease | None:
        """The current, unexpired grant of ``name``, if any."""

    def all(self) -> list[Lease]:
        """Every current, unexpired grant."""

    def table(self) -> list[LeaseRecord]:
        """Every record, by name: current grants, lapsed ones and releases (a backend that deletes a lapsed
        record by itself, as etcd does with a dead holder's keys, keeps it only until then)."""
