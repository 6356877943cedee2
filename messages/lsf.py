"""Raw documents that provider scripts print, as they print them.

These follow the LSF resource connector / Host Factory contract, whose field
names the v2 contract keeps where they exist. They are lenient: public plugins
add keys of their own, spell ``launchTime`` with a capital T, print numbers as
strings and empty strings for missing values; all of that is accepted here so
that ``providers/contract.py`` can turn these into the strict shapes of
``messages/scripts.py`` without caring how a plugin spelt things.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from messages.base import Lenient

AttrValue = str | float | bool


def _text(value: Any) -> Any:
    """Ids and names printed as numbers by some plugins; ``null`` where a string belongs."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _optional_text(value: Any) -> Any:
    value = _text(value)
    return None if value == "" else value


def _epoch(value: Any) -> Any:
    """``launchtime`` as a number, a numeric string, or ``""`` when not yet known."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    return value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _list_or_empty(value: Any) -> Any:
    return [] if value is None else value


Text = Annotated[str, BeforeValidator(_text)]
OptText = Annotated[str | None, BeforeValidator(_optional_text)]

_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off", ""}


def attribute_value(value: Any) -> AttrValue:
    """Turn an LSF attribute ``[TYPE, VALUE]`` into a typed value; plain values pass through.

    VALUE is a string in the LSF contract ("4096", "1" for true), so the TYPE
    decides what it means. An unknown TYPE or an unparseable VALUE is an error:
    a silently wrong ``ncpus`` would make policy pick the wrong template.
    """
    if isinstance(value, (str, bool, int, float)):
        return value if isinstance(value, (str, bool)) else float(value)
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str)):
        raise ValueError('expected ["String"|"Numeric"|"Boolean", VALUE] or a plain value')
    kind, raw = value[0].strip().lower(), value[1]
    if kind == "string":
        return "" if raw is None else str(raw)
    if kind == "numeric":
        if isinstance(raw, bool):
            raise ValueError(f"Numeric attribute has a boolean value {raw!r}")
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"Numeric attribute has a non-numeric value {raw!r}") from None
    if kind == "boolean":
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError(f"Boolean attribute has value {raw!r} (expected 1/0/true/false)")
    raise ValueError(f"unknown attribute type {value[0]!r} (expected String, Numeric or Boolean)")


Attribute = Annotated[AttrValue, BeforeValidator(attribute_value)]


class LsfTemplate(Lenient):
    """One entry of getAvailableTemplates."""

    template_id: Text = Field(alias="templateId", min_length=1)
    max_number: int = Field(alias="maxNumber", ge=0)
    attributes: dict[str, Attribute] = Field(default_factory=dict)
    priority: int | None = None

    @field_validator("attributes", mode="before")
    @classmethod
    def _null_attributes(cls, value: Any) -> Any:
        return {} if value is None else value


class LsfTemplates(Lenient):
    """getAvailableTemplates output."""

    templates: list[LsfTemplate]
    message: Text = ""


class LsfAccepted(Lenient):
    """requestMachines / requestReturnMachines output; ``requestId: null`` means refused."""

    request_id: OptText = Field(default=None, alias="requestId")
    message: Text = ""


class LsfMachine(Lenient):
    """A machine in getRequestStatus (and in the v2 ``list`` answer).

    Read as often as any document (a ``list`` of 100,000 machines at start-up), so its text fields take
    numbers and ``null`` in pydantic's own code rather than through ``Text``'s Python function: numbers
    become strings here (``coerce_numbers_to_str``), and ``null`` stays ``None`` for ``contract._machine``
    to turn into ``""`` (a name) or ``""`` into ``None`` (an address), as ``Text`` and ``OptText`` do.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, coerce_numbers_to_str=True)

    machine_id: str = Field(alias="machineId", min_length=1)
    name: str | None = ""
    result: Annotated[Literal["executing", "succeed", "fail"], BeforeValidator(_lower)] = "executing"
    status: str | None = ""
    private_ip: str | None = Field(default=None, alias="privateIpAddress")
    public_ip: str | None = Field(default=None, alias="publicIpAddress")
    launch_time: Annotated[float | None, BeforeValidator(_epoch)] = Field(
        default=None, validation_alias=AliasChoices("launchtime", "launchTime")
    )
    message: str | None = ""
    #: v2 ``list`` only: the template the machine was started from, when the provider knows it.
    template: str | None = Field(default=None, validation_alias=AliasChoices("templateId", "template"))


class LsfRequest(Lenient):
    """One request in getRequestStatus; ``granted`` is the v2 addition for units."""

    request_id: Text = Field(alias="requestId", min_length=1)
    status: Annotated[Literal["running", "complete", "complete_with_error"], BeforeValidator(_lower)]
    message: Text = ""
    machines: Annotated[list[LsfMachine], BeforeValidator(_list_or_empty)] = Field(default_factory=list)
    granted: int | None = Field(default=None, ge=0)


class LsfStatus(Lenient):
    """getRequestStatus output."""

    requests: list[LsfRequest]


class LsfReturnRequest(Lenient):
    """One machine getReturnRequests reports: Symphony gives ``gracePeriod``, LSF ``machineId``."""

    machine: Text = ""
    machine_id: Text = Field(default="", alias="machineId")
    grace_period: Annotated[float | None, BeforeValidator(_epoch)] = Field(default=None, alias="gracePeriod", ge=0)

    @model_validator(mode="after")
    def _names_a_machine(self) -> "LsfReturnRequest":
        if not self.machine and not self.machine_id:
            raise ValueError("names no machine (needs machine or machineId)")
        return self


class LsfReturnRequests(Lenient):
    """getReturnRequests output."""

    status: Text = ""
    message: Text = ""
    requests: Annotated[list[LsfReturnRequest], BeforeValidator(_list_or_empty)]


class HeldGrantDoc(Lenient):
    """v2 ``list``: units the provider holds for us."""

    token: Text = ""
    request_id: Text = Field(default="", alias="requestId")
    resource: Text = Field(min_length=1)
    count: int = Field(ge=0)


class HoldingsDoc(Lenient):
    """v2 ``list`` output: machines in getRequestStatus's machine shape, plus grants."""

    machines: Annotated[list[LsfMachine], BeforeValidator(_list_or_empty)] = Field(default_factory=list)
    grants: Annotated[list[HeldGrantDoc], BeforeValidator(_list_or_empty)] = Field(default_factory=list)
