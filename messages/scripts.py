"""What provider scripts tell us, normalized across the LSF and v2 contracts.

``providers/contract.py`` turns each style's raw output into these; the
ProviderActor only ever sees these shapes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from messages.base import Model
from messages.description import ProviderDescription

Action = Literal["describe", "request", "status", "return", "list", "reclaims", "usage"]

#: What a script run came to. Exit codes map as docs/script-contract.md says:
#: 0 ok, 75 transient, 69 capacity, 77 credentials, 78 config, other failed;
#: timeout is an unknown outcome; bad_output is exit 0 with unusable stdout;
#: spawn_error is a script that could not be started at all; not_started is one the daemon
#: chose not to start (its mandate lapsed, or the runner is stopping): nothing happened.
Outcome = Literal[
    "ok", "transient", "capacity", "credentials", "config", "failed", "timeout", "bad_output", "spawn_error",
    "not_started",
]


class Machine(Model):
    machine_id: str
    name: str = ""
    result: Literal["executing", "succeed", "fail"] = "executing"
    status: str = ""
    private_ip: str | None = None
    public_ip: str | None = None
    launched_at: float | None = None
    message: str = ""
    template: str | None = None


#: What a status call says of a request (the script contract's words, not the request's states).
Status = Literal["running", "complete", "complete_with_error"]


class RequestStatus(Model):
    request_id: str
    status: Status
    message: str = ""
    machines: list[Machine] = Field(default_factory=list)
    #: Units providers: how many units this request holds now.
    granted: int | None = None


class Accepted(Model):
    """Answer to request and return: the provider's own request id."""

    provider_request_id: str
    message: str = ""


class StatusReport(Model):
    requests: list[RequestStatus] = Field(default_factory=list)


class HeldGrant(Model):
    token: str = ""
    request_id: str = ""
    resource: str
    count: int


class Holdings(Model):
    """Answer to list: everything the provider holds for us (orphan search)."""

    machines: list[Machine] = Field(default_factory=list)
    grants: list[HeldGrant] = Field(default_factory=list)


class Reclaim(Model):
    name: str = ""
    machine_id: str = ""
    grace_period: float = 0


class Reclaims(Model):
    machines: list[Reclaim] = Field(default_factory=list)


class Usage(Model):
    resource: str
    in_use: int = Field(ge=0)
    total: int | None = Field(default=None, ge=0)


ScriptOutput = ProviderDescription | Accepted | StatusReport | Holdings | Reclaims | Usage


class ScriptResult(Model):
    """The whole outcome of one script run; failures are results, never exceptions."""

    provider: str
    action: Action
    outcome: Outcome
    exit_code: int | None = None
    #: One line for people: what went wrong and where (empty when ok).
    reason: str = ""
    duration_s: float = 0.0
    #: The idempotency token passed (intent fact id), if the action mutates.
    token: str | None = None
    output: ProviderDescription | Accepted | StatusReport | Holdings | Reclaims | Usage | None = None
    #: Tail of stderr, already scrubbed of the provider's secrets (docs/script-contract.md#what-is-scrubbed).
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"
