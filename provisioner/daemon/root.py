"""The composition root: start the actors in dependency order, stop them in reverse.

journal (the only writer, which also keeps the one projection of every fact
that the planner, the budget, the provider actors and the REST read model
share) -> budget -> lease actor (which starts the planner and one actor per
owned provider) -> ticker and tailer (the two threads that turn time and the
controller's changes into messages) -> the REST API, whose socket is bound
before anything else starts so a taken port fails at once.

The journal's commit hook feeds the audit log and the commit-time metric;
script results pass the metrics on their way back to the provider actors.
What is not starting or stopping lives elsewhere: a reload in
``provisioner.daemon.reloading`` (the daemon only registers which parts hear of a
new config), the way from REST threads into the journal in
``provisioner.daemon.journal_bridge``.

Before anything starts, the controller is checked against what this daemon
saw committed on it (``provisioner.daemon.resetguard``): one that lost those facts
is refused, unless the operator accepts it as reset.

The latest snapshot is loaded once, before anything starts, and shared: the
journal hands it to the actors that subscribe, the read model starts from
it. The snapshotter writes new ones from the read model while the daemon
runs, and a last one after the actors have stopped.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pykka

from actors.answers import Kept, KeptAnswers
from actors.budget import BudgetActor
from actors.clock import SteadyClock
from actors.inputs import SchedulerInputs
from actors.journal import Feed, JournalActor
from actors.lease import LeaseActor
from actors.provider import CallsFactory
from actors.pumps import Tailer, Ticker
from actors.reconfigure import Reconfigure
from actors.script_calls import ScriptCalls
from config.models import Config, ProviderConfig
from messages.facts import Fact
from owner.calls import OnDone
from persistence.controller import open_controller, patiently
from persistence.port import Controller, Cursor
from persistence.snapshot import SnapshotStore
from policy.settings import plan_settings
from providers.persistent import PersistentRunner
from providers.pool import ScriptPool
from providers.runner import ScriptRunner
from provisioner.api.auth import load_tokens
from provisioner.audit.auditor import Auditor
from provisioner.audit.log import AuditLog
from provisioner.daemon.commit_hooks import CommitHooks
from provisioner.daemon.journal_bridge import JournalBridge
from provisioner.daemon.memory import give_back_freed
from provisioner.daemon.reload import ReloadPlan
from provisioner.daemon.reloading import Reloader
from provisioner.daemon.resetguard import ControllerReset, Mark, MarkKeeper, accept, check, refusal
from provisioner.daemon.snapshotter import Snapshotter
from provisioner.metrics.collector import Metrics
from provisioner.read.model import ReadModel
from provisioner.surface.operations import Operations
from state.shared import SharedProjection

if TYPE_CHECKING:
    from provisioner.api.server import ApiServer

log = logging.getLogger(__name__)


class Daemon:
    def __init__(
        self,
        cfg: Config,
        home: Path,
        controller: Controller | None = None,
        clock: Callable[[], float] | None = None,
        calls_factory: CallsFactory | None = None,
        tick: float | None = None,
        on_commit: Callable[[list[Fact], float], None] | None = None,
        serve_api: bool = False,
        accept_reset: bool = False,
        config_file: Path | None = None,
        listen: str | None = None,
    ) -> None:
        """``accept_reset``: start on a controller that lost facts this daemon saw committed (see resetguard).
        ``config_file``: where ``cfg`` was read from, read again by ``reload`` (SIGHUP, ``POST /v1/reload``).
        ``listen``: where the API serves instead of ``api.listen`` (``run --listen``); the config is left as
        it is, so a reload does not take it for a change of ``api``."""
        self.listen = listen
        self.config_file = config_file
        #: How REST handlers and a reload commit facts: through the journal, once it runs.
        self.bridge = JournalBridge(lambda: self.journal)
        #: The config in force, and reloads of it (``provisioner.daemon.reloading``); each part hears of a new one.
        self.reloader = Reloader(cfg, config_file, self.bridge, running=lambda: self.started)
        self.reloader.on_config(self._tell_actors)
        #: Set by SIGHUP (``stop_signals``): ``run_until`` reloads on its own thread, not in the handler.
        self.reload_asked = threading.Event()
        self.ops: Operations | None = None
        self.home = home
        # The daemon measures durations by its own time, which wall clock steps do not move (``actors.clock``);
        # the controller judges leases by a clock every process on it reads alike (``lease.sqlite``, etcd's own).
        self.controller = controller or open_controller(cfg.controller.url, clock=clock)
        self.clock: Callable[[], float] = clock or SteadyClock()
        #: The threads every provider's scripts run on: a bounded number, however many providers.
        self.scripts = ScriptPool(cfg.instance.script_workers, name="script")
        #: How an owner reaches its provider: script runs, unless a caller (a test's fake provider) says otherwise.
        self.calls_factory = calls_factory or self._script_calls
        self.on_commit = on_commit
        self.serve_api = serve_api
        self.snapshots = SnapshotStore.for_controller(home, cfg.controller.url)
        #: The last fact this daemon saw committed here: a controller that lost it is refused at start.
        self.mark = Mark(home, cfg.controller.url)
        self.marks = MarkKeeper(self.mark)
        self.accept_reset = accept_reset
        #: The one projection of every fact: the journal feeds it, the planner, budget and REST read it.
        self.shared = SharedProjection(clock=self.clock)
        self.read_model = ReadModel(self.controller, self.snapshots, self.shared)
        self.snapshotter = Snapshotter(self.read_model, self.controller)
        #: Answers of request and return calls the controller has not taken yet (``actors.answers``).
        self.answers = KeptAnswers()
        self.metrics = Metrics(self.read_model, self.controller, cfg, self.clock, unrecorded=self.answers.count)
        self.audit = AuditLog(home / "audit.log")
        self.auditor = Auditor(self.audit, self.controller)
        self.api: ApiServer | None = None
        self.started = False
        self.fixed_tick = tick
        self.ticker = Ticker(self._tick_period(cfg), clock=self.clock)
        self.journal: pykka.ActorRef[JournalActor] | None = None
        self.budget: pykka.ActorRef[BudgetActor] | None = None
        self.leases: pykka.ActorRef[LeaseActor] | None = None
        self.tailer: Tailer | None = None
        self._stopped = threading.Event()
        self.reloader.on_config(lambda new, _plan: self.metrics.reconfigure(new))
        self.reloader.on_config(lambda new, _plan: setattr(self.ticker, "period", self._tick_period(new)))

    @property
    def cfg(self) -> Config:
        """The config in force: the one given, or the last a reload took."""
        return self.reloader.config

    def reload(self) -> dict[str, Any]:
        """Read the config file again and run on it (``provisioner.daemon.reloading``)."""
        return self.reloader.reload()

    def _tell_actors(self, cfg: Config, plan: ReloadPlan) -> None:
        if self.started:
            message = Reconfigure(config=cfg, restart=frozenset(plan.restart))
            self.budget.tell(message)
            self.leases.tell(message)

    def start(self, stopping: threading.Event | None = None) -> Daemon:
        """Start every part; with ``stopping``, wait for an unreachable controller until it is set.

        Raises ``ControllerReset``, having started nothing, when the controller lost facts this
        daemon saw committed and ``accept_reset`` was not given.
        """
        server = self._api_server() if self.serve_api else None
        try:
            if stopping is None:
                begun = self._where_to_begin()
            else:
                begun = patiently(f"daemon {self.cfg.instance.id} starting", self._where_to_begin, stopping)
        except BaseException:
            if server is not None:
                server.stop()
            raise
        if begun is None:
            if server is not None:
                server.stop()
            return self
        cursor, snapshot = begun
        c = self.controller
        shared = self.shared
        self.marks.start()
        hooks = CommitHooks(self.metrics, self.marks, self.audit, self.auditor, c, extra=self.on_commit)
        self.journal = JournalActor.start(c, on_commit=hooks, snapshots=self.snapshots,
                                          inputs=SchedulerInputs(shared, refused=self.metrics.refused_events),
                                          snapshot=snapshot, shared=shared)
        self.budget = BudgetActor.start(self.cfg.budget, shared, clock=self.clock, policy=self.cfg.policy,
                                        providers=self.cfg.providers)
        self.leases = LeaseActor.start(
            self.cfg, c, self.journal, self.budget, self.ticker, self.calls_factory, self.home, shared,
            clock=self.clock, after_first_scans=give_back_freed, answers=self.answers,
        )
        self.ticker.add(self.leases)
        self.ticker.add(self.budget)
        journal = self.journal
        self.tailer = Tailer(c, lambda ch: journal.tell(Feed(changes=ch)), cursor)
        self.tailer.start()
        self.ticker.start()
        if server is not None:
            self.read_model.start_from(snapshot)
            self.api = server.start()
        self.snapshotter.start()
        self.auditor.start()
        self.started = True
        log.info("daemon %s started: serves %s%s", self.cfg.instance.id,
                 ", ".join(self.cfg.instance.serves) or "nothing",
                 " and may plan" if self.cfg.instance.planner else "")
        return self

    def _tick_period(self, cfg: Config) -> float:
        return self.fixed_tick or max(0.05, min(cfg.policy.poll_every, cfg.policy.plan_every,
                                                cfg.lease.renew_every) / 4)

    def _where_to_begin(self) -> tuple[Cursor, Any]:
        """The controller's heads now, and the latest snapshot: replay starts from the one, tails from the other."""
        c = self.controller
        problem = check(c, self.mark, self.snapshots, self.cfg.controller.url)
        if problem is not None:
            if not self.accept_reset:
                raise ControllerReset(refusal(problem))
            accept(c, self.mark, self.snapshots, problem)
        demand = c.get_demand()
        events = c.read_host_events(after=0, limit=1_000_000_000)
        cursor = Cursor(
            facts=c.last_seq(),
            demand=demand.seq if demand else 0,
            host_events=(events[-1].seq or 0) if events else 0,
        )
        return cursor, self.snapshots.load(c)

    def _api_server(self) -> ApiServer:
        # The REST stack (FastAPI, Starlette, uvicorn and the API's models: some 12 MiB) is loaded
        # here, by a daemon that serves it, not by every importer of the daemon.
        from provisioner.api.app import create_app
        from provisioner.api.server import ApiServer

        api = self.cfg.api
        tokens = load_tokens(api.tokens) if api.tokens else None
        billing = plan_settings(self.cfg.policy, self.cfg.budget, self.cfg.providers).billing_units
        ops = self.ops = Operations(self.read_model, self.controller, self.bridge.commit, self.audit, self.clock,
                                    billing, refused_events=self.metrics.refused_events,
                                    max_demand_items=self.cfg.policy.max_demand_items)
        self.reloader.on_config(lambda new, _plan: ops.reconfigure(new))
        app = create_app(ops, tokens, self.metrics, ready=lambda: None if self.started else "starting",
                         max_body=api.max_body, reload=self.reloader.reload)
        setting = ("--listen", self.listen) if self.listen else ("api.listen", api.listen)
        return ApiServer(app, setting[1], loopback_only=tokens is None, tls=api.tls, setting=setting[0])

    def _script_calls(self, provider: ProviderConfig, work_dir: Path, on_done: OnDone,
                      may_act: Callable[[], bool]) -> ScriptCalls:
        """An owner's calls as script runs on the daemon's shared threads, or as calls to the provider's
        persistent process (whose health and restarts the metrics follow); each result seen by the metrics."""
        def persistent(on_result: Callable[[Any, Any], None]) -> PersistentRunner:
            runner = PersistentRunner(provider, work_dir, on_result)
            self.metrics.watch_process(provider.name, runner.status)
            return runner

        if provider.script.mode == "persistent":
            return ScriptCalls(persistent, on_done, may_act, observe=self.metrics.script_done)
        return ScriptCalls(lambda on_result: ScriptRunner(provider, work_dir, on_result, pool=self.scripts),
                           on_done, may_act, observe=self.metrics.script_done)

    def stop(self, quiet: bool = False) -> None:
        """Stop every part in reverse order; ``quiet``: without saying so (a start that failed before
        anything ran, whose error says all there is)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if not quiet:
            log.info("daemon %s stopping", self.cfg.instance.id)
        if self.api is not None:
            self.api.stop()
        self.ticker.stop()
        if self.tailer is not None:
            self.tailer.stop()
        for ref in (self.leases, self.budget, self.journal):
            if ref is not None and ref.is_alive():
                ref.stop(block=True, timeout=15)
        for provider, kept in self.answers.unrecorded():
            # Only this process knew: said where an operator reads, with what to look for at the provider.
            log.error("%s", unrecorded(self.cfg, provider, kept))
        self.scripts.close()
        self.marks.stop()  # the journal is stopped: the last mark is its last commit's
        if self.started:
            self.snapshotter.stop()
            self.auditor.stop()
        self.controller.close()
        if not quiet:
            log.info("daemon %s stopped", self.cfg.instance.id)

    def run_until(self, done: threading.Event, extra_stop: Callable[[], None] | None = None,
                  on_started: Callable[[], None] | None = None) -> int:
        """Run until ``done`` is set; then stop in reverse order and return 0. ``on_started`` runs once
        the daemon has started (the demo's workload: nothing of it runs when the start fails)."""
        failed = False
        try:
            self.start(stopping=done)
            if on_started is not None and self.started:
                on_started()
            while not done.wait(0.2):
                if self.reload_asked.is_set():
                    self.reload_asked.clear()
                    self.reloader.reload()
        except BaseException:
            failed = True
            raise
        finally:
            if extra_stop is not None:
                extra_stop()
            # A start that failed before anything ran (the API's port taken, the controller refused)
            # ends on its error alone, not on the lines of a daemon stopping.
            self.stop(quiet=failed and self.journal is None)
        return 0


def unrecorded(cfg: Config, provider: str, kept: Kept) -> str:
    """What an operator is told of an answer that never reached the facts: what to look for, and where."""
    when = datetime.fromtimestamp(kept.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    pcfg = cfg.provider(provider)
    lsf = pcfg is not None and pcfg.script.style == "lsf"
    then = ("this provider takes no idempotency token and cannot list what it holds, so no daemon will find what "
            "the call made: look for it at the provider under that request id and return it there" if lsf else
            "the next owner calls again with the same token, and the provider answers with what it made")
    return (f"provider {provider}: the {kept.describe()} (answered {when}) is in no fact: the controller refused "
            f"its record until this daemon stopped; {then}")


@contextmanager
def stop_signals(reload: threading.Event | None = None) -> Iterator[threading.Event]:
    """An event that SIGTERM or SIGINT (Ctrl-C) sets, for as long as the block runs; SIGHUP sets ``reload``."""
    done = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s", signal.Signals(signum).name)
        done.set()

    def on_hangup(_signum: int, _frame: object) -> None:
        log.info("received SIGHUP: reloading the config")
        if reload is not None:
            reload.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup)
    try:
        yield done
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def connect(cfg: Config, stopping: threading.Event, clock: Callable[[], float] | None = None) -> Controller | None:
    """The configured controller, waited for while unreachable; None if ``stopping`` came first."""
    url = cfg.controller.url
    return patiently(f"daemon {cfg.instance.id} opening {url}", lambda: open_controller(url, clock=clock), stopping)
