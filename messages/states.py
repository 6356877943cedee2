"""State machines for requests, host instances and unit grants.

Each machine is data: its states, its allowed transitions (one comment per
edge, saying when it happens) and, beside the states, what a restarted or
newly-owning daemon does with a record it finds in each state (as Ironic
declares its resumable states next to the states). Code never tests flags;
it asks the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from operator import itemgetter
from sys import intern
from typing import Any, Iterable, Literal, Mapping, Sequence, get_args

#: Each machine's states, named once. The tables below are written in them (``NAMED`` holds each table to
#: its names, checked when this module loads), and facts type their ``state`` with them, so a fact naming a
#: state its machine lacks is refused as it is read, not found later by a projection.
RequestState = Literal["planned", "submitted", "running", "complete", "complete_with_error", "failed", "timed_out",
                       "called_off"]
InstanceState = Literal["requested", "provisioning", "running", "joined", "idle", "busy", "return_planned",
                        "returning", "returned", "failed", "orphaned", "lost"]
GrantState = Literal["requested", "granted", "return_planned", "returning", "returned", "failed", "orphaned"]


class IllegalTransition(ValueError):
    """A transition the table does not allow: a bug or a corrupt fact log."""


class OnRestart(str, Enum):
    #: Nothing is in flight; the record stays as it is.
    KEEP = "keep"
    #: Something is in flight at the provider: go on polling it.
    POLL = "poll"
    #: The intent is recorded but its call may or may not have happened:
    #: repeat the call with the same idempotency token (the provider dedupes).
    REPEAT = "repeat"
    #: As REPEAT where the provider honours tokens; where it cannot (LSF-style
    #: scripts have no token), mark it failed and leave it to the orphan search.
    REPEAT_OR_FAIL = "repeat_or_fail"


@dataclass(frozen=True)
class StateMachine:
    name: str
    #: States a record may be created in.
    initial: frozenset[str]
    #: from -> {to: why this edge exists}
    edges: Mapping[str, Mapping[str, str]]
    on_restart: Mapping[str, OnRestart]
    #: States where a record stops being live (it neither costs nor counts as held); an edge out of one
    #: brings it back, when the provider shows the end was not one.
    terminal: frozenset[str] = field(default_factory=frozenset)
    #: state (None before the first) -> the states it may change to: ``initial`` and ``edges`` as one
    #: lookup, for ``History.advance``, which every change of every record in a replay makes.
    moves: Mapping[str | None, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        moves: dict[str | None, frozenset[str]] = {src: frozenset(dsts) for src, dsts in self.edges.items()}
        moves[None] = self.initial
        object.__setattr__(self, "moves", moves)

    @property
    def states(self) -> frozenset[str]:
        return frozenset(self.on_restart)

    def allowed(self, src: str, dst: str) -> bool:
        return dst in self.edges.get(src, {})

    def check(self, src: str | None, dst: str) -> None:
        if src is None:
            if dst not in self.initial:
                raise IllegalTransition(f"{self.name}: cannot start in {dst!r}")
            return
        if not self.allowed(src, dst):
            raise IllegalTransition(f"{self.name}: {src!r} -> {dst!r} is not allowed")


REQUEST = StateMachine(
    name="request",
    initial=frozenset({"planned"}),
    edges={
        "planned": {
            "submitted": "the request/return script answered with the provider's request id",
            "failed": "the script failed for good (capacity, credentials, config, or retries used up)",
            "timed_out": "no answer within request_timeout since planning, retries included",
        },
        "submitted": {
            "running": "status says the provider is working on it",
            "complete": "status says all of it is done",
            "complete_with_error": "status says it is done and part of it failed",
            "failed": "status says it failed, or the provider does not know it",
            "timed_out": "not done within request_timeout",
            "called_off": "the scheduler let go of every name it was for before any host came of it: status is "
                          "asked no more, and what it makes after all is an orphan the search finds",
        },
        "running": {
            "complete": "status says all of it is done",
            "complete_with_error": "status says it is done and part of it failed",
            "failed": "status says it failed, or the provider no longer knows it",
            "timed_out": "not done within request_timeout",
            "called_off": "the scheduler let go of every name it was for before any host came of it: status is "
                          "asked no more, and what it makes after all is an orphan the search finds",
        },
    },
    on_restart={
        "planned": OnRestart.REPEAT_OR_FAIL,
        "submitted": OnRestart.POLL,
        "running": OnRestart.POLL,
        "complete": OnRestart.KEEP,
        "complete_with_error": OnRestart.KEEP,
        "failed": OnRestart.KEEP,
        "timed_out": OnRestart.KEEP,
        "called_off": OnRestart.KEEP,
    },
    terminal=frozenset({"complete", "complete_with_error", "failed", "timed_out", "called_off"}),
)

INSTANCE = StateMachine(
    name="instance",
    initial=frozenset({"requested", "provisioning", "running", "failed", "orphaned"}),
    edges={
        "requested": {
            "provisioning": "status lists the machine, still executing",
            "running": "status lists the machine as started",
            "failed": "status lists the machine as failed",
        },
        "provisioning": {
            "running": "status says the machine started",
            "joined": "the host joined before a status poll saw it running",
            "failed": "status says the machine failed to start",
            "lost": "the provider took it back or no longer has it",
            "return_planned": "an operator returns it",
            "orphaned": "never came up within join_timeout",
        },
        "running": {
            "joined": "the host joined the cluster",
            "idle": "the scheduler reports it idle (its join event was missed)",
            "busy": "the scheduler reports it busy (its join event was missed)",
            "lost": "the provider took it back or no longer has it",
            "return_planned": "an operator returns it",
            "orphaned": "never joined within join_timeout",
        },
        "joined": {
            "idle": "the scheduler has no work for it",
            "busy": "the scheduler runs work on it",
            "lost": "the provider took it back or no longer has it",
            "return_planned": "an operator returns it",
            "orphaned": "the scheduler's view has not listed it for unlisted_grace (orphans: report)",
        },
        "idle": {
            "busy": "work arrived",
            "lost": "the provider took it back or no longer has it",
            "return_planned": "idle past idle_time and min hold, or an operator returns it",
            "orphaned": "the scheduler's view has not listed it for unlisted_grace (orphans: report)",
        },
        "busy": {
            "idle": "its work finished, or the scheduler's view no longer lists it (orphans: return)",
            "lost": "the provider took it back or no longer has it",
            "return_planned": "an operator forces its return",
            "orphaned": "the scheduler's view has not listed it for unlisted_grace (orphans: report)",
        },
        "return_planned": {
            "returning": "the return script answered with the provider's request id",
            "returned": "the provider says it is already gone",
            "lost": "the provider took it back before our return",
            "orphaned": "its return never completed within request_timeout",
        },
        "returning": {
            "returned": "status says the return is done",
            "return_planned": "the return failed: plan it again under a new token",
            "lost": "the provider lost it while returning",
            "orphaned": "its return never completed within request_timeout",
        },
        "failed": {
            "return_planned": "a failed machine may still be held and billed: give it back",
            "returned": "the provider confirms it holds nothing",
            "orphaned": "the provider still lists it: held, and maybe billed",
        },
        "orphaned": {
            "return_planned": "orphans: return, or an operator returns it",
            "returned": "it vanished at the provider on its own",
            "joined": "it joined the cluster after all (late, or after an operator fixed it)",
            "idle": "the scheduler reports it idle: it is in the cluster after all",
            "busy": "the scheduler reports it busy: it is in the cluster after all",
        },
        # The world lies: a provider's list may miss a machine for a while, and a return it called
        # complete may have ended nothing. So the two ends are not final when the provider says
        # otherwise later: what it lists again is ours again, to adopt or to give back.
        "lost": {
            "joined": "the provider lists it again and the scheduler uses it: adopted back",
            "orphaned": "the provider lists it again and no one uses it: held, and maybe billed",
        },
        "returned": {
            "orphaned": "the provider still lists it return_grace after its return completed: returned again",
        },
    },
    on_restart={
        "requested": OnRestart.POLL,
        "provisioning": OnRestart.POLL,
        "running": OnRestart.POLL,
        "joined": OnRestart.KEEP,
        "idle": OnRestart.KEEP,
        "busy": OnRestart.KEEP,
        "return_planned": OnRestart.REPEAT,
        "returning": OnRestart.POLL,
        "returned": OnRestart.KEEP,
        "failed": OnRestart.KEEP,
        "orphaned": OnRestart.KEEP,
        "lost": OnRestart.KEEP,
    },
    terminal=frozenset({"returned", "lost"}),
)

GRANT = StateMachine(
    name="grant",
    initial=frozenset({"requested", "granted", "orphaned"}),
    edges={
        "requested": {
            "granted": "status says the units are granted",
            "failed": "the request failed or was granted nothing",
            "orphaned": "never confirmed within request_timeout",
        },
        "granted": {
            "return_planned": "all or part of it unused past idle_time and min hold, or an operator returns it",
        },
        # A partial return gives back N of the grant's M units; the grant goes through
        # return_planned and returning like a whole one (the facts carry N), then back to
        # granted holding M - N. After a restart the same restart rules apply: the intent is
        # repeated with its token and its N, a return in progress is polled.
        "return_planned": {
            "returning": "the return script answered with the provider's request id",
            "returned": "the provider says it is already back",
            "orphaned": "its return never completed within request_timeout",
            "granted": "its partial return never completed within request_timeout: the part stays with "
                       "the rest, which is in use or wanted (an orphan would leave the cluster total)",
        },
        "returning": {
            "returned": "status says the return is done",
            "return_planned": "the return failed: plan it again under a new token",
            "orphaned": "its return never completed within request_timeout",
            "granted": "status says its partial return is done: the rest stays granted; or it never "
                       "completed within request_timeout and all of it stays",
        },
        "failed": {
            "orphaned": "the provider holds it after all (found by the orphan search)",
        },
        "orphaned": {
            "return_planned": "orphans: return, or an operator returns it",
            "returned": "the provider no longer holds it",
        },
        "returned": {
            "orphaned": "the provider still lists it return_grace after its return completed: returned again",
        },
    },
    on_restart={
        "requested": OnRestart.POLL,
        "granted": OnRestart.KEEP,
        "return_planned": OnRestart.REPEAT,
        "returning": OnRestart.POLL,
        "returned": OnRestart.KEEP,
        "failed": OnRestart.KEEP,
        "orphaned": OnRestart.KEEP,
    },
    terminal=frozenset({"returned"}),
)


#: Each table and the names of its states.
NAMED: tuple[tuple[StateMachine, Any], ...] = ((REQUEST, RequestState), (INSTANCE, InstanceState), (GRANT, GrantState))


def check_named(machine: StateMachine, names: Any) -> None:
    """A table and its names agree, edges included: a state added to one and not the other, or an edge to a
    state nobody named, fails at import (below), where the mistake is made."""
    named = frozenset(get_args(names))
    used = machine.states | machine.initial | machine.terminal | frozenset(machine.edges)
    used |= frozenset(dst for dsts in machine.edges.values() for dst in dsts)
    if used != named:
        raise ValueError(f"{machine.name} states {sorted(used ^ named)} are in its table or its names, not both")


for _machine, _names in NAMED:
    check_named(_machine, _names)


# --- groups of states that decisions name --------------------------------------------
# Declared here, beside the tables, so that what a state means to an owner is read in one place.

#: Requests being worked on at the provider: their status is polled (their restart rule).
POLLED = frozenset(s for s, rule in REQUEST.on_restart.items() if rule is OnRestart.POLL)
#: Instances on their way up: their request's status says how they come along.
COMING: frozenset[InstanceState] = frozenset({"requested", "provisioning"})
#: Instances up or coming up but not in the cluster yet: each should join within join_timeout.
AWAITING_JOIN: frozenset[InstanceState] = frozenset({"provisioning", "running"})
#: Hosts in the cluster, serving it: joined, then idle or busy.
SERVING: frozenset[InstanceState] = frozenset({"joined", "idle", "busy"})
#: Instances the provider must still hold for us: one its list no longer shows is lost.
HELD: frozenset[InstanceState] = frozenset({"running", "joined", "idle", "busy"})
#: Instances on their way back: what the provider says of them is the return's to settle.
RETURNING: frozenset[InstanceState] = frozenset({"return_planned", "returning"})
#: Instances from which a return may be planned.
RETURNABLE = frozenset(s for s, dsts in INSTANCE.edges.items() if "return_planned" in dsts)
#: Instances an owner gives back on its own, once what left them there has ended.
LEFT_BEHIND: frozenset[InstanceState] = frozenset({"return_planned", "failed", "orphaned"})
#: Grants whose units may be given back: lent to us, or held at the provider under no fact.
GIVABLE: frozenset[GrantState] = frozenset({"granted", "orphaned"})
#: Grants whose units count in the resource's borrowed total (and cost).
BORROWED: frozenset[GrantState] = frozenset({"granted", "return_planned", "returning"})

for _group, _machine in ((COMING, INSTANCE), (AWAITING_JOIN, INSTANCE), (SERVING, INSTANCE), (HELD, INSTANCE),
                         (RETURNING, INSTANCE), (LEFT_BEHIND, INSTANCE), (GIVABLE, GRANT), (BORROWED, GRANT)):
    if not _group <= _machine.states:
        raise ValueError(f"a group of {_machine.name} states names {sorted(_group - _machine.states)}, not its states")


@dataclass(frozen=True, slots=True)
class StatusChange:
    state: str
    at: float
    reason: str = ""


_NOWHERE: frozenset[str] = frozenset()


class History(tuple):
    """A record's state with every change and its time, so timeouts derive from it.

    One flat tuple: state, time and reason of each change, oldest first. Not a
    model, nor a tuple of change objects: every record of a projection holds
    one, for its whole life, and flat it costs a third of what a tuple of
    ``StatusChange`` did (100,000 instances: 16 MiB less). States and reasons are interned
    as a change is made: the same state or reason in a hundred thousand histories is one string,
    however the facts that said it were decoded. The state now is the
    last change's, read by index, as cheaply as a field. ``changes`` builds the
    change objects when someone asks for them. Build one from changes with
    ``History.of``.
    """

    __slots__ = ()

    def __new__(cls, flat: Iterable[Any] = ()) -> "History":
        flat = tuple(flat)
        return tuple.__new__(cls if flat else _Unstarted, flat)

    #: The state now: the last change's (an empty history has none, see ``_Unstarted``).
    state = property(itemgetter(-3))

    @classmethod
    def of(cls, changes: Sequence[StatusChange]) -> "History":
        flat: list[Any] = []
        for c in changes:
            flat += (c.state, c.at, c.reason)
        return cls(flat)

    @property
    def changes(self) -> tuple[StatusChange, ...]:
        return tuple(StatusChange(self[i], self[i + 1], self[i + 2]) for i in range(0, len(self), 3))

    def since(self, state: str) -> float | None:
        """When the record last entered ``state``."""
        for i in range(len(self) - 3, -1, -3):
            if self[i] == state:
                return self[i + 1]
        return None

    @staticmethod
    def begin(machine: StateMachine, state: str, at: float, reason: str = "") -> "History":
        """A record's first change: ``History().advance(...)``, without the empty history."""
        if state not in machine.initial:
            machine.check(None, state)  # raises, saying why
        return tuple.__new__(History, (intern(state), at, intern(reason)))

    def advance(self, machine: StateMachine, to: str, at: float, reason: str = "") -> "History":
        if to not in machine.moves.get(self.state, _NOWHERE):
            machine.check(self.state, to)  # raises, saying why
        return tuple.__new__(History, (*self, intern(to), at, intern(reason)))

    def __repr__(self) -> str:
        return f"History({list(self.changes)!r})"


class _Unstarted(History):
    """A history before its first change, whose state is None; a class of its own so that
    reading the state of every other history stays one C call."""

    __slots__ = ()
    state = None  # type: ignore[assignment]
