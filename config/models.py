"""The daemon's configuration as strict models.

Reading them from YAML, with errors that name the file and line, is ``config.load``.
The planner's settings are made from them by ``policy.settings``: a config says what
an operator wants, and knows nothing of how the policy works it out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from config.schedule import ScheduleField, TimeZone
from config.values import Duration, Name, Size, Variable, parse_duration
from messages.base import Model
from messages.description import SupplyKind


class InstanceConfig(Model):
    id: Name
    serves: list[Name] = Field(default_factory=list)
    planner: bool = False
    #: Threads running the scripts of all the providers this instance serves; runs beyond them wait.
    script_workers: int = Field(default=32, ge=1, le=1024)


class ControllerConfig(Model):
    url: str = Field(pattern=r"^(sqlite:///.+|etcd://.+)$")


class ApiConfig(Model):
    listen: str = "127.0.0.1:8787"
    tokens: Path | None = None
    tls: dict[str, Path] | None = None
    #: Largest request body read, counted as it arrives and before the token is checked (413 beyond).
    max_body: Size = Field(default=32 * 1024 * 1024, ge=1024)


#: The lease's defaults, when neither ``ttl`` nor ``renew_every`` is given.
TTL, RENEW_EVERY = 10.0, 3.0


class LeaseConfig(Model):
    """How long a lease lives, and how often its owner renews it.

    A default never clashes with the value given beside it: ``renew_every``
    left out is 3s, or a third of ``ttl`` when ttl is 3s or shorter; ``ttl``
    left out is 10s, or three times ``renew_every`` when that is 10s or longer.
    So ``lease: {ttl: 3s}`` means what it says, instead of an error about a
    renew_every nobody wrote (only a section that used to be refused reads
    differently: every value accepted before is the same).
    """

    ttl: Duration = TTL
    renew_every: Duration = RENEW_EVERY

    @model_validator(mode="before")
    @classmethod
    def _defaults_fit(cls, data: Any) -> Any:
        if not isinstance(data, dict) or ("ttl" in data) == ("renew_every" in data):
            return data
        try:
            if "ttl" in data:
                ttl = parse_duration(data["ttl"])
                return {**data, "renew_every": ttl / 3} if ttl <= RENEW_EVERY else data
            renew_every = parse_duration(data["renew_every"])
            return {**data, "ttl": renew_every * 3} if renew_every >= TTL else data
        except ValueError:
            return data  # the field's own check says what is wrong with the value

    @model_validator(mode="after")
    def _renew_before_expiry(self) -> "LeaseConfig":
        if self.renew_every >= self.ttl:
            raise ValueError("renew_every must be shorter than ttl")
        return self


class SpendLimit(Model):
    amount: float = Field(ge=0)
    per: Literal["day", "week", "month"] = "month"


class BudgetConfig(Model):
    max_cost_per_hour: float | None = Field(default=None, ge=0)
    max_spend: SpendLimit | None = None
    max_hosts: int | None = Field(default=None, ge=0)
    max_units: int | None = Field(default=None, ge=0)



class ConsolidationConfig(Model):
    """Busy hosts replaced by cheaper ones (docs/policy.md#consolidation): the scheduler drains the old host,
    a host of the cheaper template is made, the old one goes back once idle."""

    enabled: bool = False
    #: The disruption budget: at most this many hosts draining at once (those draining already count) ...
    max_hosts: int | None = Field(default=1, ge=0, le=100_000)
    #: ... and at most this share of the hosts up (joined, idle or busy), rounded up; none: no share.
    max_percent: float | None = Field(default=None, gt=0, le=100)
    #: Windows in which nothing is drained (``08:00-20:00 Mon-Fri``, in ``policy.timezone``).
    never_during: ScheduleField | None = None
    #: The replacement must cost at least this share less per hour (0.1: 10 % cheaper).
    min_saving: float = Field(default=0.1, ge=0, lt=1)

    @model_validator(mode="after")
    def _bounded(self) -> "ConsolidationConfig":
        if self.enabled and self.max_hosts is None and self.max_percent is None:
            raise ValueError("consolidation needs a disruption budget: max_hosts, max_percent or both")
        return self


class PolicyConfig(Model):
    idle_time: Duration = 600.0
    cooldown: Duration = 120.0
    backoff_max: Duration = 1800.0
    request_timeout: Duration = 900.0
    join_timeout: Duration = 1200.0
    #: Hosts joined (units granted) this recently still count as in flight:
    #: the scheduler's next demand may not include them yet.
    join_grace: Duration = 60.0
    orphans: Literal["return", "report"] = "return"
    #: A machine the provider's list stops showing is declared lost only after it was missing from
    #: several lists over this long (a cloud's list may miss it for a while).
    lost_after: Duration = 600.0
    #: A machine the provider still lists this long after its return completed is returned again.
    return_grace: Duration = 300.0
    #: A joined host the scheduler's view (``PUT /v1/supply``) stops listing is, after this long,
    #: handled as idle (orphans: return) or reported as an orphan (orphans: report).
    unlisted_grace: Duration = 600.0
    #: A demand snapshot with more items is refused whole (REST, CLI), and ignored by the planner.
    max_demand_items: int = Field(default=100_000, ge=1)
    #: How often owners poll request status, and the planner re-plans.
    poll_every: Duration = 5.0
    plan_every: Duration = 5.0
    #: The time zone schedules are read in (an IANA name).
    timezone: TimeZone = "UTC"
    #: Warm capacity over all hosts providers together: hosts kept idle and ready beyond demand, and a
    #: floor of hosts never given back, while ``warm_schedule`` is open (always, without one).
    min_idle: int = Field(default=0, ge=0, le=100_000)
    min_hosts: int = Field(default=0, ge=0, le=100_000)
    warm_schedule: ScheduleField | None = None
    #: Moving busy hosts to cheaper templates once those have room, through the scheduler (off by default).
    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)



class ScriptConfig(Model):
    style: Literal["lsf", "v2"]
    #: lsf: folder of the five scripts; v2: one executable.
    path: Path
    #: lsf: the provider's conf folder (PRO_CONF_DIR); defaults to ``path``.
    conf_dir: Path | None = None
    #: Writable state folder (PRO_DATA_DIR / HF_PROVIDER_WORKDIR); default under the daemon's home.
    work_dir: Path | None = None
    #: Per-action timeouts; actions not named use ``timeout``.
    timeout: Duration = 60.0
    timeouts: dict[str, Duration] = Field(default_factory=dict)
    max_concurrent: int = Field(default=4, ge=1, le=64)
    #: Extra arguments or interpreter? No: a script is run as-is. Options for LSF's SCRIPT_OPTIONS.
    script_options: str = ""
    #: Variables of the env_file whose values are secret although their names do not say so (names
    #: with SECRET, TOKEN, PASSWORD, CREDENTIAL or KEY, but not KEY_ID, are secret anyway). Only
    #: secrets are masked in what a script prints; an identifier holding one is refused.
    secrets: list[Variable] = Field(default_factory=list)
    #: ``oneshot``: one process per call. ``persistent`` (v2 only): one long-running ``path serve``
    #: process per provider, talked to in JSON lines (protocol v1, docs/script-contract.md), so a
    #: provider keeps its sessions, clients and rate limits between calls.
    mode: Literal["oneshot", "persistent"] = "oneshot"
    #: persistent: how often the process is pinged; two pings unanswered and it is killed and restarted.
    ping_every: Duration = Field(default=5.0, gt=0)
    #: persistent: how long a starting process has to say hello.
    start_timeout: Duration = Field(default=30.0, gt=0)
    #: persistent: the longest wait between restarts of a process that keeps failing.
    restart_backoff_max: Duration = Field(default=60.0, gt=0)


#: The keys of ``script`` that only a persistent provider uses.
PERSISTENT_KEYS = ("ping_every", "start_timeout", "restart_backoff_max")


class DescribeOverrides(Model):
    """Config that overrides or completes what a provider's ``describe`` says."""

    priority: int | None = None
    cost_per_hour: float | dict[str, float] | None = None
    lead_time: Duration | None = None
    min_hold: Duration | None = None
    min_request: int | None = Field(default=None, ge=1)
    step: int | None = Field(default=None, ge=1)
    capacity: int | None = Field(default=None, ge=0)
    region: str | None = None
    zone: str | None = None


class RateLimit(Model):
    count: int = Field(ge=1)
    per: Duration = 60.0

    @model_validator(mode="after")
    def _positive(self) -> "RateLimit":
        if self.per <= 0:
            raise ValueError("per must be longer than 0s")
        return self


class WarmRule(Model):
    """Warm capacity at one provider, or at one of its templates: hosts kept idle and ready beyond demand
    (``min_idle``) and a floor never given back (``min_hosts``), while ``schedule`` is open."""

    #: One template's hosts; none: any of the provider's (new ones of its first-ranked template with room).
    template: str | None = Field(default=None, min_length=1)
    min_idle: int = Field(default=0, ge=0, le=100_000)
    min_hosts: int = Field(default=0, ge=0, le=100_000)
    #: When the rule holds; none: always.
    schedule: ScheduleField | None = None


class ProviderPolicy(Model):
    """The operator's limits for one provider, on top of what it says of itself."""

    max_cost_per_hour: float | None = Field(default=None, ge=0)
    rate: RateLimit | None = None
    #: Seconds per billed unit; 0 bills per second.
    billing_unit: Duration = 0.0
    return_window: Duration | None = None
    max_lifetime: Duration | None = None
    #: Warm capacity (hosts providers only).
    warm: list[WarmRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _window_within_unit(self) -> "ProviderPolicy":
        if self.return_window is not None and self.return_window >= (self.billing_unit or 3600.0):
            raise ValueError("return_window must be shorter than the billing unit (billing_unit, or 1h)")
        return self



class ProviderConfig(Model):
    name: Name
    kind: SupplyKind
    script: ScriptConfig
    env_file: Path | None = None
    describe: DescribeOverrides = Field(default_factory=DescribeOverrides)
    policy: ProviderPolicy = Field(default_factory=ProviderPolicy)


class ResourceConfig(Model):
    name: Name
    elastic: bool = False
    base: int = Field(default=0, ge=0)
    provider: Name | None = None

    @model_validator(mode="after")
    def _elastic_needs_provider(self) -> "ResourceConfig":
        if self.elastic and not self.provider:
            raise ValueError("an elastic resource needs a provider")
        return self


class SlurmNodeSet(Model):
    """Power saving: which of Slurm's ``State=CLOUD`` nodes are made of what."""

    #: A Slurm hostlist expression: ``cloud[1-16]``.
    names: str = Field(min_length=1)
    provider: Name
    template: str = Field(min_length=1)


class SlurmLicense(Model):
    """An elastic resource shown to Slurm as one of its remote licenses (docs/licenses.md#slurm)."""

    #: The elastic resource of ``resources``.
    resource: Name
    #: Slurm's name for it, ``NAME@SERVER``, as jobs ask for it (``sbatch -L vcs@flex:2``) and ``sacctmgr``
    #: made it (``sacctmgr add resource name=vcs server=flex type=license``).
    license: str = Field(pattern=r"^[A-Za-z0-9_.+-]+@[A-Za-z0-9_.+-]+$")
    #: The license-only reservation that holds back the units not borrowed (made by the bridge).
    reservation: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    #: Who the reservation is for (Slurm needs a user or an account); nobody's jobs ask for it.
    reservation_user: str = Field(default="root", pattern=r"^[A-Za-z0-9_.-]+$")

    @property
    def reservation_name(self) -> str:
        return self.reservation or f"provisioner-{self.resource}"


class SlurmConfig(Model):
    """The Slurm bridge (``provisioner-slurm``, docs/slurm.md)."""

    #: Power saving: the node sets ResumeProgram and SuspendProgram name nodes of.
    nodes: list[SlurmNodeSet] = Field(default_factory=list)
    #: Dynamic nodes: the partitions whose pending jobs become demand.
    partitions: list[Name] = Field(default_factory=list)
    #: How often ``provisioner-slurm sync`` reads Slurm's nodes and jobs.
    sync_every: Duration = Field(default=10.0, gt=0)
    #: A host made for a name slurm.conf no longer declares is given back after this long.
    undeclared_grace: Duration = Field(default=600.0, ge=0)
    #: Dynamic nodes: how long a node idles before it is drained (then given back once it runs nothing,
    #: after ``policy.idle_time``); ``policy.idle_time`` when not set.
    drain_after: Duration | None = Field(default=None, ge=0)
    #: Seconds each Slurm command may take.
    command_timeout: Duration = Field(default=30.0, gt=0)
    #: Elastic resources shown to Slurm as licenses: their totals follow what is borrowed, and pending jobs
    #: waiting on them are their demand.
    licenses: list[SlurmLicense] = Field(default_factory=list)


class Config(Model):
    instance: InstanceConfig
    controller: ControllerConfig
    api: ApiConfig = Field(default_factory=ApiConfig)
    lease: LeaseConfig = Field(default_factory=LeaseConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    providers: list[ProviderConfig] = Field(default_factory=list)
    resources: list[ResourceConfig] = Field(default_factory=list)
    #: Where the daemon keeps provider work folders and its audit log.
    home: Path | None = None
    slurm: SlurmConfig | None = None

    def provider(self, name: str) -> ProviderConfig | None:
        return next((p for p in self.providers if p.name == name), None)

    def shown_to_scheduler(self) -> frozenset[str]:
        """The elastic resources a scheduler's bridge shows its scheduler (``slurm.licenses``)."""
        return frozenset(lic.resource for lic in self.slurm.licenses) if self.slurm is not None else frozenset()
