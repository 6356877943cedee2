"""A demo scheduler: pushes changing demand and host events through the controller.

It plays the part the real scheduler plays in production: it says what is
needed, reports hosts as they join, keeps them busy for a while, then lets
them go idle so reclaim can return them. One thread, bounded by ``stop()``.
Its arithmetic (hosts kept busy, unmet need, license use) is the
simulator's scheduler model, ``sim.scheduler``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from messages.demand import DemandSnapshot, HostItem, UnitItem
from persistence.port import Controller
from persistence.replay import replay
from sim.scheduler import license_use, use

log = logging.getLogger(__name__)

#: (seconds into the cycle, hosts the work needs, vcs units it needs); the demand pushed
#: is the unmet part of it, as a scheduler computes it.
PHASES = [(0, 4, 3), (30, 0, 0), (100, 2, 5), (140, 0, 0)]
CYCLE = 240.0
BUSY_FOR = 20.0


class DemoWorkload:
    def __init__(
        self,
        controller: Controller,
        set_license_use: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.time,
        period: float = 1.0,
    ) -> None:
        self.controller = controller
        self.set_license_use = set_license_use
        self.license_use: int | None = None
        self.clock = clock
        self.period = period
        self.started = clock()
        self.pushed: tuple[int, int] | None = None
        self.joined: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-workload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, if it was started (not when the daemon it plays for failed to start)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.step(self.clock())
            except Exception:  # a demo hiccup must not end the demo
                log.exception("demo workload step failed")

    def step(self, now: float) -> None:
        at = (now - self.started) % CYCLE
        _, want_hosts, want_units = PHASES[max(i for i, (t, _, _) in enumerate(PHASES) if at >= t)]
        p = replay(self.controller)
        serving = [i for i in p.instances.values() if i.state in ("joined", "idle", "busy")]
        busy = sorted((i for i in serving if i.state == "busy"), key=lambda i: i.name)
        for inst in p.instances.values():
            if inst.state == "running" and inst.name not in self.joined:
                self.joined[inst.name] = now
                self.controller.post_host_event(inst.name, "joined", now)
                self.controller.post_host_event(inst.name, "busy", now)
        # Work beyond what is wanted finishes after a while: those hosts go idle.
        for inst in use(want_hosts, busy)[1]:
            if now - self.joined.get(inst.name, now) > BUSY_FOR:
                self.controller.post_host_event(inst.name, "idle", now)
        vcs = p.resources.get("vcs")
        # The license server sees the work use what it holds, up to what the work needs.
        in_use, unit_need = license_use(want_units + (vcs.base if vcs else 0), vcs.total if vcs else 0)
        if self.set_license_use is not None and in_use != self.license_use:
            self.set_license_use(in_use)
            self.license_use = in_use
        need = (use(want_hosts, serving)[2], unit_need)
        if need != self.pushed:
            self.pushed = need
            snap = self.controller.put_demand(DemandSnapshot(items=[
                HostItem(id="demo-hosts", count=need[0], select={"ncpus": ">=4"}),
                UnitItem(id="demo-vcs", resource="vcs", count=need[1]),
            ]))
            log.info("demo: demand %d: %d more hosts, %d more vcs", snap.seq, *need)
