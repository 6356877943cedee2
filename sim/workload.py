"""A demo scheduler: pushes changing demand and host events through the controller.

It plays the part the real scheduler plays in production: it says what is
needed, reports hosts as they join, keeps them busy for a while, then lets
them go idle so reclaim can return them. One thread, bounded by ``stop()``.
Its arithmetic (hosts kept busy, unmet need, license use) is the
simulator's scheduler model, ``sim.scheduler``.

Its cluster is the hosts it joined itself, kept in memory only. Like a real
scheduler it sends its whole view of them (``put_supply``) whenever that view
changes, and first at its first step: after a restart it knows none of the
hosts the last run joined, so its first view lists none of them and the
daemon, after ``policy.unlisted_grace``, takes them for idle and returns them
(docs/scheduler-interface.md), instead of keeping the hosts that were busy at
the stop busy, and billed, for ever.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from messages.demand import DemandSnapshot, HostItem, SupplyHost, SupplySnapshot, UnitItem
from messages.states import SERVING
from persistence.port import Controller
from persistence.replay import replay
from sim.scheduler import license_use, use

log = logging.getLogger(__name__)

#: (seconds into the cycle, hosts the work needs, vcs units it needs); the demand pushed
#: is the unmet part of it, as a scheduler computes it.
PHASES = [(0, 4, 3), (30, 0, 0), (100, 2, 5), (140, 0, 0)]
CYCLE = 240.0
BUSY_FOR = 20.0
#: A host the workload joined is in its cluster while the provider has it in one of these states
#: (``running``: its join is posted, the daemon may not have applied it yet).
IN_CLUSTER = SERVING | {"running"}


@dataclass(frozen=True)
class Member:
    """A host of the workload's cluster: its provider, when it joined, and whether work runs on it."""

    provider: str
    joined_at: float
    busy: bool = True


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
        #: The hosts it joined, by name; the supply view it sent last (None before its first).
        self.cluster: dict[str, Member] = {}
        self.viewed: SupplySnapshot | None = None
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
        live = {i.name: i for i in p.instances.values() if i.state in IN_CLUSTER}
        # Hosts given back leave the cluster; hosts that came up join it, busy at once.
        self.cluster = {name: m for name, m in self.cluster.items() if name in live}
        for inst in live.values():
            if inst.state == "running" and inst.name not in self.cluster:
                self.cluster[inst.name] = Member(provider=inst.provider, joined_at=now)
                self.controller.post_host_event(inst.name, "joined", now, provider=inst.provider)
                self.controller.post_host_event(inst.name, "busy", now, provider=inst.provider)
        # Work beyond what is wanted finishes after a while: those hosts go idle.
        busy = sorted(name for name, m in self.cluster.items() if m.busy)
        for name in use(want_hosts, busy)[1]:
            m = self.cluster[name]
            if now - m.joined_at > BUSY_FOR:
                self.cluster[name] = Member(provider=m.provider, joined_at=m.joined_at, busy=False)
                self.controller.post_host_event(name, "idle", now, provider=m.provider)
        self._send_view()
        vcs = p.resources.get("vcs")
        # The license server sees the work use what it holds, up to what the work needs.
        in_use, unit_need = license_use(want_units + (vcs.base if vcs else 0), vcs.total if vcs else 0)
        if self.set_license_use is not None and in_use != self.license_use:
            self.set_license_use(in_use)
            self.license_use = in_use
        need = (use(want_hosts, list(self.cluster))[2], unit_need)
        if need != self.pushed:
            self.pushed = need
            snap = self.controller.put_demand(DemandSnapshot(items=[
                HostItem(id="demo-hosts", count=need[0], select={"ncpus": ">=4"}),
                UnitItem(id="demo-vcs", resource="vcs", count=need[1]),
            ]))
            log.info("demo: demand %d: %d more hosts, %d more vcs", snap.seq, *need)

    def _send_view(self) -> None:
        """The whole cluster as the workload sees it, when that differs from the view it sent last."""
        view = SupplySnapshot(hosts=[SupplyHost(name=name, provider=m.provider, state="busy" if m.busy else "idle")
                                     for name, m in sorted(self.cluster.items())])
        if self.viewed is None or view.hosts != self.viewed.hosts:
            self.viewed = self.controller.put_supply(view)
            log.info("demo: supply view %d: %d hosts, %d busy", self.viewed.seq, len(view.hosts),
                     sum(1 for h in view.hosts if h.state == "busy"))
