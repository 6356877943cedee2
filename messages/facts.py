"""Facts: the append-only record of everything that happened (docs/architecture.md, Facts).

State after a restart is a replay of these, so each payload carries what a
projection needs and nothing secret. A payload's ``kind`` is its discriminator;
several related kinds share one model where their shape is the same.

The envelope's ``lease`` names the lease the writer held and ``fence`` that
lease's epoch; the store rejects the fact atomically when the epoch is no
longer current. ``lease == ""`` marks an unfenced input (an operator's
request), which only ever asks an owner to act and never acts itself.
"""

from __future__ import annotations

import os
import re
import time as _time
from typing import Annotated, Literal, Union, get_args

from pydantic import Field

from messages.base import Model, built
from messages.description import ProviderDescription, SupplyKind
from messages.states import GrantState, InstanceState, RequestState

SCHEMA_VERSION = 1


def new_id(prefix: str) -> str:
    """A unique ASCII id (80 random bits); intents use it as their idempotency token.

    The random bits follow the creation time in milliseconds, so new ids sort
    after older ones: a store's unique index on ids grows at its end instead of
    being rewritten at random places, which halves the durable append rate.
    """
    return f"{prefix}-{_time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


# --- provider and leases ---------------------------------------------------


class ProviderDescribed(Model):
    kind: Literal["provider_described"] = "provider_described"
    description: ProviderDescription


class ProviderAdmin(Model):
    """An operator's steer of a provider; ``disabled`` comes from the daemon (exit 77/78)."""

    kind: Literal["provider_paused", "provider_resumed", "provider_drained", "provider_disabled"]
    reason: str = ""


class ProviderHealth(Model):
    """A persistent provider's process cannot start or keeps dying (``degraded``, with why), or serves again.

    Written by the owner when its port's health changes, so every instance shows
    it and the planner orders elsewhere meanwhile; the provider's steering
    status (paused, disabled ...) is left as it is.
    """

    kind: Literal["provider_degraded", "provider_recovered"]
    reason: str = ""


class ProviderReconfigured(Model):
    """A reload changed what the provider's calls run with (``changed``: its ``kind``, ``script`` or
    ``env_file``, the parts' names only, never their values).

    Written unfenced (a reload is an operator's act) by the daemon that reloaded, before its fresh owner
    starts. The failures of the old settings say nothing of the new ones: the provider's cooldowns end
    here (``ProviderRecord.strikes_cleared_at``), and only failures after it count again.
    """

    kind: Literal["provider_reconfigured"] = "provider_reconfigured"
    changed: list[Literal["kind", "script", "env_file"]] = Field(default_factory=list)


class LeaseChanged(Model):
    kind: Literal["lease_acquired", "lease_lost"]
    name: str
    holder: str
    fence: int


# --- planning ---------------------------------------------------------------


class SupplyChange(Model):
    """What to get or give back, at one provider: the shape orders and requests share."""

    action: Literal["request", "return"]
    supply: SupplyKind
    item_id: str = ""
    template: str | None = None
    resource: str | None = None
    count: int = Field(default=0, ge=0)
    #: Returns: the machines (ids) or grants (ids) to give back.
    machines: list[str] = Field(default_factory=list)
    grants: list[str] = Field(default_factory=list)
    #: Host requests for a scheduler's named nodes: one name per host (``count`` of them), which a provider
    #: that can name its hosts gives them (``docs/slurm.md``).
    names: list[str] = Field(default_factory=list)


class Load(Model):
    """Hosts of a packed order that each carry the same bundles."""

    hosts: int = Field(ge=1)
    #: Item id -> bundles of that item on each of these hosts.
    bundles: dict[str, int]


class Order(SupplyChange):
    """The planner's instruction to a provider's owner: get or give back supply."""

    kind: Literal["order"] = "order"
    reason: str = ""
    #: An operator's drain (a host return): a busy host goes back once its work ends, where an
    #: operator's return forces it at once.
    when_idle: bool = False
    #: A packed order (bundle items): its hosts grouped by the bundles each carries, fullest
    #: first; hosts beyond them (rounded up to the provider's granularity) carry none. The
    #: bundles ride on the order so that supply in flight counts them, and a clamp knows which
    #: hosts to drop. None on host and unit orders (and on every order written before packing).
    loads: list[Load] | None = None

    @property
    def bundles(self) -> dict[str, int]:
        """Item id -> bundles the order's hosts carry in all ({} unless packed)."""
        out: dict[str, int] = {}
        for load in self.loads or ():
            for item, n in load.bundles.items():
                out[item] = out.get(item, 0) + n * load.hosts
        return out


class Chosen(Model):
    provider: str
    template: str | None = None
    resource: str | None = None
    #: Hosts or units; for a bundle item, the hosts that carry some of its bundles.
    count: int
    #: A bundle item's bundles packed onto those hosts (None for host and unit items).
    bundles: int | None = None


class Rejected(Model):
    provider: str
    reason: str


class Candidate(Model):
    """One offer weighed for an item (a provider's template or pool), and what came of it.

    A decision lists its candidates in rank order, so an operator reads why
    the need went where it went: what each took, and why the others took
    nothing (``capacity: room for 0``, ``not needed: covered by aws-east``,
    ``no template has attribute gpus``).
    """

    provider: str
    template: str | None = None
    resource: str | None = None
    #: Hosts or units it was given (for a bundle item, hosts carrying its bundles); 0 when none.
    count: int = 0
    #: A bundle item's bundles on those hosts.
    bundles: int | None = None
    #: Why it took nothing, or less than was left; "" when it took what it was asked.
    why: str = ""


class Decision(Model):
    kind: Literal["decision"] = "decision"
    item: str
    #: The demand snapshot this decision answered.
    demand_seq: int = 0
    need: int = 0
    in_flight: int = 0
    chosen: list[Chosen] = Field(default_factory=list)
    rejected: list[Rejected] = Field(default_factory=list)
    note: str = ""
    #: Every candidate in rank order (the first ones; the note counts the rest), while the item needs something.
    candidates: list[Candidate] = Field(default_factory=list)
    #: A consolidation's (``policy.consolidation``): what replacing the host is expected to save per hour.
    saving_per_hour: float | None = None


class BudgetEvent(Model):
    kind: Literal["budget_event"] = "budget_event"
    limit: str
    detail: str


# --- requests (both directions: getting supply and giving it back) ----------


class RequestPlanned(SupplyChange):
    """The intent fact. Its fact id is the request id and the script's idempotency token."""

    kind: Literal["request_planned"] = "request_planned"
    order_id: str = ""


#: Outcomes of a units return's use read, made before its call (no call is made by the read itself):
#: ``use_read`` says the use fits in what stays and the call follows (it is no attempt); ``use_unread`` that
#: the read failed (an attempt: backoff and bound, and the next attempt reads again).
USE_READ = "use_read"
USE_UNREAD = "use_unread"
#: The outcome of a request that a restart found ``planned`` at a provider that takes no token: its call may
#: or may not have happened, and neither a repeat nor a status can tell.
UNKNOWN = "unknown"


class RequestChanged(Model):
    kind: Literal[
        "request_submitted",
        "request_status",
        "request_completed",
        "request_failed",
        "request_timed_out",
        "request_called_off",
    ]
    request_id: str
    state: RequestState
    provider_request_id: str | None = None
    reason: str = ""
    #: Exit-code class of the script failure that caused it (transient, capacity, ...), or a use read's
    #: (``USE_READ``, ``USE_UNREAD``), or ``UNKNOWN``.
    outcome: str | None = None


# --- host instances -----------------------------------------------------------


class InstanceSeen(Model):
    kind: Literal["instance_seen"] = "instance_seen"
    machine_id: str
    name: str
    request_id: str = ""
    template: str | None = None
    state: InstanceState = "provisioning"
    launched_at: float | None = None
    private_ip: str | None = None
    #: Why it is recorded in this state (an orphan: what the search found).
    reason: str = ""
    #: The scheduler's name for it (a named node), when its request named hosts; ``name`` stays what the
    #: provider reported.
    node: str | None = None


InstanceChangeKind = Literal[
    "instance_provisioning",
    "instance_running",
    "instance_joined",
    "instance_idle",
    "instance_busy",
    "instance_return_planned",
    "instance_returning",
    "instance_returned",
    "instance_failed",
    "instance_orphan_found",
    "instance_lost",
]

#: The kind of the fact that moves an instance into each state: the one place a kind is derived from a
#: state (``InstanceChanged.to``). ``requested`` has none: an instance starts in it by ``instance_seen``.
INSTANCE_CHANGE: dict[str, InstanceChangeKind] = {
    "provisioning": "instance_provisioning",
    "running": "instance_running",
    "joined": "instance_joined",
    "idle": "instance_idle",
    "busy": "instance_busy",
    "return_planned": "instance_return_planned",
    "returning": "instance_returning",
    "returned": "instance_returned",
    "failed": "instance_failed",
    "orphaned": "instance_orphan_found",
    "lost": "instance_lost",
}


class InstanceChanged(Model):
    """An instance moved to ``state``; its ``kind`` says the same, and ``to`` builds one from the state."""

    kind: InstanceChangeKind
    machine_id: str
    state: InstanceState
    request_id: str = ""
    reason: str = ""
    #: Seq of the host event that caused it, so a new owner skips events already applied.
    event_seq: int | None = None

    @classmethod
    def to(cls, state: InstanceState, machine_id: str, request_id: str = "", reason: str = "",
           event_seq: int | None = None) -> "InstanceChanged":
        """The fact that moves ``machine_id`` into ``state``, of the kind that state has."""
        return cls(kind=INSTANCE_CHANGE[state], machine_id=machine_id, state=state, request_id=request_id,
                   reason=reason, event_seq=event_seq)


# --- a scheduler's named nodes ----------------------------------------------


class NodesChanged(Model):
    """What a scheduler asked of its named nodes (Slurm's power saving): made (``nodes_resumed``) at the
    fact's provider and ``template``, or no longer wanted (``nodes_suspended``; ``nodes_resume_failed``,
    the scheduler gave up waiting). Written unfenced by the scheduler's bridge, before it answers the
    scheduler; the planner orders one host per wanted name, and returns the hosts of names let go.
    """

    kind: Literal["nodes_resumed", "nodes_suspended", "nodes_resume_failed"]
    names: list[str] = Field(min_length=1)
    template: str | None = None
    #: Seconds the scheduler waits for a resumed node to join before it gives up on it (Slurm's ResumeTimeout):
    #: its host is given up as an orphan then, whatever ``policy.join_timeout`` says.
    join_timeout: float | None = Field(default=None, gt=0)
    reason: str = ""


# --- unit grants --------------------------------------------------------------


class GrantChanged(Model):
    """A grant is the supply one units request obtained; its id is that request's id.

    There is no separate "grant requested" fact: the units request's
    ``request_planned`` fact is the grant's request and creates its record.

    A return may give back part of a grant: ``grant_part_returned`` ends it
    (back to ``granted``, holding fewer units), or ``grant_return_timed_out``
    when it never completed (back to ``granted``, holding them all). A return
    whose call was never made is ``grant_return_called_off`` when the use read
    before it showed the units in use: the grant is what it was before
    (``granted``, or ``orphaned``), holding them all. On a
    grant already ``granted``, ``grant_part_returned`` notes that the
    provider lists fewer units than recorded (a timed-out part went back
    after all).
    """

    kind: Literal[
        "grant_granted",
        "grant_return_planned",
        "grant_returning",
        "grant_returned",
        "grant_part_returned",
        "grant_return_timed_out",
        "grant_return_called_off",
        "grant_failed",
        "grant_orphan_found",
    ]
    grant_id: str
    resource: str
    state: GrantState
    #: Units the change is about: granted or found held (``granted``, ``orphan_found``), on their
    #: way back (``return_planned``, ``returning``), given back (``returned``, ``part_returned``).
    count: int = Field(default=0, ge=0)
    request_id: str = ""
    reason: str = ""


class UsageObserved(Model):
    kind: Literal["usage_observed"] = "usage_observed"
    resource: str
    in_use: int = Field(ge=0)
    total: int | None = Field(default=None, ge=0)


class ResourceTotalChanged(Model):
    kind: Literal["resource_total_changed"] = "resource_total_changed"
    resource: str
    base: int
    borrowed: int
    total: int


class LicensePublished(Model):
    """What a scheduler's bridge shows its scheduler of an elastic resource (a Slurm license, docs/licenses.md):
    the license's total, ``count`` (the ceiling: base + the pool), and ``reserved``, the units a reservation
    holds back (those not borrowed), so jobs may use ``count - reserved``; with ``in_use``, the units the
    scheduler's jobs held, by its own count, when it was decided (idle reclaim never returns them). Written
    under the lease and fence of the resource's provider before it is sent, and sent again until the scheduler
    shows it.

    ``license_shown`` follows once the scheduler shows it (its total and reservation as recorded; ``in_use``
    its count then): from then on it hands out no more than ``count - reserved``, so a return of units that
    the publication held back may be called (``owner.requests``), and not before.
    """

    kind: Literal["license_published", "license_shown"] = "license_published"
    resource: str
    license: str
    count: int = Field(ge=0)
    reserved: int = Field(ge=0)
    in_use: int = Field(default=0, ge=0)


Payload = Annotated[
    Union[
        ProviderDescribed,
        ProviderAdmin,
        ProviderHealth,
        ProviderReconfigured,
        LeaseChanged,
        Order,
        Decision,
        BudgetEvent,
        RequestPlanned,
        RequestChanged,
        InstanceSeen,
        InstanceChanged,
        GrantChanged,
        UsageObserved,
        ResourceTotalChanged,
        NodesChanged,
        LicensePublished,
    ],
    Field(discriminator="kind"),
]


class Fact(Model):
    seq: int | None = None
    id: str = Field(min_length=1, max_length=100, pattern=r"^[\x21-\x7e]+$")
    time: float
    provider: str = ""
    lease: str = ""
    fence: int = Field(default=0, ge=0)
    v: int = SCHEMA_VERSION
    payload: Payload

    @property
    def kind(self) -> str:
        return self.payload.kind


def make_fact(
    payload: Payload,
    *,
    provider: str = "",
    lease: str = "",
    fence: int = 0,
    fact_id: str | None = None,
    now: float | None = None,
    seq: int | None = None,
) -> Fact:
    """A fact ready to append; the store assigns ``seq`` (the simulator, being the store, passes it).

    Every fact is made here, and most of what ``Fact`` validates is known by its type: the payload is a
    model already, the rest plain values. Those are checked in place and the fact made without a
    second pass (``built``: 2.7 → 1.3 µs); anything else goes through ``Fact`` itself, which says
    what is wrong.
    """
    fact_id = fact_id or new_id(payload.kind.split("_")[0])
    at = _time.time() if now is None else now
    if (type(payload) in _PAYLOADS and type(at) is float and type(fence) is int and fence >= 0
            and type(provider) is str and type(lease) is str and (seq is None or type(seq) is int)
            and type(fact_id) is str and _FACT_ID.fullmatch(fact_id) is not None):
        return built(Fact, {"seq": seq, "id": fact_id, "time": at, "provider": provider, "lease": lease,
                            "fence": fence, "v": SCHEMA_VERSION, "payload": payload})
    return Fact(seq=seq, id=fact_id, time=at, provider=provider, lease=lease, fence=fence, payload=payload)


#: What ``Fact`` asks of an id (its pattern and length).
_FACT_ID = re.compile(r"[\x21-\x7e]{1,100}")
#: The payload models, each validated when it was made.
_PAYLOADS = frozenset(get_args(get_args(Payload)[0]))


def summary(fact: Fact) -> str:
    """One line for the log: what happened, to what, where."""
    p = fact.payload
    where = f"{fact.provider}: " if fact.provider else ""
    if isinstance(p, RequestPlanned):
        what = p.template or p.resource or ""
        if p.action == "return":
            what = ", ".join(p.machines or p.grants) or what
        return f"{where}{p.action} {fact.id} planned: {p.count} {p.supply} {what}".rstrip()
    if isinstance(p, RequestChanged):
        extra = f" as {p.provider_request_id}" if p.provider_request_id and p.kind == "request_submitted" else ""
        because = f" ({p.reason})" if p.reason else ""
        return f"{where}request {p.request_id} {p.state}{extra}{because}"
    if isinstance(p, InstanceSeen):
        return f"{where}instance {p.machine_id} ({p.name}) {p.state}"
    if isinstance(p, InstanceChanged):
        because = f" ({p.reason})" if p.reason else ""
        return f"{where}instance {p.machine_id} {p.state}{because}"
    if isinstance(p, GrantChanged):
        # Both end a partial return with the grant ``granted`` again; their count is the part, not what it holds.
        if p.kind == "grant_part_returned":
            return f"{where}grant {p.grant_id}: {p.count} {p.resource} given back, the rest still granted"
        if p.kind == "grant_return_timed_out":
            return f"{where}grant {p.grant_id}: the return of {p.count} {p.resource} timed out, all still granted"
        return f"{where}grant {p.grant_id}: {p.count} {p.resource} {p.state}"
    if isinstance(p, Order):
        what = p.template or p.resource or ""
        if p.action == "return":
            return f"{where}order: return {p.count} {p.supply} ({p.reason})"
        if p.loads:
            carried = ", ".join(f"{n} of {item}" for item, n in sorted(p.bundles.items()))
            return f"{where}order: {p.count} {p.supply} {what} carrying bundles {carried}"
        return f"{where}order: {p.count} {p.supply} {what} for {p.item_id}"
    if isinstance(p, Decision):
        chosen = ", ".join(f"{c.count} from {c.provider}" for c in p.chosen)
        if not chosen:
            why = "; ".join(f"{c.provider}: {c.why}" for c in p.candidates[:3] if c.why)
            chosen = f"nothing ({why})" if why else "nothing"
        return f"decision for {p.item}: need {p.need}, in flight {p.in_flight}: {chosen}" + (
            f" ({p.note})" if p.note else "")
    if isinstance(p, NodesChanged):
        said = {"nodes_resumed": f"resumed ({p.template})", "nodes_suspended": "suspended",
                "nodes_resume_failed": "resume failed"}[p.kind]
        more = f" and {len(p.names) - 8} more" if len(p.names) > 8 else ""
        return f"{where}nodes {', '.join(p.names[:8])}{more} {said}" + (f": {p.reason}" if p.reason else "")
    if isinstance(p, ResourceTotalChanged):
        return f"{where}{p.resource} total {p.total} = {p.base} base + {p.borrowed} borrowed"
    if isinstance(p, UsageObserved):
        return f"{where}{p.resource} in use {p.in_use}"
    if isinstance(p, LicensePublished):
        said = "published to" if p.kind == "license_published" else "shown by"
        return (f"{where}{p.resource} {said} the scheduler as {p.license}: total {p.count}, "
                f"{p.reserved} reserved, {p.in_use} in use")
    if isinstance(p, LeaseChanged):
        return f"lease {p.name} {p.kind.split('_')[1]} by {p.holder} (fence {p.fence})"
    if isinstance(p, ProviderAdmin):
        return f"{where}{p.kind.replace('provider_', '')}" + (f": {p.reason}" if p.reason else "")
    if isinstance(p, ProviderHealth):
        return f"{where}{p.kind.replace('provider_', '')}" + (f": {p.reason}" if p.reason else "")
    if isinstance(p, ProviderReconfigured):
        return f"{where}reconfigured ({', '.join(p.changed) or 'settings'} changed): its cooldowns end"
    if isinstance(p, ProviderDescribed):
        d = p.description
        return f"{where}described: {len(d.templates)} templates, {len(d.pools)} pools, priority {d.priority}"
    return f"{where}{p.kind}"
