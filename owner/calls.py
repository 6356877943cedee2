"""The calls an owner makes to its provider, named by what they are for, and the port that makes them.

Each call carries a purpose: a small frozen value saying why it is made and
holding what its answer will be read against (which requests a status poll
asked about, when a list was taken). An owner has at most one call of each
``slot`` under way: one poll, one list, one call per request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from messages.scripts import Action, ScriptResult


class _OneAtATime:
    """A purpose of which one call at a time is under way, whatever it carries: its slot is its type."""

    __slots__ = ()

    @property
    def slot(self) -> object:
        return type(self)


@dataclass(frozen=True, slots=True)
class Describe(_OneAtATime):
    """The provider's ``describe``: its templates or pools, prices and limits."""


@dataclass(frozen=True, slots=True)
class Carry:
    """The ``request`` or ``return`` script of one request record, under the record's id as token."""

    request_id: str

    @property
    def slot(self) -> object:
        return (Carry, self.request_id)


@dataclass(frozen=True, slots=True)
class Poll(_OneAtATime):
    """``status`` of the requests still under way; ``ids``: the provider's request id -> ours."""

    ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class List(_OneAtATime):
    """``list``: everything the provider holds for us, taken at ``started`` (the orphan search)."""

    started: float


@dataclass(frozen=True, slots=True)
class ScanStatus(_OneAtATime):
    """The orphan search of a provider without ``list``: ``status`` of every request it ever accepted."""

    ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CheckReclaims(_OneAtATime):
    """``reclaims``: which of the hosts we hold the provider takes back."""


@dataclass(frozen=True, slots=True)
class ReadUsage:
    """``usage`` of one resource at its source (the license server)."""

    resource: str

    @property
    def slot(self) -> object:
        return (ReadUsage, self.resource)


@dataclass(frozen=True, slots=True)
class CheckUse:
    """``usage`` of a resource read right before a units return is called, once the total the scheduler
    reads leaves the return's units out: the return goes ahead only if the use fits in what stays.

    It holds the slot of the return's own call: one or the other is under way, never both.
    """

    request_id: str
    resource: str

    @property
    def slot(self) -> object:
        return (Carry, self.request_id)


Purpose = Describe | Carry | CheckUse | Poll | List | ScanStatus | CheckReclaims | ReadUsage


@dataclass(frozen=True, slots=True)
class Call:
    purpose: Purpose
    action: Action
    document: dict[str, Any]
    #: The idempotency token of a mutating call (the record's id); None for the others.
    token: str | None = None


@dataclass(frozen=True, slots=True)
class CallDone:
    """A call's result, delivered to the owner that made it."""

    call: Call
    result: ScriptResult


class ProviderCalls(Protocol):
    """The port an owner's calls go through: the live script runner, or the simulator's provider model.

    ``submit`` returns at once; the result comes back later, exactly once per
    call, through the ``on_done`` the port was made with (failures are results,
    never exceptions). ``stop`` ends what runs (its results are unknown
    outcomes) and refuses what is submitted after.
    """

    def submit(self, call: Call) -> None: ...

    def stop(self) -> None: ...

    def health(self) -> str:
        """Why the provider is degraded now (its persistent process cannot start or keeps dying), empty when
        it serves; the owner records a change (``owner.health``)."""
        ...


#: How a port hands a finished call back to its owner.
OnDone = Callable[[CallDone], None]
