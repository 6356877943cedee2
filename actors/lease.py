"""LeaseActor: holds this daemon's leases and runs an actor for each one it holds.

A provider's actor runs exactly while its lease is held; the planner's while
the planner lease is held. Losing a lease (refused renewal, a refused write,
or no successful renewal for longer than the TTL allows) stops that actor at
once: its ``revoked`` event is set first, so it starts no script and writes
nothing more even while its stop message is still queued.

Role leases are held under the instance id (``instance.id``), so two
processes started with the same id would share them. A lease must belong to
one process, so each daemon first takes its **instance lease**,
``instance:<id>``, whose holder is the id, where the process runs and a
random token made when it starts (its incarnation). Only the process holding
it asks for role leases; any other process with the same id says so once,
as a warning, and waits as a standby, taking over when the first stops
renewing (after the TTL). The instance lease is renewed in the same call as
the roles, and no role's mandate outlives it. Taking it over, a process ends
the role leases still granted to the id (they were its predecessor's), so it
acts under fences of its own: a late write of the old process is refused.

A standby does not wait for its next round to find a lease free: when a
round is refused a lease (a role, or its instance lease) because another
holds it, it reads the lease table and asks the ticker to wake it the moment
the first of those leases lapses (``LAPSE_SLACK`` after, so that the
controller's clock has passed it too). So a standby holds a dead holder's
lease within ``ttl`` of that holder's last renewal, plus the time its own
call to the controller takes, not up to ``renew_every`` later.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.answers import KeptAnswers
from actors.base import Actor, Runs, handles
from actors.pacing import FirstScans
from actors.planner import PlannerActor
from actors.provider import CallsFactory, ProviderActor
from actors.pumps import Ticker
from actors.reconfigure import Reconfigure
from config.models import Config
from lease.port import INSTANCE, PLANNER, Lease, free_in
from messages.commands import Append, LeaseRevoked, Recipient, Tick
from messages.errors import ControllerUnavailable
from messages.facts import LeaseChanged, make_fact
from persistence.port import Controller
from state.shared import SharedProjection

log = logging.getLogger(__name__)

ACQUIRE_BATCH = 100
#: Seconds between the regular scans of the providers this daemon serves (20 a second), each
#: period: their first scans take turns (``actors.pacing``) as soon as their owners have caught up,
#: and each owner's later scans keep the phase its place in ``serves`` gives it, so that a thousand
#: providers are not all asked what they hold in the same moment, each period.
SCAN_PACE = 0.05
#: Seconds after a lease's lapse, as the lease table foretold it, that a standby asks for it: clocks read a
#: moment apart must both have passed it, or the grant is refused and asked for once more.
LAPSE_SLACK = 0.01


def incarnation(instance_id: str) -> str:
    """The holder of one process's instance lease: its id, host and pid, and a token of its own."""
    return f"{instance_id}@{socket.gethostname()}:{os.getpid()}/{secrets.token_hex(4)}"


class Revocation:
    """Whether an actor has lost the right to act under its lease (an Event's interface).

    Set at once when the lease is lost, and set by itself once the lease could
    have expired: a process stopped (SIGSTOP, a long pause) past its TTL wakes
    up with its mandate already void, before any of its threads can start a
    script or write, whichever thread runs first.
    """

    __slots__ = ("_monotonic", "_set", "_until")

    def __init__(self, valid_until: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        # A flag, not an Event: nobody waits on it, and an Event costs a Condition per provider.
        self._set = False
        self._until = valid_until
        self._monotonic = monotonic

    def extend(self, valid_until: float) -> None:
        self._until = max(self._until, valid_until)

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set or self._monotonic() >= self._until


@dataclass
class _Held:
    lease: Lease
    revoked: Revocation
    ref: Runs
    renewed_at: float


class LeaseActor(Actor):
    def __init__(
        self,
        cfg: Config,
        controller: Controller,
        journal: Recipient,
        budget: Recipient,
        ticker: Ticker,
        calls_factory: CallsFactory,
        home: Path,
        shared: SharedProjection,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        start_role: Callable[[str, Lease, Revocation], Any] | None = None,
        after_first_scans: Callable[[], None] | None = None,
        answers: KeptAnswers | None = None,
    ) -> None:
        """``after_first_scans``: called when a run of the owners' first scans is over (``FirstScans``).

        ``answers``: the process's answers not yet in the facts (``actors.answers``), which each owner it
        starts takes up: an owner that lost its lease leaves them to the next one this process starts.
        """
        super().__init__()
        self.answers = answers if answers is not None else KeptAnswers()
        #: The journal's projection of every fact, for the planner and the owners to read.
        self.shared = shared
        #: Starts the actor that runs under a role's lease; tests give a fake.
        self.start_role = start_role or self._start_role
        self.cfg = cfg
        self.controller = controller
        self.journal = journal
        self.budget = budget
        self.ticker = ticker
        self.calls_factory = calls_factory
        self.home = home
        self.clock = clock
        self.monotonic = monotonic
        self.holder = cfg.instance.id
        #: The instance lease: held by this process alone (its incarnation), before any role is asked for.
        self.instance_name = INSTANCE + cfg.instance.id
        self.incarnation = incarnation(cfg.instance.id)
        self.instance: Lease | None = None
        #: Until when (monotonic) the instance lease is surely still ours; no role's mandate outlives it.
        self.instance_until = float("-inf")
        #: Whether this process has said it waits behind another one with the same id.
        self.standby_said = False
        #: Leases asked for in one call: a thousand providers take ten calls, not a thousand.
        self.acquire_batch = ACQUIRE_BATCH
        self.held: dict[str, _Held] = {}
        self.last_round = float("-inf")
        #: When (monotonic) the first lease refused last round lapses: the next round comes then, if sooner.
        self.next_try = math.inf
        #: The last moment the ticker was asked to wake this actor at.
        self.wake_asked = math.inf
        #: The owners' first scans take turns, as many at once as the script workers run (two calls each).
        self.first_scans = FirstScans(cfg.instance.script_workers // 2, after=after_first_scans)
        self.roles = self._roles(cfg)

    def on_start(self) -> None:
        self._round()

    def on_stop(self) -> None:
        for name in reversed(list(self.held)):
            self._drop(name, "daemon stopping", release=True)
        if self.instance is not None:
            # Given up last: a standby with the same id takes over at its next round, not after the TTL.
            try:
                self.controller.leases.release(self.instance)
            except ControllerUnavailable as exc:
                log.warning("lease %s: release failed, it will expire: %s", self.instance_name, exc)
            self.instance = None

    @handles(Tick)
    def _tick(self, msg: Tick) -> None:
        dropped = self._drop_void()
        now = self.monotonic()
        if now - self.last_round >= self.cfg.lease.renew_every or now >= self.next_try:
            self._round(dropped)

    def _drop_void(self) -> set[str]:
        """Stop acting before the controller could think a lease expired; the names given up."""
        dropped = set()
        for name, h in list(self.held.items()):
            if h.revoked.is_set():
                self._drop(name, "no successful renewal within the TTL")
                dropped.add(name)
        return dropped

    @handles(Reconfigure)
    def _reconfigure(self, msg: Reconfigure) -> None:
        """A reloaded config: roles no longer served stop, and their leases are released once their actors
        have stopped; owners whose script changed are replaced; the others are told; new roles are taken."""
        self.cfg = msg.config
        self.roles = self._roles(msg.config)
        restart = {f"provider:{name}" for name in msg.restart}
        for name in list(self.held):
            if name not in self.roles:
                self._drop(name, "no longer served (config reloaded)", release=True)
            elif name in restart:
                self._drop(name, "its script changed (config reloaded): a fresh owner takes over", release=True)
            else:
                self.held[name].ref.tell(msg)
        self._round()

    @staticmethod
    def _roles(cfg: Config) -> list[str]:
        return ([PLANNER] if cfg.instance.planner else []) + [f"provider:{p}" for p in cfg.instance.serves]

    @handles(LeaseRevoked)
    def _revoked(self, msg: LeaseRevoked) -> None:
        if msg.name in self.held:
            self._drop(msg.name, msg.reason)

    def _round(self, dropped: frozenset[str] | set[str] = frozenset()) -> None:
        self.last_round = self.monotonic()
        self.next_try = math.inf
        ttl = self.cfg.lease.ttl
        if self.instance is None and not self._take_instance(ttl):
            return
        dropped = set(dropped) | self._renew(ttl)
        if self.instance is None:
            return
        # A lease lost this round is asked for again next round, after its actor stopped.
        wanted = [name for name in self.roles if name not in self.held and name not in dropped]
        refused: list[str] = []
        for at in range(0, len(wanted), self.acquire_batch):
            if at and self.monotonic() - self.last_round >= self.cfg.lease.renew_every:
                # Starting a thousand actors takes a while: the first leases of a long round must
                # not run out before it ends.
                self.last_round = self.monotonic()
                dropped |= self._renew(ttl)
                if self.instance is None:
                    return
            batch = [name for name in wanted[at:at + self.acquire_batch] if name not in dropped]
            started = self.monotonic()
            try:
                leases = self.controller.leases.acquire_all(batch, self.holder, ttl)
            except ControllerUnavailable as exc:
                log.warning("leases: controller unreachable, %d not acquired: %s", len(batch), exc)
                return
            for name, lease in zip(batch, leases):
                if lease is not None:
                    self._start(name, lease, started)
                else:
                    refused.append(name)
        self._wait_for(refused)

    def _wait_for(self, names: list[str]) -> None:
        """Refused ``names`` (another holds them): have the next round come the moment the first lapses.

        Sooner than the next regular round only; the table is read only when something was refused, so
        an owner holding all it wants reads nothing more.
        """
        if not names:
            return
        try:
            table = self.controller.leases.table()
        except ControllerUnavailable as exc:
            log.warning("leases: controller unreachable, the lease table not read: %s", exc)
            return
        now = self.monotonic()
        wait = free_in(table, names)
        # None: one freed since it was refused; the next tick asks again.
        at = now + (wait if wait is not None else 0.0) + LAPSE_SLACK
        if at >= self.last_round + self.cfg.lease.renew_every:
            return
        self.next_try = at
        if at != self.wake_asked:
            self.wake_asked = at
            self.ticker.wake(self.actor_ref, at - now)

    def _take_instance(self, ttl: float) -> bool:
        """Take this process's instance lease, or wait behind the process holding it; whether taken."""
        started = self.monotonic()
        try:
            lease = self.controller.leases.acquire(self.instance_name, self.incarnation, ttl)
        except ControllerUnavailable as exc:
            log.warning("leases: controller unreachable, instance lease %s not acquired: %s", self.instance_name, exc)
            return False
        if lease is None:
            self._wait_for([self.instance_name])
            if not self.standby_said:
                self.standby_said = True
                try:
                    other = self.controller.leases.get(self.instance_name)
                except ControllerUnavailable:
                    other = None
                log.warning("instance %s: another process holds lease %s (%s): this one takes no role and waits "
                            "as a standby; it takes over if that process stops renewing (lease.ttl). If both were "
                            "meant to run, give each its own instance.id", self.holder, self.instance_name,
                            other.holder if other else "it has just let go")
            return False
        # Role leases still granted to this id were an earlier process's (or ours before the instance lease
        # was lost): end them, so that every grant of this process comes under a fence of its own.
        try:
            for stale in self.controller.leases.all():
                if stale.holder == self.holder and stale.name in self.roles and stale.name not in self.held:
                    self.controller.leases.release(stale)
        except ControllerUnavailable as exc:
            log.warning("leases: controller unreachable, the leases of an earlier process of instance %s "
                        "not ended; trying again: %s", self.holder, exc)
            return False
        self.instance, self.instance_until = lease, self._valid_until(started)
        if self.standby_said:
            log.warning("instance %s: this process (%s) took over lease %s: the process that held it stopped "
                        "renewing it", self.holder, self.incarnation, self.instance_name)
            self.standby_said = False
        else:
            log.info("lease %s acquired by this process (%s)", self.instance_name, self.incarnation)
        return True

    def _lose_instance(self, reason: str) -> set[str]:
        """The instance lease is gone: every role goes with it; the next rounds try to take it again."""
        log.warning("lease %s lost (%s): every role of this process is given up", self.instance_name, reason)
        dropped = set(self.held)
        for name in reversed(list(self.held)):
            self._drop(name, f"the instance lease {self.instance_name} was lost")
        self.instance, self.instance_until = None, float("-inf")
        return dropped

    def _renew(self, ttl: float) -> set[str]:
        """Renew the instance lease and every role lease held, in one call: a thousand providers are one round trip.

        Returns the names given up.
        """
        # A slow controller may have made this round outlast a lease: stop before asking again.
        dropped = self._drop_void()
        if self.instance is None:
            return dropped
        names = [name for name in self.roles if name in self.held]
        started = self.monotonic()
        try:
            renewed = self.controller.leases.renew_all([self.instance] + [self.held[n].lease for n in names], ttl)
        except ControllerUnavailable as exc:
            log.warning("leases: controller unreachable, %d not renewed: %s", len(names) + 1, exc)
            return dropped
        if renewed[0] is None:
            return dropped | self._lose_instance("renewal refused: it expired or passed to another process")
        self.instance, self.instance_until = renewed[0], self._valid_until(started)
        for name, lease in zip(names, renewed[1:]):
            h = self.held.get(name)
            if h is None:
                continue
            if lease is None:
                self._drop(name, "renewal refused: the lease expired or passed to another holder")
                dropped.add(name)
            else:
                h.lease, h.renewed_at = lease, started
                h.revoked.extend(self._valid_until(started))
        return dropped

    def _valid_until(self, renewed_at: float) -> float:
        """Act no longer than the TTL allows, less a margin for the renewal's own round trip."""
        return renewed_at + self.cfg.lease.ttl - self.cfg.lease.renew_every / 2

    def _start(self, name: str, lease: Lease, renewed_at: float) -> None:
        log.info("lease %s acquired with fence %d", name, lease.fence)
        revoked = Revocation(min(self._valid_until(renewed_at), self.instance_until), self.monotonic)
        self.journal.tell(Append(facts=[make_fact(
            LeaseChanged(kind="lease_acquired", name=name, holder=self.holder, fence=lease.fence),
            provider=name.split(":", 1)[1] if name.startswith("provider:") else "",
            lease=name, fence=lease.fence, now=self.clock())]))
        ref = self.start_role(name, lease, revoked)
        self.held[name] = _Held(lease=lease, revoked=revoked, ref=ref, renewed_at=renewed_at)
        self.ticker.add(ref)

    def _start_role(self, name: str, lease: Lease, revoked: Revocation) -> Any:
        if name == PLANNER:
            return PlannerActor.start(lease, revoked, self.journal, self.budget, self.actor_ref,
                                      self.cfg.policy, self.shared, clock=self.clock, caps=self.cfg.budget,
                                      provider_configs=self.cfg.providers)
        pcfg = self.cfg.provider(name.split(":", 1)[1])
        assert pcfg is not None, "config validation guarantees served providers exist"
        return ProviderActor.start(
            pcfg, lease, revoked, self.journal, self.actor_ref, self.cfg.policy,
            self.cfg.resources, self.home / "providers" / pcfg.name, self.calls_factory, self.shared,
            clock=self.clock, scan_after=SCAN_PACE * self.cfg.instance.serves.index(pcfg.name),
            turns=self.first_scans, answers=self.answers, shown=self.cfg.shown_to_scheduler(),
        )

    def _drop(self, name: str, reason: str, release: bool = False) -> None:
        h = self.held.pop(name, None)
        if h is None:
            return
        h.revoked.set()
        self.ticker.remove(h.ref)
        h.ref.stop(block=False)
        # Given back on a clean stop is no trouble; lost while running is worth a warning.
        (log.info if release else log.warning)("lease %s (fence %d) given up: %s", name, h.lease.fence, reason)
        if release:
            h.ref.stop(block=True, timeout=10)
            try:
                self.controller.leases.release(h.lease)
            except ControllerUnavailable as exc:
                log.warning("lease %s: release failed, it will expire: %s", name, exc)
        # Unfenced: the lease is gone, and this only records that we know it.
        self.journal.tell(Append(facts=[make_fact(
            LeaseChanged(kind="lease_lost", name=name, holder=self.holder, fence=h.lease.fence),
            provider=name.split(":", 1)[1] if name.startswith("provider:") else "", now=self.clock())]))

    def held_leases(self) -> list[Lease]:
        return [h.lease for h in self.held.values()]

    def actors(self) -> list[Any]:
        """The actors running under this daemon's leases (asked through a proxy)."""
        return [h.ref for h in self.held.values()]
