"""The input document of each action, checked before any AWS call.

Unknown keys are ignored: a newer daemon may add some, and an older
provider must keep working. A missing or wrong field is exit 65 naming it,
since a request the provider misread could launch the wrong thing.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from providers.ec2.errors import BAD_INPUT, ProviderError
from providers.ec2.fields import first_error


class Doc(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class MachineRef(Doc):
    name: str = ""
    machine_id: str = Field(default="", alias="machineId")

    @model_validator(mode="after")
    def _names_one(self) -> "MachineRef":
        if not self.machine_id and not self.name:
            raise ValueError("a machine needs a machineId or a name")
        return self


#: A scheduler's name for a host: a host name's characters, so that it is a tag value, a Slurm node name
#: and a word a shell script can take as it is, with nothing to quote (it goes into user data).
NodeName = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class RequestIn(Doc):
    token: str = Field(min_length=1, max_length=256)
    template: str = Field(min_length=1)
    count: int = Field(ge=1)
    tags: dict[str, str] = Field(default_factory=dict)
    #: The scheduler's names for the hosts, one each, when it named them (Slurm's power saving).
    names: list[NodeName] | None = None

    @field_validator("names")
    @classmethod
    def _one_name_per_host(cls, names: list[str] | None, info: ValidationInfo) -> list[str] | None:
        """The daemon checks this too, but a provider that trusted it could launch a host no name stands
        for, or two hosts under one name."""
        if names is None:
            return names
        count = info.data.get("count")
        if count is not None and len(names) != count:
            raise ValueError(f"{len(names)} name{'' if len(names) == 1 else 's'} for count {count} (one name per host)")
        for n, name in enumerate(names):
            if name in names[:n]:
                raise ValueError(f"{name!r} is named twice (one host per name)")
        return names


class RequestRef(Doc):
    request_id: str = Field(alias="requestId", min_length=1)


class StatusIn(Doc):
    requests: list[RequestRef]


class ReturnIn(Doc):
    token: str = Field(min_length=1, max_length=256)
    machines: list[MachineRef] = Field(min_length=1)


class ListIn(Doc):
    tags: dict[str, str] = Field(default_factory=dict)


class ReclaimsIn(Doc):
    machines: list[MachineRef] = Field(default_factory=list)


class DescribeIn(Doc):
    pass


D = TypeVar("D", bound=Doc)


def read(model: type[D], doc: Any) -> D:
    """``doc`` as ``model``, or exit 65 naming the first bad field."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise ProviderError(BAD_INPUT, f"input {first_error(exc)}") from None
