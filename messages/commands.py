"""Messages between actors. Actor references ride along as opaque values."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import ConfigDict, Field

from messages.base import Model
from messages.demand import DemandSnapshot, HostEvent, SupplySnapshot
from messages.facts import Fact, Order


class ActorMessage(Model):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class Append(ActorMessage):
    """Ask the journal to commit facts; the reply (``Appended``) goes to ``reply_to``."""

    facts: list[Fact]
    reply_to: Any = None
    #: Echoed in the reply: what the writer needs to know which of its writes this was.
    tag: Any = ""


class Appended(ActorMessage):
    tag: Any = ""
    accepted: list[str] = Field(default_factory=list)
    #: (fact id, lease, reason)
    refused: list[tuple[str, str, str]] = Field(default_factory=list)
    #: The controller could not be reached; nothing was committed.
    error: str = ""


class Interest(Enum):
    """What a subscriber wants to be told besides ``CaughtUp`` (which every subscriber gets).

    The planner wants the demand and nothing of the scheduler's hosts; an owner the reverse. Each
    subscriber names what it acts on, so no actor carries handlers for another's business.
    """

    #: ``Committed``: news of the facts of its providers (every fact when it names none).
    FACTS = "facts"
    #: ``DemandChanged``: the scheduler's demand.
    DEMAND = "demand"
    #: ``SupplyChanged``: the scheduler's view of its hosts.
    SUPPLY = "supply"
    #: ``HostEvents``: what the scheduler says of its hosts (an owner hears only of its providers' hosts).
    HOST_EVENTS = "host_events"


class Subscribe(ActorMessage):
    """Tell ``ref`` when the shared projection holds every fact (``CaughtUp``), then what it ``wants``."""

    ref: Any
    #: What it is told of; everything unless it says (``CaughtUp`` comes in any case).
    wants: frozenset[Interest] = frozenset(Interest)
    #: Only facts and host events of these providers (plus global facts); None for all.
    providers: list[str] | None = None


class Unsubscribe(ActorMessage):
    ref: Any


class Committed(ActorMessage):
    """News of facts just committed: they are in the journal's shared projection already."""

    facts: list[Fact]


class CaughtUp(ActorMessage):
    """The shared projection holds every fact up to ``seq``; what follows is live."""

    seq: int


class DemandChanged(ActorMessage):
    demand: DemandSnapshot


class SupplyChanged(ActorMessage):
    supply: SupplySnapshot


class HostEvents(ActorMessage):
    events: list[HostEvent]


#: The message each interest is told with: an actor that subscribes to an interest handles its message.
TOLD: dict[Interest, type[ActorMessage]] = {
    Interest.FACTS: Committed,
    Interest.DEMAND: DemandChanged,
    Interest.SUPPLY: SupplyChanged,
    Interest.HOST_EVENTS: HostEvents,
}


class Tick(ActorMessage):
    now: float


class Review(ActorMessage):
    """Planner to budget: may these orders go out? Answered with ``Reviewed``."""

    orders: list[tuple[str, Order]]
    reply_to: Any


class Reviewed(ActorMessage):
    orders: list[tuple[str, Order]]
    #: (limit, detail) for every clamp.
    clamps: list[tuple[str, str]] = Field(default_factory=list)


class Reconfigure(ActorMessage):
    """A reloaded config for the actors that run on it (``provisioner/daemon/reload.py``).

    ``config`` is a ``config.models.Config`` (typed loosely: the vocabulary
    imports nothing above it). ``restart`` names the providers whose owner is
    to be replaced rather than told (their script changed).
    """

    config: Any
    restart: frozenset[str] = frozenset()


class LeaseRevoked(ActorMessage):
    name: str
    reason: str
