"""The composition root: start the actors in dependency order, stop them in reverse.

journal (the only writer) -> budget -> lease actor (which starts the planner
and one actor per owned provider) -> ticker and tailer (the two threads that
turn time and the controller's changes into messages).
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

from actors.budget import BudgetActor
from actors.journal import Feed, JournalActor
from actors.lease import LeaseActor
from actors.pumps import Tailer, Ticker
from messages.commands import Append, Appended
from messages.facts import Fact
from persistence.controller import open_controller
from persistence.port import Controller, Cursor
from providers.runner import ScriptRunner
from provisioner.config import Config

log = logging.getLogger(__name__)


def default_runner(provider: Any, work_dir: Path, on_result: Callable) -> ScriptRunner:
    return ScriptRunner(provider, work_dir, on_result)


class Daemon:
    def __init__(
        self,
        cfg: Config,
        home: Path,
        controller: Controller | None = None,
        clock: Callable[[], float] = time.time,
        runner_factory: Callable[..., Any] = default_runner,
        tick: float | None = None,
        on_commit: Callable[[list[Fact], float], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.home = home
        self.controller = controller or open_controller(cfg.controller.url, clock=clock)
        self.clock = clock
        self.runner_factory = runner_factory
        self.on_commit = on_commit
        period = tick or max(0.05, min(cfg.policy.poll_every, cfg.policy.plan_every, cfg.lease.renew_every) / 4)
        self.ticker = Ticker(period, clock=clock)
        self.journal: Any = None
        self.budget: Any = None
        self.leases: Any = None
        self.tailer: Tailer | None = None
        self._stopped = threading.Event()

    def start(self) -> "Daemon":
        c = self.controller
        demand = c.get_demand()
        events = c.read_host_events(after=0, limit=1_000_000_000)
        cursor = Cursor(
            facts=c.last_seq(),
            demand=demand.seq if demand else 0,
            host_events=(events[-1].seq or 0) if events else 0,
        )
        self.journal = JournalActor.start(c, on_commit=self.on_commit)
        self.budget = BudgetActor.start(self.journal, self.cfg.budget)
        self.leases = LeaseActor.start(
            self.cfg, c, self.journal, self.budget, self.ticker, self.runner_factory, self.home, clock=self.clock
        )
        self.ticker.add(self.leases)
        self.ticker.add(self.budget)
        journal = self.journal
        self.tailer = Tailer(c, lambda ch: journal.tell(Feed(changes=ch)), cursor)
        self.tailer.start()
        self.ticker.start()
        log.info("daemon %s started: serves %s%s", self.cfg.instance.id, ", ".join(self.cfg.instance.serves) or "nothing",
                 " and may plan" if self.cfg.instance.planner else "")
        return self

    def write(self, facts: list[Fact], timeout: float = 10.0) -> Appended:
        """Commit facts through the journal from a thread that is not an actor (REST handlers).

        Operators' requests are unfenced facts (``lease == ""``) that the owner
        of the provider carries out; this waits for the commit, bounded.
        """
        replies: queue.Queue[Appended] = queue.Queue()

        class _Reply:
            def tell(self, msg: Appended) -> None:
                replies.put(msg)

        self.journal.tell(Append(facts=facts, reply_to=_Reply(), tag="external"))
        try:
            return replies.get(timeout=timeout)
        except queue.Empty:
            return Appended(tag="external", error=f"no answer from the journal within {timeout:.0f}s")

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        log.info("daemon %s stopping", self.cfg.instance.id)
        self.ticker.stop()
        if self.tailer is not None:
            self.tailer.stop()
        for ref in (self.leases, self.budget, self.journal):
            if ref is not None and ref.is_alive():
                ref.stop(block=True, timeout=15)
        self.controller.close()
        log.info("daemon %s stopped", self.cfg.instance.id)

    def run_until_signal(self, extra_stop: Callable[[], None] | None = None) -> int:
        """Run until SIGTERM or SIGINT (Ctrl-C); then stop in reverse order and return 0."""
        done = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            log.info("received %s", signal.Signals(signum).name)
            done.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.start()
            while not done.wait(1.0):
                pass
        finally:
            if extra_stop is not None:
                extra_stop()
            self.stop()
            for s, handler in previous.items():
                signal.signal(s, handler)
        return 0
