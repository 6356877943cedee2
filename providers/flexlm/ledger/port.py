"""The pool ledger: what every borrowing cluster has taken from a shared pool, written before it is used.

A license server cannot be asked to set tokens aside for a cluster, so the
clusters agree among themselves: a grant is a record in a ledger they all
write to, and a grant only exists once its record is committed. Two things
make that safe under concurrency and crashes, and each backend provides both:

- **One atomic step per change.** Reading what the pool has lent, deciding
  how much more fits and writing the grant happen in one transaction (SQLite)
  or one compare-and-swap on the pool's key (etcd). Two clusters asking at the
  same moment are serialized; neither can decide on a stale total.
- **Idempotency by token.** The daemon's token is the record's key (within
  its cluster), so a call repeated after a timeout, a crash or a ``kill -9``
  finds the first call's record instead of borrowing again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Grant:
    cluster: str
    token: str
    pool: str
    resource: str
    #: What the request asked for, what it got, and what it holds now (after returns).
    requested: int
    granted: int
    count: int
    tags: Mapping[str, str] = field(default_factory=dict)
    created: float = 0.0
    #: When the last of its units went back; records that ended long ago are forgotten.
    ended: float | None = None

    @property
    def request_id(self) -> str:
        return f"g-{self.token}"


@dataclass(frozen=True)
class Return:
    cluster: str
    token: str
    pool: str
    resource: str
    #: The units the daemon asked to give back, and what it named (``None``: any of the cluster's grants).
    asked: int
    named: tuple[tuple[str, int | None], ...] | None
    #: ``(grant token, units)`` actually given back.
    takes: tuple[tuple[str, int], ...] = ()
    created: float = 0.0

    @property
    def request_id(self) -> str:
        return f"r-{self.token}"

    @property
    def returned(self) -> int:
        return sum(n for _, n in self.takes)


@dataclass(frozen=True)
class PoolView:
    """One pool as the ledger holds it at the moment of a decision."""

    pool: str
    #: Units each cluster has borrowed now.
    held: Mapping[str, int]
    #: Each borrowing cluster's host globs, as it last registered them: use by these hosts is not "outside".
    hosts: Mapping[str, tuple[str, ...]]

    @property
    def lent(self) -> int:
        return sum(self.held.values())


@dataclass(frozen=True)
class BorrowAsk:
    cluster: str
    token: str
    pool: str
    resource: str
    count: int
    hosts: tuple[str, ...]
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReturnAsk:
    cluster: str
    token: str
    pool: str
    resource: str
    count: int
    named: tuple[tuple[str, int | None], ...] | None


#: Decides, from the pool as it stands inside the atomic step, how many units a new grant gets; raises
#: ``PoolExhausted`` when none fit (and the ledger then writes nothing).
Sizer = Callable[[PoolView], int]


class Ledger(Protocol):
    def borrow(self, ask: BorrowAsk, size: Sizer) -> Grant:
        """The grant for ``ask.token``: the recorded one if the token is known, else a new one of ``size(view)``."""

    def give_back(self, ask: ReturnAsk) -> Return:
        """The return for ``ask.token``: the recorded one if the token is known, else units taken back now."""

    def grant(self, cluster: str, token: str) -> Grant | None: ...

    def returned(self, cluster: str, token: str) -> Return | None: ...

    def grants(self, cluster: str) -> list[Grant]:
        """The cluster's grants that still hold units, oldest first."""

    def close(self) -> None: ...
