"""Every string a script answers, kept free of its secrets and bounded in size, before anyone keeps it.

A script's answer becomes facts, log lines, REST rows and CLI output: what a
script prints must therefore be safe to show. And what it names must reach
the daemon as it named it: the scheduler reports a host by its real name, and
the next call gives the provider back the ids it handed out. So a parsed
answer's strings (``messages.scripts``) are of two kinds:

- **Identifiers** the daemon stores and sends back (``IDENTIFIERS``: a
  request or machine id, a name, a token, a template, a resource, an
  address, a region or zone) are kept exactly or refused, never rewritten.
  One that holds a secret (``providers.environment.Scrubber``) makes the
  answer ``bad_output`` naming the field and the variable, never the value;
  so does one longer than ``ID_LIMIT`` (cut short it would name something
  else).
- **Free text** (messages, a machine's status, attribute names and values,
  anything else) has each secret replaced by ``***``, as stderr has, and is
  cut to ``TEXT_LIMIT`` characters.

Fields are named as the contract spells them (``requests[0].machines[1].name``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from messages.scripts import ScriptOutput
from providers.contract import ContractError
from providers.environment import Scrubber

#: Characters an identifier may have. Host names stop at 253, cloud ids at a few hundred.
ID_LIMIT = 512
#: Characters kept of free text (a status message, an attribute); the rest becomes "...".
TEXT_LIMIT = 1024

#: Fields holding identifiers: never rewritten; holding a secret or too long, they are refused.
IDENTIFIERS = frozenset({
    "provider_request_id", "request_id", "machine_id", "name", "token", "template", "resource", "id",
    "private_ip", "public_ip", "region", "zone",
})
#: How the contract spells the fields whose Python names differ.
SPELLED = {"provider_request_id": "requestId", "request_id": "requestId", "machine_id": "machineId",
           "private_ip": "privateIpAddress", "public_ip": "publicIpAddress", "launched_at": "launchtime",
           "grace_period": "gracePeriod", "max_number": "maxNumber"}


def cleaned(output: ScriptOutput, scrub: Scrubber) -> ScriptOutput:
    """``output`` with its free text scrubbed and bounded; ``ContractError`` for an identifier that holds a
    secret or is too long.

    The same object comes back when nothing had to change, as for almost every answer: a first look
    only reads (no copy of the answer, no field's name spelled), and the answer is copied, with the
    names for errors, only when some string needs scrubbing or is long enough to need a limit.
    """
    if _clean(output, scrub):
        return output
    clean = _Cleaner(scrub)
    data = clean.value(output, "", None)
    if not clean.changed:
        return output
    return type(output).model_validate(data)


def _clean(value: Any, scrub: Scrubber) -> bool:
    """True when no string of ``value`` would change: none holds a secret, none is longer than ``ID_LIMIT``
    (a bound on both limits, so that every string the cleaner would cut or refuse is looked at there)."""
    if isinstance(value, str):
        return len(value) <= ID_LIMIT and (not scrub.margin or scrub(value) == value)
    if value is None or isinstance(value, (int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_clean(item, scrub) for item in value)
    if isinstance(value, dict):
        return all(_clean(str(key), scrub) and _clean(item, scrub) for key, item in value.items())
    if isinstance(value, BaseModel):
        return all(_clean(item, scrub) for item in value.__dict__.values())
    return True


class _Cleaner:
    def __init__(self, scrub: Scrubber) -> None:
        self.scrub = scrub
        self.changed = False

    def value(self, value: Any, path: str, field: str | None) -> Any:
        if isinstance(value, str):
            return self.text(value, path, field in IDENTIFIERS)
        if isinstance(value, BaseModel):
            return {name: self.value(getattr(value, name), _join(path, SPELLED.get(name, name)), name)
                    for name in type(value).model_fields}
        if isinstance(value, dict):  # data, not fields (template attributes): keys and values are free text
            return {self.text(str(key), path, False): self.value(item, _join(path, str(key)), None)
                    for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(item, f"{path}[{i}]", field) for i, item in enumerate(value)]
        return value

    def text(self, value: str, path: str, identifier: bool) -> str:
        if identifier:
            secret = self.scrub.found(value)
            if secret is not None:
                raise ContractError(f"{path}: holds the value of {secret}, a secret of the env_file "
                                    "(an identifier is kept exactly or refused, never masked)")
            if len(value) > ID_LIMIT:
                raise ContractError(f"{path}: {len(value)} characters, at most {ID_LIMIT} for an identifier")
            return value
        clean = self.scrub(value)
        if len(clean) > TEXT_LIMIT:
            clean = clean[: TEXT_LIMIT - 3] + "..."
        if clean != value:
            self.changed = True
        return clean


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
