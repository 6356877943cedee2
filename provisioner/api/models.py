"""The REST API's bodies, as the OpenAPI document publishes them.

Rows have the fields of the CLI's ``-o json`` output (docs/operations.md), since both
come from ``provisioner/read/views.py``.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from messages.demand import DemandSnapshot, HostEventKind, Name
from messages.description import ProviderDescription
from messages.facts import Candidate, Chosen, Rejected

T = TypeVar("T")

#: One line of free text: no control characters.
REASON = r"^[^\x00-\x1f\x7f]*$"


class ProviderRow(BaseModel):
    name: str
    kind: str | None
    #: The instance holding its lease, or the last one to, when that one let it lapse.
    owner: str
    owner_state: Literal["held", "lapsed", "none"]
    lease: int | None
    priority: int | None
    capacity: int | None
    in_use: int
    pending: int
    cost_per_hour: float
    status: str


class ProviderDetail(ProviderRow):
    status_reason: str
    description: ProviderDescription | None


class RequestRow(BaseModel):
    id: str
    provider: str
    kind: str
    action: str
    template: str | None
    resource: str | None
    count: int
    state: str
    attempts: int
    created_at: float
    provider_request_id: str | None
    reason: str


class InstanceRow(BaseModel):
    id: str
    provider: str
    template: str | None
    state: str
    machine_id: str
    name: str
    #: The scheduler's name for it, when it was made for a named node (``docs/slurm.md``); "" otherwise.
    node: str
    request_id: str
    launched_at: float | None
    joined_at: float | None
    cost_so_far: float
    #: The scheduler is asked to drain it: to start no new work there; it goes back once idle
    #: (docs/scheduler-interface.md#drain-requests).
    drain: bool = False
    #: Why: ``consolidating to aws-spot/c5.xlarge: ...``, or an operator's drain reason.
    drain_reason: str = ""


class ResourceRow(BaseModel):
    name: str
    provider: str
    base: int
    borrowed: int
    total: int
    in_use: int | None
    free: int | None
    #: What the scheduler says its running jobs hold (its supply view), and in_use minus that.
    scheduler_in_use: int | None = None
    drift: int | None = None


class CostRow(BaseModel):
    provider: str
    cost_so_far: float
    cost_per_hour_now: float


class DecisionRow(BaseModel):
    seq: int
    at: float
    item: str
    demand_seq: int
    need: int
    in_flight: int
    chosen: list[Chosen]
    rejected: list[Rejected]
    note: str
    #: Every candidate in rank order (the first ones), with what it took or why not.
    candidates: list[Candidate]
    #: A consolidation's: the saving per hour expected of replacing the host (docs/policy.md#consolidation).
    saving_per_hour: float | None = None


class OrphanRow(BaseModel):
    kind: Literal["instance", "grant", "request"]
    id: str
    provider: str
    state: str
    since: float | None
    machine_id: str | None
    name: str | None
    resource: str | None
    count: int | None
    cost_so_far: float | None
    reason: str


class RoleHeld(BaseModel):
    role: str
    fence: int
    state: Literal["held", "lapsed"]
    #: When it was granted (held; null when not known), or when it lapsed.
    since: float | None


class DaemonRow(BaseModel):
    instance: str
    state: Literal["active", "standby", "lapsed", "stopped"]
    #: host:pid of the process holding (or last holding) the instance's lease; "" once stopped.
    process: str
    #: Since when it is in its state: its process took the instance lease (active, standby), or let it
    #: lapse (lapsed); null when not known.
    since: float | None
    #: Seconds until its instance lease lapses unless renewed (alive only).
    expires_in: float | None
    planner: bool
    providers: list[str]
    roles: list[RoleHeld]


class Page(BaseModel, Generic[T]):
    """One page of a list; pass ``next`` as ``after`` for the following page (null on the last)."""

    items: list[T]
    next: str | None


class AuditEntry(BaseModel):
    at: float
    seq: int | None
    id: str
    kind: str
    provider: str
    lease: str
    fence: int
    what: str
    payload: dict[str, Any]
    prev: str
    hash: str


class AuditPage(BaseModel):
    items: list[AuditEntry]
    #: The cursor to follow from: the hash of the last line returned (or the one given).
    next: str | None


class AuditVerified(BaseModel):
    ok: bool
    lines: int
    problem: str | None
    starts_after_rotation: bool


class HostEventBody(BaseModel):
    model_config = {"extra": "forbid"}

    event: HostEventKind
    #: Whose host it is; needed when two providers each have a live host of that name.
    provider: Name | None = None


class HostEventOut(BaseModel):
    seq: int | None = None
    name: str
    event: HostEventKind
    time: float
    provider: str | None = None


class ActionBody(BaseModel):
    """Why: recorded in the fact and the audit log with the caller's token name."""

    model_config = {"extra": "forbid"}

    reason: str = Field(default="", max_length=500, pattern=REASON)


class ActionResult(BaseModel):
    fact: str
    seq: int | None
    kind: str
    provider: str
    message: str


class BulkResult(BaseModel):
    """What a bulk return or drain did, or with ``dry_run`` would do."""

    action: Literal["return", "drain"]
    dry_run: bool
    #: Hosts acted on (or that would be), as the instances view shows them.
    matched: int
    hosts: list[InstanceRow]
    #: Hosts the filter matched that were left alone, by why (``being returned already``, ``requested``).
    skipped: dict[str, int]
    #: The order facts written (none on a dry run).
    facts: list[str]
    message: str


class Reloaded(BaseModel):
    """A config read again and applied (``provisioner/daemon/reload.py``)."""

    ok: bool
    config: str | None
    #: What changed, one line each.
    changes: list[str]
    #: What changed but waits for a restart (instance.id, controller, api, home, script_workers).
    restart_needed: list[str]
    errors: list[str]


class Error(BaseModel):
    error: str
    fields: list[dict[str, str]] = Field(default_factory=list)


class Health(BaseModel):
    status: str
    seq: int | None = None


class Liveness(BaseModel):
    status: str
    #: The daemon's version (the installed package's).
    version: str


class DemandStored(DemandSnapshot):
    """The demand as stored, and warnings about items no configured provider can ever serve (stored all
    the same: the scheduler's demand is the scheduler's)."""

    warnings: list[str] = Field(default_factory=list)
