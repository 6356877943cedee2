"""What the facts add up to: one record per provider, order, request, instance, grant.

These are plain mutable records owned by one projection (one actor's thread);
they are data only, so the pure ``policy`` package can read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from messages.description import ProviderDescription
from messages.facts import Decision, Order
from messages.states import INSTANCE, GrantState, History, InstanceState, RequestState


@dataclass(slots=True)
class ProviderRecord:
    name: str
    description: ProviderDescription | None = None
    #: active, paused, drained or disabled (by exit 77/78 or config).
    status: str = "active"
    status_reason: str = ""
    #: Why its persistent process cannot start or keeps dying; empty while it is fine.
    degraded: str = ""
    #: When its description was last written (the fact's time): what its ``quota`` left was measured at.
    described_at: float = 0.0
    owner: str = ""
    fence: int = 0
    #: Requests that ended at or before this time count no strike against it (``policy.cooldown``): a reload
    #: changed what its calls run with (``provider_reconfigured``), or an operator resumed it. 0: never.
    strikes_cleared_at: float = 0.0


@dataclass(slots=True)
class OrderRecord:
    id: str
    provider: str
    order: Order
    at: float
    request_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RequestRecord:
    id: str
    provider: str
    action: str
    supply: str
    history: History
    created_at: float
    order_id: str = ""
    item_id: str = ""
    template: str | None = None
    resource: str | None = None
    count: int = 0
    machines: list[str] = field(default_factory=list)
    grants: list[str] = field(default_factory=list)
    #: A request for named nodes: one name per host.
    names: list[str] = field(default_factory=list)
    provider_request_id: str | None = None
    attempts: int = 0
    last_attempt_at: float | None = None
    reason: str = ""
    outcome: str | None = None
    #: Fact seq of the intent; lets a new owner tell inherited intents from its own.
    seq: int = 0

    @property
    def state(self) -> RequestState:
        return self.history.state or "planned"


@dataclass(slots=True)
class InstanceRecord:
    provider: str
    #: ``provider/machine_id``: the record's key in the projection, one string every index shares
    #: (the machine id is read from it, not kept twice).
    key: str
    name: str
    history: History
    request_id: str = ""
    template: str | None = None
    item_id: str = ""
    launched_at: float | None = None
    #: When it last joined, or first went idle or busy with no join seen; None if it never did.
    #: Kept, not read from the history: planning asks it of every serving host, often, and a
    #: host's history grows with each idle and busy spell.
    joined_at: float | None = None
    private_ip: str | None = None
    #: The return request currently giving it back, if any.
    return_request_id: str = ""
    #: Returns planned for it so far: one that keeps failing backs off, and stops after a bound.
    returns: int = 0
    #: The scheduler's name for it, when it was made for a named node (``name`` is the provider's).
    node: str | None = None
    # The other times and the reason are read from the history, not kept beside it: a projection
    # holds every instance for good, and each slot costs it 8 bytes per instance.

    @property
    def machine_id(self) -> str:
        return self.key[len(self.provider) + 1:]

    @property
    def host(self) -> str:
        """The name the scheduler knows it by, in its events and views: its node's, else the provider's."""
        return self.node or self.name

    @property
    def state(self) -> InstanceState:
        return self.history.state or "requested"

    @property
    def seen_at(self) -> float:
        """When the facts first saw it."""
        return self.history[1]

    @property
    def ended_at(self) -> float | None:
        """When it reached its terminal state, if it has."""
        return self.history[-2] if self.history.state in INSTANCE.terminal else None

    @property
    def reason(self) -> str:
        """The last reason any of its changes gave ("" if none did)."""
        h = self.history
        for i in range(len(h) - 1, 1, -3):
            if h[i]:
                return h[i]
        return ""


@dataclass(slots=True)
class GrantRecord:
    provider: str
    id: str
    resource: str
    history: History
    requested: int = 0
    count: int = 0
    item_id: str = ""
    granted_at: float | None = None
    ended_at: float | None = None
    return_request_id: str = ""
    #: Returns planned for it since it last gave units back (a partial return done) or was held as before (a
    #: return called off): one that keeps failing backs off, and stops after a bound.
    returns: int = 0
    #: Units its open return gives back (all of ``count``, or part of it); 0 when none is open.
    returning: int = 0
    #: (when, how many) of each part given back while the rest stayed granted: each period is
    #: paid for at the count held then.
    given_back: list[tuple[float, int]] = field(default_factory=list)
    reason: str = ""

    @property
    def state(self) -> GrantState:
        return self.history.state or "requested"

    @property
    def partial_return(self) -> bool:
        """True while its open return gives back only part of its units."""
        return 0 < self.returning < self.count


@dataclass(slots=True)
class ResourceRecord:
    name: str
    provider: str = ""
    base: int = 0
    borrowed: int = 0
    total: int = 0
    in_use: int | None = None
    observed_at: float | None = None
    #: Observed use as a falling staircase of (from, peak): from each ``from`` on, the highest
    #: use seen is ``peak``. Idle reclaim reads the peak of a recent window from it in one
    #: lookup; it stays as short as the distinct peaks (never longer than the highest use).
    peaks: list[tuple[float, int]] = field(default_factory=list)
    #: Units the scheduler's jobs hold, as its bridge last recorded them (``license_published``); None if
    #: never said. Idle reclaim keeps at least this many, whatever the license server reports.
    scheduler_in_use: int | None = None
    #: The units the scheduler may hand out by what it last showed (``license_shown``: its total less the
    #: reservation); None where no bridge shows the resource to a scheduler. A units return is called only
    #: once this is no more than what stays after it.
    shown_free: int | None = None

    def peak_use(self, since: float) -> int:
        """The most units in use at once since ``since`` (now included), by the license server's reads and the
        scheduler's own count: what the total must not go below."""
        return max(self.peak_since(since) or 0, self.in_use or 0, self.scheduler_in_use or 0)

    def observe(self, at: float, in_use: int) -> None:
        """Record use ``in_use`` seen at ``at`` (observations arrive in time order)."""
        start = at
        while self.peaks and self.peaks[-1][1] <= in_use:
            start = self.peaks.pop()[0]
        self.peaks.append((start, in_use))
        self.in_use, self.observed_at = in_use, at

    def peak_since(self, since: float) -> int | None:
        """The highest use from ``since`` until now (the use in force at ``since`` included); None if never seen."""
        peak = None
        for start, level in self.peaks:
            if start > since:
                return level if peak is None else peak
            peak = level
        return peak


@dataclass(slots=True)
class NodeRecord:
    """One of a scheduler's named nodes, as its last ``nodes_*`` fact left it."""

    name: str
    provider: str
    template: str | None
    #: Whether the scheduler wants a host for it now (resumed, not since suspended or given up on).
    wanted: bool
    since: float
    join_timeout: float | None = None
    reason: str = ""
    #: The last order, request and host made for the name (ids; "" for none).
    order: str = ""
    request: str = ""
    instance: str = ""


@dataclass(slots=True)
class DecisionRecord:
    seq: int
    at: float
    decision: Decision
