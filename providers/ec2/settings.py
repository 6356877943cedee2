"""The provider's settings file, named by ``EC2_PROVIDER_CONFIG``.

The file is the operator's, and the daemon only sees what the provider makes
of it, so every mistake must surface here, before anything is launched, as
exit 78 with the key it is about (``templates[0].subnets: ...``). The checks
stop at what can be known without AWS: whether a subnet exists is for
``describe`` to find out.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from providers.ec2.errors import CONFIG, ProviderError
from providers.ec2.fields import first_error

ENV = "EC2_PROVIDER_CONFIG"
#: EC2 refuses user data over 16 KiB before base64.
USER_DATA_LIMIT = 16 * 1024

REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
TemplateId = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
#: A tag value: EC2 allows up to 256 characters.
TagValue = Annotated[str, StringConstraints(min_length=1, max_length=256)]


def _prefixed(prefix: str, value: str, what: str) -> str:
    if not value.startswith(prefix) or len(value) <= len(prefix):
        raise ValueError(f"not {what} id (expected {prefix}...)")
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


SubnetId = Annotated[str, AfterValidator(lambda v: _prefixed("subnet-", v, "a subnet"))]
GroupId = Annotated[str, AfterValidator(lambda v: _prefixed("sg-", v, "a security group"))]


class TemplateSettings(Strict):
    """One kind of host: where and how it is launched, and what it costs."""

    id: TemplateId
    instance_type: str = Field(min_length=1)
    #: An AMI id, or ``resolve:ssm:PARAMETER`` (EC2 resolves it at launch).
    image_id: str = Field(min_length=1)
    #: Tried in order; one per zone, since a capacity shortage is per zone.
    subnets: list[SubnetId] = Field(min_length=1)
    security_groups: list[GroupId] = Field(default_factory=list)
    key_name: str | None = None
    #: An instance profile name or ARN, for what the host itself may do in AWS.
    instance_profile: str | None = None
    market: Literal["on-demand", "spot"] = "on-demand"
    price_per_hour: float | None = Field(default=None, ge=0)
    max_number: int = Field(ge=0)
    attributes: dict[str, str | float | bool] = Field(default_factory=dict)
    user_data_file: str | None = None
    #: The contents of ``user_data_file``, read at load (boto3 base64-encodes them at launch).
    _user_data: bytes | None = PrivateAttr(default=None)

    @property
    def user_data(self) -> bytes | None:
        return self._user_data

    @field_validator("image_id")
    @classmethod
    def _image(cls, value: str) -> str:
        if value.startswith("resolve:ssm:"):
            return value
        return _prefixed("ami-", value, "an AMI")

    @field_validator("subnets")
    @classmethod
    def _once_each(cls, value: list[str]) -> list[str]:
        twice = [s for i, s in enumerate(value) if s in value[:i]]
        if twice:
            raise ValueError(f"{twice[0]!r} is listed twice")
        return value

    @model_validator(mode="after")
    def _capacity_type_is_the_market(self) -> "TemplateSettings":
        said = self.attributes.get("capacity_type")
        if said is not None and said != self.market:
            raise ValueError(f"attributes.capacity_type {said!r} is not the template's market {self.market!r}: "
                             "describe reports the market (leave capacity_type out)")
        return self


class Settings(Strict):
    """The whole file."""

    region: str
    #: The value of the tag ``provisioner:cluster``: what marks an instance as ours.
    cluster: TagValue
    #: Typical seconds from RunInstances to a host that can join.
    lead_time_s: float = Field(default=180.0, ge=0)
    priority: int | None = None
    #: Most hosts held at once from this provider, all templates together.
    capacity: int | None = Field(default=None, ge=0)
    #: Which name a host is reported under: the scheduler must know it by the same one.
    host_name: Literal["private_dns", "short", "private_ip"] = "private_dns"
    templates: list[TemplateSettings] = Field(min_length=1)

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not REGION.match(value):
            raise ValueError("not an AWS region name (e.g. us-east-1)")
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> "Settings":
        ids = [t.id for t in self.templates]
        for i, tid in enumerate(ids):
            if tid in ids[:i]:
                raise ValueError(f"templates[{i}].id: {tid!r} is used by templates[{ids.index(tid)}] too")
        return self

    def template(self, template_id: str) -> TemplateSettings | None:
        return next((t for t in self.templates if t.id == template_id), None)


def load(env: Any = None) -> Settings:
    """The settings named by ``EC2_PROVIDER_CONFIG``; ``ProviderError(78)`` naming the key otherwise."""
    env = os.environ if env is None else env
    name = env.get(ENV, "")
    if not name:
        raise ProviderError(CONFIG, f"{ENV} is not set: name the settings file in the provider's env_file")
    return load_file(Path(name))


def load_file(path: Path) -> Settings:
    """The settings in ``path``. Messages name the file by its base name only, to stay one short line:
    the full path is the env_file's ``EC2_PROVIDER_CONFIG``, a line away for whoever reads them."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProviderError(CONFIG, f"{ENV}={path}: cannot read the settings file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ProviderError(CONFIG, f"{path.name}: the settings file is not UTF-8") from None
    return parse(text, path)


def parse(text: str, path: Path) -> Settings:
    """Settings from the text of a YAML or JSON file; ``path`` names it and anchors ``user_data_file``."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML or JSON"
        raise ProviderError(CONFIG, f"{path.name}{where}: {problem}") from None
    if not isinstance(doc, dict):
        raise ProviderError(CONFIG, f"{path.name}: expected a mapping of settings (region, cluster, templates)")
    try:
        settings = Settings.model_validate(doc)
    except ValidationError as exc:
        raise ProviderError(CONFIG, f"{path.name}: {_settings_error(exc)}") from None
    for i, t in enumerate(settings.templates):
        t._user_data = _user_data(t, i, path)
    return settings


def _settings_error(exc: ValidationError) -> str:
    text = first_error(exc)
    # A model-level check names its own key: drop the "document: " pydantic gives it.
    return text.removeprefix("document: ")


def _user_data(t: TemplateSettings, i: int, settings_file: Path) -> bytes | None:
    """The file's bytes; a relative path is taken from the settings file's folder, as the daemon does."""
    if t.user_data_file is None:
        return None
    where = f"{settings_file.name}: templates[{i}].user_data_file"
    path = Path(t.user_data_file).expanduser()
    path = path if path.is_absolute() else settings_file.parent / path
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProviderError(CONFIG, f"{where}: cannot read {path}: {exc.strerror}") from None
    if len(raw) > USER_DATA_LIMIT:
        raise ProviderError(CONFIG, f"{where}: {path} is {len(raw)} bytes; EC2 takes at most {USER_DATA_LIMIT}")
    return raw
