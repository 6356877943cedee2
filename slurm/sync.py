"""``provisioner-slurm sync``: the long-running service that keeps the daemon and Slurm in step.

Every ``slurm.sync_every`` it reads Slurm's nodes (and, for dynamic nodes,
its jobs), catches its projection of the facts up from the controller, and
carries out a round (``slurm.drift``): the scheduler's view of the hosts
(``put_supply``), the demand of pending jobs (``put_demand``, when it
changed), the facts of drift it fixed, and ``scontrol`` updates. A Slurm
command that is missing, fails or is slow ends the round before anything is
sent: a view that was not read says nothing, so nothing is given back for
it. With ``slurm.licenses`` configured it reads the jobs too, and ``slurm.licenses``
(the module) adds each license's units demand to the same snapshot, Slurm's use of it to
the view, and publishes its total and reservation (a license command that
fails is logged there and ends nothing). The service itself never stops on a
bad round; SIGTERM ends it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from config.models import Config
from messages.demand import DemandSnapshot, UnitItem
from messages.errors import ControllerUnavailable
from messages.facts import make_fact
from persistence.port import Controller
from slurm.drains import drain_updates
from slurm.drift import Memory, Node, Round, reconcile
from slurm.dynamic import Job, demand
from slurm.licenses import LicenseBridge, LicensePort
from slurm.power import node_sets
from slurm.warm import WarmHold
from state.projection import Projection

log = logging.getLogger("provisioner-slurm")

#: Facts read from the controller at a time while catching up.
CHUNK = 5_000


class SlurmError(Exception):
    """A Slurm command that is missing, failed, hung or printed what cannot be read; one line."""


class Slurm(Protocol):
    """The bridge's port to Slurm's commands (``slurm.commands``); a fake in tests."""

    def nodes(self) -> Sequence[Node]: ...
    def jobs(self) -> Sequence[Job]: ...
    def scontrol(self, args: list[str]) -> None: ...


class Sync:
    def __init__(self, cfg: Config, controller: Controller, slurm: Slurm, clock: Callable[[], float] = time.time):
        assert cfg.slurm is not None
        self.cfg, self.scfg = cfg, cfg.slurm
        self.controller = controller
        self.slurm = slurm
        self.clock = clock
        self.p = Projection()
        self.memory = Memory()
        self.declared = node_sets(cfg.slurm)
        self.warm = WarmHold.of(cfg)
        self.last_demand: DemandSnapshot | None = None
        #: Elastic resources shown as Slurm licenses (``slurm.licenses``): ``slurm`` is their port too.
        self.licenses = LicenseBridge(cfg, controller, cast(LicensePort, slurm)) if cfg.slurm.licenses else None
        self.license_items: list[UnitItem] = []

    def catch_up(self) -> None:
        while True:
            facts = self.controller.read(after=self.p.seq, limit=CHUNK)
            if not facts:
                return
            self.p.apply_all(facts)
            if self.licenses is not None:
                self.licenses.saw(facts)
            if len(facts) < CHUNK:
                return

    def round(self) -> Round | None:
        """One round; None when Slurm or the controller could not be read (nothing was sent)."""
        try:
            nodes = list(self.slurm.nodes())
            jobs = list(self.slurm.jobs()) if self.scfg.partitions or self.licenses is not None else []
        except SlurmError as exc:
            log.error("sync: Slurm could not be read, nothing sent this round: %s", exc)
            return None
        try:
            self.catch_up()
            now = self.clock()
            r = reconcile(nodes, self.p, self.scfg, self.declared, now, self.memory, self.cfg.policy.idle_time,
                          self.warm)
            if r.facts:
                self.controller.append([make_fact(payload, provider=provider, now=now) for provider, payload
                                        in r.facts])
            supply = r.supply
            if self.licenses is not None:
                lic = self.licenses.round(self.p, jobs, now)
                if lic is not None:
                    self.license_items = list(lic.items)
                    supply = supply.model_copy(update={"resources": lic.in_use})
            self.controller.put_supply(supply)
            if self.scfg.partitions or self.licenses is not None:
                snapshot, skipped = demand(jobs, self.scfg.partitions) if self.scfg.partitions else \
                    (DemandSnapshot(), [])
                for line in skipped:
                    log.warning("sync: %s", line)
                if self.license_items:
                    snapshot = snapshot.model_copy(update={"items": [*snapshot.items, *self.license_items]})
                if self.last_demand is None or snapshot.items != self.last_demand.items:
                    self.controller.put_demand(snapshot)
                    self.last_demand = snapshot
        except ControllerUnavailable as exc:
            log.error("sync: the controller is unreachable, nothing sent this round: %s", exc)
            return None
        self.memory = r.memory
        for line in r.notes:
            log.warning("sync: %s", line)
        asked = drain_updates(nodes, self.p, self.declared) if self.scfg.partitions else []
        for update in asked:
            log.info("sync: node %s drained: %s", update.node, dict(update.fields)["reason"])
        for update in [*r.updates, *asked]:
            try:
                self.slurm.scontrol(update.argv())
            except SlurmError as exc:
                log.error("sync: %s", exc)
        return r

    def run(self, stopping: threading.Event) -> None:
        log.info("sync: every %.0fs, %d power-saving nodes, partitions %s, licenses %s", self.scfg.sync_every,
                 len(self.declared), ", ".join(self.scfg.partitions) or "none",
                 ", ".join(f"{lic.license} ({lic.resource})" for lic in self.scfg.licenses) or "none")
        while not stopping.is_set():
            started = time.monotonic()
            try:
                self.round()
            except Exception:  # a bug must not end the service: the next round reads everything afresh
                log.exception("sync: the round failed")
            stopping.wait(max(0.0, self.scfg.sync_every - (time.monotonic() - started)))
