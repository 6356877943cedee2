"""The v2 input documents this provider reads, checked before anything is touched.

Lenient about keys it does not use (the daemon may add some), strict about
the ones it does: a malformed document is exit 65 naming the field, never a
guess about what was meant.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from providers.flexlm.errors import BadInput

D = TypeVar("D", bound="_Doc")


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class RequestIn(_Doc):
    token: str = Field(min_length=1)
    resource: str = Field(min_length=1)
    count: int = Field(ge=1)
    tags: dict[str, str] = Field(default_factory=dict)


class GrantPart(_Doc):
    token: str = Field(min_length=1)
    count: int = Field(ge=1)


class ReturnIn(_Doc):
    token: str = Field(min_length=1)
    resource: str = Field(min_length=1)
    count: int = Field(ge=1)
    #: Whole grants by the token of their request, or ``{token, count}`` for part of one.
    grants: list[str | GrantPart] | None = None

    @model_validator(mode="before")
    @classmethod
    def _units_only(cls, data: Any) -> Any:
        if isinstance(data, dict) and "machines" in data:
            raise ValueError("this provider lends units: return a resource and a count, not machines")
        return data

    @property
    def named(self) -> tuple[tuple[str, int | None], ...] | None:
        if self.grants is None:
            return None
        return tuple((g, None) if isinstance(g, str) else (g.token, g.count) for g in self.grants)


class RequestRef(_Doc):
    request_id: str = Field(alias="requestId", min_length=1)


class StatusIn(_Doc):
    requests: list[RequestRef]


class ListIn(_Doc):
    tags: dict[str, str] = Field(default_factory=dict)


class UsageIn(_Doc):
    resource: str = Field(min_length=1)


def read(model: type[D], data: Any, action: str) -> D:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "document"
        raise BadInput(f"{action} input: {where}: {err['msg'].removeprefix('Value error, ')}") from None
