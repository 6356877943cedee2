"""What a decision comes to: facts to write, calls to make, things to tell the operator.

A write names what it is about (its ``slot``): a driver keeps at most one
write per slot under way, so a reconcile that runs again before the journal
answered does not write the same intent twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from messages.facts import Payload
from owner.calls import Call


@dataclass(frozen=True, slots=True)
class OrderTaken:
    """The intent that takes up one order."""

    order_id: str


@dataclass(frozen=True, slots=True)
class ReturnPlanned:
    """A return no order asked for (failed returns, orphans), named by what it gives back."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RequestSettled:
    """What one request's call came to, or its end."""

    request_id: str


@dataclass(frozen=True, slots=True)
class TotalPublished:
    """A shared resource's total (base + borrowed): once committed, it is published to the scheduler."""

    resource: str
    base: int
    borrowed: int


@dataclass(frozen=True, slots=True)
class UsageSeen:
    resource: str


@dataclass(frozen=True, slots=True)
class Notes:
    """Facts of one kind that have no other slot: host events, status answers, orphans, reclaims."""

    about: Literal["host-events", "status", "orphans", "reclaims", "join-timeouts", "described", "disabled",
                   "health"]


Slot = OrderTaken | ReturnPlanned | RequestSettled | TotalPublished | UsageSeen | Notes


@dataclass(frozen=True, slots=True)
class Write:
    slot: Slot
    payloads: tuple[Payload, ...]
    #: Ids for the facts, by position (None: a fresh id); empty: every fact gets a fresh id.
    ids: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Note:
    """A line for the log: what the owner decided or could not do."""

    level: Literal["info", "warning", "error"]
    text: str
    #: Names a failure that may repeat at every poll (``status``, ``describe`` ...): a driver may log it less
    #: often, with a count, rather than every time.
    repeats: str = ""


@dataclass(frozen=True, slots=True)
class Effects:
    writes: tuple[Write, ...] = ()
    calls: tuple[Call, ...] = ()
    notes: tuple[Note, ...] = ()

    def __add__(self, other: Effects) -> Effects:
        if not (other.writes or other.calls or other.notes):
            return self
        return Effects(self.writes + other.writes, self.calls + other.calls, self.notes + other.notes)

    def __bool__(self) -> bool:
        return bool(self.writes or self.calls or self.notes)


NOTHING = Effects()


def write(slot: Slot, payloads: list[Payload] | tuple[Payload, ...], ids: tuple[str | None, ...] = ()) -> Effects:
    return Effects(writes=(Write(slot, tuple(payloads), ids),)) if payloads else NOTHING


def call(c: Call) -> Effects:
    return Effects(calls=(c,))


def note(level: Literal["info", "warning", "error"], text: str, repeats: str = "") -> Effects:
    return Effects(notes=(Note(level, text, repeats),))
