"""Elastic resources shown to Slurm as remote licenses (docs/licenses.md#slurm): what the bridge publishes.

Slurm refuses at submit a job asking for more of a license than its total,
so the total Slurm shows is the *ceiling* (the resource's base + the pool its
provider lends from), and a license-only reservation holds back the units not
borrowed (ceiling - base - borrowed): jobs may use base + borrowed. Per
mapped license (``slurm.licenses``), each round:

- **demand**: the units asked by jobs PENDING with reason ``Licenses``, less
  what Slurm could hand out now (base + borrowed - what its jobs hold);
- **in use**: Slurm's own count (``scontrol show licenses``' ``Used``) is
  recorded; idle reclaim and a return's use read keep the higher of it and
  the license server's (the provider's ``usage``), so no unit a job holds
  is returned;
- **publishing**: what is to be shown is recorded first, as a
  ``license_published`` fact under the lease and fence of the resource's
  provider (refused once that lease has moved on: no owner, nothing new is
  published), then sent (``sacctmgr`` for the total, ``scontrol`` for the
  reservation); the last recorded value is sent again, each round, until
  Slurm shows it (after a failed command, a restart, a failover);
- **shown**: once a round finds Slurm showing the recorded total and
  reservation, it records so (``license_shown``, under the same lease): the
  owner calls a return of borrowed units only once Slurm is seen holding
  them back, so Slurm never hands out a unit that has gone back to the pool.

``decide`` and ``commands`` are pure; ``LicenseBridge`` reads Slurm, records
and sends through a ``LicensePort`` (``slurm.license_commands`` live, a fake
in tests). Nothing here raises out of a round: each failure is one line
naming the license and the command, and the next round tries again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from config.models import Config, SlurmLicense
from messages.demand import UnitItem
from messages.errors import ControllerUnavailable
from messages.facts import Fact, LicensePublished, make_fact
from persistence.port import Controller
from state.projection import Projection

log = logging.getLogger("provisioner-slurm")

#: A reason Slurm gives a job that waits for licenses.
LICENSES = "Licenses"
_PAIR = re.compile(r"(\w+)=(\S*)")


class LicenseError(Exception):
    """A Slurm license command that failed or printed what cannot be read; one line naming it."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One license as ``scontrol show licenses`` lists it."""

    name: str
    total: int
    used: int
    reserved: int


def parse_licenses(text: str, command: str = "scontrol -o show licenses") -> dict[str, Seen]:
    """``scontrol -o show licenses``: one ``LicenseName=vcs@flex Total=12 Used=2 Free=10 Reserved=10 ...`` a
    line; a line that says otherwise is a LicenseError naming it."""
    out: dict[str, Seen] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        pairs = dict(_PAIR.findall(line))
        try:
            name = pairs["LicenseName"]
            out[name] = Seen(name=name, total=int(pairs["Total"]), used=int(pairs["Used"]),
                             reserved=int(pairs.get("Reserved", "0")))
        except (KeyError, ValueError):
            raise LicenseError(f"{command}: line {n} is not a license's: {line.strip()[:120]!r}") from None
    return out


def parse_reservation(text: str, command: str) -> dict[str, int]:
    """The ``Licenses=vcs@flex:10,...`` of ``scontrol -o show reservation NAME``."""
    pairs = dict(_PAIR.findall(text))
    if "ReservationName" not in pairs:
        raise LicenseError(f"{command}: not a reservation: {text.strip()[:120]!r}")
    return asked(pairs.get("Licenses", ""), command)


def asked(licenses: str, where: str = "") -> dict[str, int]:
    """A job's (or reservation's) licenses, ``vcs@flex:2,other`` (a count of 1 when none is said), by name."""
    out: dict[str, int] = {}
    if licenses in ("", "(null)"):
        return out
    for part in licenses.split(","):
        name, _, count = part.strip().partition(":")
        if not count and "*" in name:
            name, _, count = name.partition("*")
        try:
            n = int(count) if count else 1
        except ValueError:
            raise LicenseError(f"{where}: {part!r} is not NAME[:COUNT]") from None
        out[name] = out.get(name, 0) + n
    return out


class PendingJob(Protocol):
    @property
    def job_id(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def licenses(self) -> str: ...


def waiting(jobs: Iterable[PendingJob], license: str) -> int:
    """Units of ``license`` asked by the jobs PENDING because of licenses (``squeue`` lists ended jobs too)."""
    total = 0
    for j in jobs:
        if j.state == "PENDING" and j.reason == LICENSES:
            try:
                total += asked(j.licenses, f"job {j.job_id}").get(license, 0)
            except LicenseError as exc:
                log.warning("sync: licenses: %s", exc)
    return total


@dataclass(frozen=True, slots=True)
class Want:
    """What one license should look like in Slurm, and the demand it makes."""

    resource: str
    license: str
    provider: str
    #: The license's total in Slurm: base + the pool.
    count: int
    #: Held back by the reservation: count - base - borrowed.
    reserved: int
    #: Units Slurm's jobs hold (its ``Used``).
    in_use: int
    #: Units still wanted by jobs waiting on the license.
    demand: int

    def fact(self) -> LicensePublished:
        return LicensePublished(resource=self.resource, license=self.license, count=self.count,
                                reserved=self.reserved, in_use=self.in_use)


def decide(lic: SlurmLicense, cfg: Config, p: Projection, seen: Seen | None, pending: int) -> Want:
    """What ``lic`` should show, from the facts (``p``: base, borrowed, the pool's size, the license server's
    use) and what Slurm shows (``seen``) and has waiting (``pending`` units)."""
    res_cfg = next(r for r in cfg.resources if r.name == lic.resource)
    provider = res_cfg.provider or ""
    rec = p.resources.get(lic.resource)
    base = rec.base if rec is not None and rec.total else res_cfg.base
    borrowed = rec.borrowed if rec is not None else 0
    prov = p.providers.get(provider)
    pool = prov.description.pool(lic.resource) if prov is not None and prov.description is not None else None
    lendable = max(pool.capacity if pool is not None else 0, borrowed)
    count = base + lendable
    used = seen.used if seen is not None else 0
    free = max(0, base + borrowed - used)
    return Want(resource=lic.resource, license=lic.license, provider=provider, count=count,
                reserved=count - base - borrowed, in_use=used, demand=max(0, pending - free))


@dataclass(frozen=True, slots=True)
class Command:
    """One change to send: the license's total, or the reservation's units."""

    what: str  # "count" or "reserve"
    license: str
    value: int
    reservation: str = ""
    user: str = ""
    exists: bool = False


def commands(lic: SlurmLicense, target: LicensePublished, seen: Seen, reservation: Mapping[str, int] | None
             ) -> list[Command]:
    """What to send so that Slurm shows ``target`` (the last recorded publication). The total goes first when it
    rises (a reservation cannot hold more than the total) and after the reservation shrinks when it falls; and
    after a change of the total the reservation is sent again, whatever it says (slurmctld counts no license
    reserved by it once the total changed, until the reservation is updated: seen on 22.05)."""
    held = reservation.get(lic.license, 0) if reservation is not None else 0
    wanted = reservation is not None or target.reserved > 0
    reserve = Command("reserve", lic.license, target.reserved, lic.reservation_name, lic.reservation_user,
                      exists=reservation is not None)
    again = Command("reserve", lic.license, target.reserved, lic.reservation_name, lic.reservation_user, exists=True)
    if seen.total == target.count:
        return [reserve] if held != target.reserved and wanted else []
    total = Command("count", lic.license, target.count)
    if target.count > seen.total:
        return [total, reserve] if wanted else [total]
    if not wanted:
        return [total]
    return [reserve, total, again] if held != target.reserved else [total, again]


class LicensePort(Protocol):
    """Slurm's license commands (``slurm.license_commands``); a fake in tests. Each failure a LicenseError."""

    def licenses(self) -> Mapping[str, Seen]: ...
    def reservation(self, name: str) -> Mapping[str, int] | None: ...
    def send(self, command: Command) -> None: ...


@dataclass
class LicenseRound:
    """A round's outcome: the demand items, Slurm's use per resource (for the scheduler's view), lines logged."""

    items: list[UnitItem] = field(default_factory=list)
    in_use: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    sent: list[Command] = field(default_factory=list)


class LicenseBridge:
    def __init__(self, cfg: Config, controller: Controller, port: LicensePort,
                 clock: Callable[[], float] | None = None) -> None:
        assert cfg.slurm is not None
        self.cfg, self.controller, self.port = cfg, controller, port
        self.mapped = list(cfg.slurm.licenses)
        self.clock = clock
        #: resource -> the last publication recorded (accepted), as the facts say.
        self.recorded: dict[str, LicensePublished] = {}
        #: resource -> the last publication recorded as shown by Slurm (``license_shown``).
        self.shown: dict[str, LicensePublished] = {}

    def saw(self, facts: Sequence[Fact]) -> None:
        """Facts read by the sync service: the last ``license_published`` of each resource is what to show, the
        last ``license_shown`` what Slurm was last seen showing."""
        for f in facts:
            if isinstance(f.payload, LicensePublished):
                (self.recorded if f.payload.kind == "license_published" else self.shown)[f.payload.resource] = \
                    f.payload

    def round(self, p: Projection, jobs: Sequence[PendingJob], now: float) -> LicenseRound | None:
        """One round; None when Slurm's licenses could not be read (the demand stays as it was)."""
        out = LicenseRound()
        try:
            seen = self.port.licenses()
        except LicenseError as exc:
            log.error("sync: licenses: Slurm's licenses could not be read, nothing published: %s", exc)
            return None
        for lic in self.mapped:
            want = decide(lic, self.cfg, p, seen.get(lic.license), waiting(jobs, lic.license))
            # A license Slurm does not know wants nothing: no job can be given what is borrowed for it.
            demand = want.demand if lic.license in seen else 0
            out.items.append(UnitItem(id=f"slurm-{lic.resource}", resource=lic.resource, count=demand))
            if lic.license not in seen:
                out.errors.append(f"license {lic.license} (resource {lic.resource}): Slurm does not know it; make "
                                  f"it with sacctmgr add resource name={lic.license.split('@')[0]} "
                                  f"server={lic.license.split('@')[1]} type=license count={want.count} "
                                  "percentallowed=100 (docs/licenses.md#slurm)")
                continue
            out.in_use[lic.resource] = seen[lic.license].used
            self._record(lic, want.provider, want.fact(), now, out)
            target = self.recorded.get(lic.resource)
            if target is None:
                continue
            try:
                reservation = self.port.reservation(lic.reservation_name)
                sent = commands(lic, target, seen[lic.license], reservation)
                for cmd in sent:
                    self.port.send(cmd)
                    out.sent.append(cmd)
                if not sent:
                    # Slurm shows what is recorded: say so, once per change, so that a return the publication
                    # holds back may now be called.
                    shown = LicensePublished(kind="license_shown", resource=target.resource,
                                             license=target.license, count=target.count, reserved=target.reserved,
                                             in_use=seen[lic.license].used)
                    last = self.shown.get(lic.resource)
                    if last is None or (last.count, last.reserved) != (shown.count, shown.reserved):
                        self._record(lic, want.provider, shown, now, out)
            except LicenseError as exc:
                out.errors.append(f"license {lic.license} (resource {lic.resource}): {exc}; sent again next round")
        for line in out.errors:
            log.error("sync: licenses: %s", line)
        return out

    def _record(self, lic: SlurmLicense, provider: str, fact: LicensePublished, now: float,
                out: LicenseRound) -> None:
        """Record ``fact`` (a publication, or that Slurm shows one) under the current lease of the resource's
        provider, unless it is what was last recorded."""
        if fact.kind == "license_published" and self.recorded.get(lic.resource) == fact:
            return
        name = f"provider:{provider}"
        try:
            lease = self.controller.leases.get(name)
            if lease is None:
                out.errors.append(f"license {lic.license}: provider {provider} has no owner now (lease {name} "
                                  "is not held): nothing new is published")
                return
            result = self.controller.append([make_fact(fact, provider=provider, lease=lease.name,
                                                       fence=lease.fence, now=now)])
        except ControllerUnavailable as exc:
            out.errors.append(f"license {lic.license}: the controller is unreachable, nothing new is published: "
                              f"{exc}")
            return
        if result.refused:
            out.errors.append(f"license {lic.license}: the publication was refused ({result.refused[0].reason}): "
                              "nothing new is published")
            return
        self.saw(result.accepted)
