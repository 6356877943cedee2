"""How each script style is called, and how its output becomes ``messages/scripts.py`` shapes.

Two styles (docs/script-contract.md): ``v2``, one executable taking the action as its first
argument, and ``lsf``, the five LSF resource connector / Host Factory scripts
run unchanged. The caller always speaks v2: it hands in a v2 input document
and gets back the normalized models; this module does the translation, so
nothing above it knows which style a provider uses.

Everything here is a pure function of its arguments, except ``build_argv``
which looks at the script folder to pick ``name.sh`` or ``name``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from pydantic import Field, ValidationError, model_validator

from config.models import ProviderConfig
from messages.base import Model, made
from messages.description import ProviderDescription, SupplyKind, Template
from messages.lsf import (
    HoldingsDoc,
    LsfAccepted,
    LsfMachine,
    LsfReturnRequests,
    LsfStatus,
    LsfTemplate,
    LsfTemplates,
    attribute_value,
)
from messages.scripts import (
    Accepted,
    Action,
    HeldGrant,
    Holdings,
    Machine,
    Outcome,
    Reclaim,
    Reclaims,
    RequestStatus,
    ScriptOutput,
    StatusReport,
    Usage,
)

#: The LSF script behind each action; ``list`` and ``usage`` have none (see ``supports``).
LSF_SCRIPTS: dict[str, str] = {
    "describe": "getAvailableTemplates",
    "request": "requestMachines",
    "status": "getRequestStatus",
    "return": "requestReturnMachines",
    "reclaims": "getReturnRequests",
}
#: Actions that change what we hold: they need an idempotency token.
MUTATING = frozenset({"request", "return"})
V2_ACTIONS = frozenset({"describe", "request", "status", "return", "list", "reclaims", "usage"})
#: How many ``{``-lines from the end of stdout are tried when stdout as a whole is not JSON.
JSON_TAIL_ATTEMPTS = 8


class ContractError(ValueError):
    """A document that does not fit the contract.

    ``outcome`` says what the run comes to: ``bad_output`` for unusable script
    output, ``failed`` when the script itself says it did nothing (LSF's
    ``requestId: null``), ``spawn_error`` when the daemon's own input is wrong
    and the script is never started.
    """

    def __init__(self, message: str, outcome: Outcome = "bad_output") -> None:
        super().__init__(message)
        self.outcome: Outcome = outcome


def supports(style: str, action: str) -> bool:
    """Whether a style has the action at all.

    The LSF contract has no ``list`` and no ``usage``: callers emulate ``list``
    for an lsf provider by asking ``status`` about every request they know, and
    lsf providers serve hosts only, so ``usage`` never applies to them.
    """
    if style == "lsf":
        return action in LSF_SCRIPTS
    return action in V2_ACTIONS


# --- input ---------------------------------------------------------------------


class _MachineRef(Model):
    name: str = ""
    machine_id: str = Field(default="", alias="machineId")

    @model_validator(mode="after")
    def _names_a_machine(self) -> "_MachineRef":
        if not self.name and not self.machine_id:
            raise ValueError("a machine needs a name or a machineId")
        return self


class _RequestRef(Model):
    request_id: str = Field(alias="requestId", min_length=1)


class _DescribeIn(Model):
    pass


class _RequestIn(Model):
    token: str = Field(min_length=1)
    template: str | None = Field(default=None, min_length=1)
    resource: str | None = Field(default=None, min_length=1)
    count: int = Field(ge=1)
    tags: dict[str, str] = Field(default_factory=dict)
    #: A request for a scheduler's named nodes: one name per host, for a provider that can name its hosts.
    names: list[str] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> "_RequestIn":
        if (self.template is None) == (self.resource is None):
            raise ValueError("name exactly one of template (hosts) or resource (units)")
        if self.names is not None and (len(self.names) != self.count or self.resource is not None):
            raise ValueError("names: one per host asked for (a hosts request whose count is their number)")
        return self


class _StatusIn(Model):
    requests: list[_RequestRef] = Field(min_length=1)


class _GrantPart(Model):
    """Part of a grant given back: the grant's token and how many of its units."""

    token: str = Field(min_length=1)
    count: int = Field(ge=1)


class _ReturnIn(Model):
    token: str = Field(min_length=1)
    machines: list[_MachineRef] | None = None
    resource: str | None = Field(default=None, min_length=1)
    count: int | None = Field(default=None, ge=1)
    #: Whole grants by token, or ``{token, count}`` for part of one.
    grants: list[str | _GrantPart] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> "_ReturnIn":
        if self.machines is not None:
            if self.resource is not None or self.count is not None or self.grants is not None:
                raise ValueError("return either machines (hosts) or resource and count (units), not both")
            if not self.machines:
                raise ValueError("machines is empty")
        elif self.resource is None or self.count is None:
            raise ValueError("return needs machines (hosts) or resource and count (units)")
        return self


class _ListIn(Model):
    tags: dict[str, str] = Field(default_factory=dict)


class _ReclaimsIn(Model):
    machines: list[_MachineRef]


class _UsageIn(Model):
    resource: str = Field(min_length=1)


_INPUTS: dict[str, type[Model]] = {
    "describe": _DescribeIn,
    "request": _RequestIn,
    "status": _StatusIn,
    "return": _ReturnIn,
    "list": _ListIn,
    "reclaims": _ReclaimsIn,
    "usage": _UsageIn,
}


def build_input(
    style: str, kind: SupplyKind, action: Action, document: dict[str, Any], token: str | None
) -> dict[str, Any]:
    """The document the script reads, from the caller's v2 input document.

    The token goes into the v2 document of ``request`` and ``return``; an lsf
    script gets it only where its contract has room (``userData`` of
    requestMachines) and in ``PROVISIONER_TOKEN``: some plugins reject unknown
    top-level keys. Errors here are the daemon's own: outcome ``spawn_error``.
    """
    if not supports(style, action):
        raise ContractError(f"the {style} style has no {action} action", "spawn_error")
    if action in MUTATING:
        if not token:
            raise ContractError(f"{action} needs an idempotency token", "spawn_error")
        if document.get("token", token) != token:
            raise ContractError("the document's token differs from the token passed", "spawn_error")
        document = {**document, "token": token}
    parsed = _validate(_INPUTS[action], document, "input ", "spawn_error")
    _check_kind(kind, parsed)
    doc = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    if style == "v2":
        return doc
    if kind != "hosts":
        raise ContractError("the lsf style serves hosts only", "spawn_error")
    if action == "request":
        return {
            "template": {"templateId": doc["template"], "machineCount": doc["count"]},
            "rc_account": "default",
            "userData": {"provisioner_token": token},
        }
    if action == "return":
        return {"machines": doc["machines"]}
    return doc


def _check_kind(kind: SupplyKind, parsed: Model) -> None:
    if isinstance(parsed, _RequestIn):
        wrong = parsed.resource is not None if kind == "hosts" else parsed.template is not None
    elif isinstance(parsed, _ReturnIn):
        wrong = parsed.machines is None if kind == "hosts" else parsed.machines is not None
    elif isinstance(parsed, _UsageIn):
        wrong = kind == "hosts"
    else:
        wrong = False
    if wrong:
        raise ContractError(f"input does not fit a {kind} provider", "spawn_error")


def build_argv(provider: ProviderConfig, action: Action, input_path: Path) -> list[str]:
    """The command line of one run; ``argv[0]`` is the program to start.

    An lsf script is ``<folder>/<Name>.sh`` or, failing that, ``<folder>/<Name>``.
    A ``.sh`` script without the execute bit is run by ``/bin/sh``, as LSF's own
    plugin manager does; anything else must be executable.
    """
    script = provider.script
    if script.style == "v2":
        candidates, args = [Path(script.path)], [action]
    else:
        name = LSF_SCRIPTS.get(action)
        if name is None:
            raise ContractError(f"the lsf style has no {action} action", "spawn_error")
        candidates, args = [Path(script.path) / f"{name}.sh", Path(script.path) / name], []
    program = next((c for c in candidates if c.is_file()), None)
    if program is None:
        raise ContractError(f"script not found: {' or '.join(map(str, candidates))}", "spawn_error")
    if os.access(program, os.X_OK):
        command = [str(program)]
    elif script.style == "lsf" and program.suffix == ".sh":
        command = ["/bin/sh", str(program)]
    else:
        raise ContractError(f"script is not executable: {program}", "spawn_error")
    return [*command, *args, "-f", str(input_path)]


# --- output --------------------------------------------------------------------


def decode_stdout(raw: bytes) -> dict[str, Any]:
    """One JSON object from a script's stdout.

    Stdout must be UTF-8. If it is not JSON as a whole, the last part of it
    that starts with ``{`` at the start of a line and runs to the end is taken
    as the document, and what comes before as log lines: some LSF plugins
    print progress before their answer. Only the last few such lines are
    tried, so a huge garbage output costs little.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(f"stdout is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    if not text.strip():
        raise ContractError("stdout is empty (expected one JSON object)")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        data = _json_tail(text)
        if data is None:
            raise ContractError(f"stdout is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ContractError(f"stdout is JSON but not an object (got {type(data).__name__})")
    return data


def _json_tail(text: str) -> dict[str, Any] | None:
    attempts = 0
    end = len(text)
    while attempts < JSON_TAIL_ATTEMPTS:
        start = text.rfind("\n{", 0, end)
        if start < 0:
            return None
        attempts += 1
        try:
            data = orjson.loads(text[start + 1 :])
        except orjson.JSONDecodeError:
            end = start
            continue
        if isinstance(data, dict):
            return data
        end = start
    return None


def parse_output(style: str, kind: SupplyKind, action: Action, data: dict[str, Any], *, provider: str) -> ScriptOutput:
    """The normalized answer of one action; ``ContractError`` names the first bad field."""
    if not supports(style, action):
        raise ContractError(f"the {style} style has no {action} action", "spawn_error")
    if action == "describe":
        return _describe_lsf(data, provider) if style == "lsf" else _describe_v2(data, provider, kind)
    if action in MUTATING:
        return _accepted(data)
    if action == "status":
        return _status(data)
    if action == "reclaims":
        return _reclaims(data)
    if action == "list":
        return _holdings(data)
    return _usage(data)


def _describe_lsf(data: dict[str, Any], provider: str) -> ProviderDescription:
    doc = _validate(LsfTemplates, data)
    return ProviderDescription(name=provider, kind="hosts", templates=[_template(t) for t in doc.templates])


def _template(t: LsfTemplate) -> Template:
    zone = t.attributes.get("zone")
    ncpus = t.attributes.get("ncpus")  # what an LSF template's host has: what it takes of a vCPU quota
    return Template(
        id=t.template_id,
        max_number=t.max_number,
        attributes=t.attributes,
        priority=t.priority,
        zone=zone if isinstance(zone, str) and zone else None,
        vcpus=int(ncpus) if isinstance(ncpus, float) and ncpus >= 1 and ncpus == int(ncpus) else None,
    )


def _describe_v2(data: dict[str, Any], provider: str, kind: SupplyKind) -> ProviderDescription:
    """A v2 description is strict (a misspelt ``prority`` is an error), apart from
    ``message`` and ``name`` (the configured name wins), and LSF-shaped templates."""
    doc = {k: v for k, v in data.items() if k not in ("message", "name")}
    said = doc.setdefault("kind", kind)
    if said != kind:
        raise ContractError(f"kind: the provider is configured as {kind} but describes itself as {said!r}")
    doc["name"] = provider
    if "attributes" in doc:
        doc["attributes"] = _attributes(doc["attributes"], "attributes")
    templates = doc.get("templates")
    if isinstance(templates, list):
        doc["templates"] = [_v2_template(t, f"templates[{i}]") for i, t in enumerate(templates)]
    return _validate(ProviderDescription, doc)


def _v2_template(raw: Any, where: str) -> Any:
    if isinstance(raw, dict) and "templateId" in raw:
        return _template(_validate(LsfTemplate, raw, f"{where}."))
    if isinstance(raw, dict) and "attributes" in raw:
        return {**raw, "attributes": _attributes(raw["attributes"], f"{where}.attributes")}
    return raw


def _attributes(raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        return raw
    out = {}
    for name, value in raw.items():
        try:
            out[name] = attribute_value(value)
        except ValueError as exc:
            raise ContractError(f"{where}.{name}: {exc}") from None
    return out


def _accepted(data: dict[str, Any]) -> Accepted:
    doc = _validate(LsfAccepted, data)
    if doc.request_id is None:
        said = doc.message or "no message"
        raise ContractError(f"exit 0 without a requestId: {said}", "failed")
    return Accepted(provider_request_id=doc.request_id, message=doc.message)


def _machine(m: LsfMachine) -> Machine:
    # Made, not validated again: every field was checked as the script printed it (``LsfMachine``), into
    # the very types ``Machine`` holds; a list of 100,000 machines at start-up paid for both.
    return made(
        Machine,
        machine_id=m.machine_id,
        name=m.name or "",
        result=m.result,
        status=m.status or "",
        private_ip=m.private_ip or None,
        public_ip=m.public_ip or None,
        launched_at=m.launch_time,
        message=m.message or "",
        template=m.template or None,
    )


def _status(data: dict[str, Any]) -> StatusReport:
    doc = _validate(LsfStatus, data)
    return StatusReport(
        requests=[
            RequestStatus(
                request_id=r.request_id,
                status=r.status,
                message=r.message,
                machines=[_machine(m) for m in r.machines],
                granted=r.granted,
            )
            for r in doc.requests
        ]
    )


def _reclaims(data: dict[str, Any]) -> Reclaims:
    doc = _validate(LsfReturnRequests, data)
    return Reclaims(
        machines=[
            Reclaim(name=r.machine, machine_id=r.machine_id, grace_period=r.grace_period or 0.0) for r in doc.requests
        ]
    )


def _holdings(data: dict[str, Any]) -> Holdings:
    doc = _validate(HoldingsDoc, data)
    return Holdings(
        machines=[_machine(m) for m in doc.machines],
        grants=[
            HeldGrant(token=g.token, request_id=g.request_id, resource=g.resource, count=g.count)
            for g in doc.grants
        ],
    )


def _usage(data: dict[str, Any]) -> Usage:
    return _validate(Usage, {k: v for k, v in data.items() if k != "message"})


def _validate(model: type[Any], data: Any, prefix: str = "", outcome: Outcome = "bad_output") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ContractError(f"{prefix}{first_error(exc)}", outcome) from None


def first_error(exc: ValidationError) -> str:
    """``requests[0].status: Input should be ... (got 'failed')``: where, what, and the value if short."""
    err = exc.errors()[0]
    path = ""
    for part in err["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    got = err.get("input")
    shown = ""
    if isinstance(got, (str, int, float, bool)) and err["type"] != "missing":
        text = repr(got)
        shown = f" (got {text[:40]}{'...' if len(text) > 40 else ''})"
    message = err["msg"].removeprefix("Value error, ")
    return f"{path or 'document'}: {message}{shown}"
