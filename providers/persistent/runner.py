"""One persistent provider: its ``serve`` process, the calls it is answering, and its supervision.

Protocol version 1 (docs/script-contract.md): the process says hello first,
then answers calls, in any order, each line one JSON object. At most
``max_concurrent`` calls are outstanding; the rest wait in order. A ping
every ``ping_every``; two unanswered and the process is killed. A process
that exits, closes stdout, writes a line that is not JSON or longer than the
output limit, or stops answering pings is killed with its whole group and
started again after a backoff that doubles up to ``restart_backoff_max``:
its calls in flight end ``timeout`` (their outcome is unknown, as after a
one-shot timeout), the calls queued wait for the next process. A call past
its deadline ends ``timeout`` too, and its late answer is logged and dropped.

``PersistentRunner`` has the one-shot ``ScriptRunner``'s interface
(``submit``, ``stop``, ``may_act``, ``on_result(result, tag)``), so the
owner's port (``actors.script_calls.ScriptCalls``) wraps either alike.
Everything happens on one thread of its own: the owner's ``submit`` only
queues and wakes it, and no thread of the daemon ever waits on the provider.
"""

from __future__ import annotations

import collections
import logging
import os
import selectors
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from config.models import ProviderConfig
from messages.scripts import Action, Outcome, ScriptResult
from providers.contract import V2_ACTIONS, ContractError, build_input
from providers.environment import EnvFileError, Scrubber, read_env_file, script_env, unmasked_warning
from providers.persistent.answers import clip, judge, result
from providers.persistent.lines import Lines, LineTooLong
from providers.persistent.process import ServeProcess, spawn
from providers.persistent.status import KEEPS_DYING, Phase, Status, restart_delay
from providers.runner import EXIT_OUTCOMES, STDOUT_LIMIT

log = logging.getLogger(__name__)

PROTOCOL = 1
#: The longest stderr line logged; longer ones are cut.
STDERR_LINE = 1000
#: At most this many stderr lines are logged per ``STDERR_WINDOW`` seconds; the rest are counted.
STDERR_LINES = 200
STDERR_WINDOW = 10.0
#: Calls that ended without their answer whose ids are remembered, to name a late answer in the log.
ENDED_KEPT = 1000
#: How long the daemon waits, once stdout closed, for the process to exit by itself (to report its exit code).
EOF_GRACE = 0.1
#: A failure's reason quotes the provider's last stderr line if it came at most this many seconds before.
STDERR_RECENT = 2.0
#: A start refused because the lease is not held (yet) is tried again this much later.
NOT_ACTING_RETRY = 0.5
_CHUNK = 64 * 1024

ResultCallback = Callable[[ScriptResult, object], None]


@dataclass(eq=False, slots=True)
class _Job:
    action: Action
    document: dict[str, Any]
    token: str | None
    tag: object
    #: Set when sent: the call's id, when it was sent and when it is given up (monotonic), its timeout.
    id: str = ""
    sent: float = 0.0
    due: float = 0.0
    timeout: float = 0.0


class _Failed(Exception):
    """The current process must go: ``why`` says what it did."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class PersistentRunner:
    """The calls of one persistent provider, answered by its long-running ``<path> serve`` process.

    ``backoff_base`` is the first restart delay (it doubles per failure in a
    row, up to ``restart_backoff_max``); ``line_limit`` the longest line the
    process may write; ``kill_grace`` how long a process being replaced (its
    env_file changed) has between SIGTERM and SIGKILL.
    """

    def __init__(
        self,
        provider: ProviderConfig,
        work_dir: Path,
        on_result: ResultCallback,
        home: Path | None = None,
        *,
        kill_grace: float = 2.0,
        backoff_base: float = 1.0,
        line_limit: int = STDOUT_LIMIT,
    ) -> None:
        if provider.script.style != "v2":
            raise ValueError(f"{provider.name}: persistent mode needs style v2")
        self.provider = provider
        self.script = provider.script
        self.work_dir = Path(work_dir)
        self.home = home
        self.kill_grace = kill_grace
        self.backoff_base = backoff_base
        self.line_limit = line_limit
        self._on_result = on_result
        #: Asked right before each call is sent and before each start: a call queued while the daemon
        #: held the provider's lease must not be sent after it lost it. The owner sets it to its mandate.
        self.may_act: Callable[[], bool] = lambda: True

        # Shared with other threads, under ``_lock``: submissions, the stop flag, the current process.
        self._lock = threading.Lock()
        self._inbox: collections.deque[_Job] = collections.deque()
        self._stopping = False
        self._closed = False
        self._proc: ServeProcess | None = None

        # Everything else is the loop thread's own.
        self._phase: Phase = "down"
        self._queue: collections.deque[_Job] = collections.deque()
        self._outstanding: dict[str, _Job] = {}
        self._ended: collections.OrderedDict[str, tuple[str, float]] = collections.OrderedDict()
        self._pings: dict[str, float] = {}
        self._misses = 0
        self._next_ping = 0.0
        self._hello_by = 0.0
        self._restart_at = 0.0
        self._ready_since = 0.0
        self._served = False
        self._actions: frozenset[str] = frozenset()
        self._failures = 0
        self._starts = 0
        self._degraded = ""
        #: What a call gets while the provider is degraded and down: transient, or what its start said.
        self._refusal: Outcome = "transient"
        self._ids = 0
        self._scrub = Scrubber({})
        self._env_stamp: tuple[int, int, int] | None = None
        self._out = bytearray()
        self._lines = Lines(line_limit)
        self._err = Lines(STDERR_LINE * 64)
        self._err_last = ""
        self._err_last_at = 0.0
        self._err_window = (0.0, 0, 0)  # window start, lines logged, lines dropped

        # One eventfd wakes the loop (a pipe would take two descriptors, for every provider).
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._wake_fd, selectors.EVENT_READ, "wake")
        #: Started by the first call, so the owner has set ``may_act`` before anything is spawned.
        self._thread = threading.Thread(target=self._run, name=f"persistent-{provider.name}", daemon=True)

    # --- the owner's side ---------------------------------------------------------------------

    def submit(self, action: Action, document: dict[str, Any], token: str | None = None, tag: object = None) -> None:
        """Queue one call; its result comes back through ``on_result`` on the runner's thread.

        Only an action outside the contract's vocabulary raises (``ValueError``): no result can name it.
        """
        if action not in V2_ACTIONS:
            raise ValueError(f"unknown script action {action!r}")
        job = _Job(action, document, token, tag)
        with self._lock:
            closed = self._closed or self._stopping
            if not closed:
                self._inbox.append(job)
                if self._thread.ident is None:
                    self._thread.start()
                self._wake()
        if closed:
            self._deliver(self._result(job, "not_started", "runner stopped"), job.tag)

    def stop(self, kill: bool = True, wait: float = 5.0) -> None:
        """Kill the process first, then end every call: those in flight ``timeout`` (their outcome is
        unknown), those queued ``not_started``. Returns once that is done, or after ``wait`` seconds.

        The process is always killed (``kill`` is the one-shot runner's interface): a persistent
        provider's calls have no end of their own to wait for.
        """
        with self._lock:
            if self._closed:
                return
            self._stopping = True
            proc = self._proc
            running = self._thread.ident is not None
        if proc is not None:
            proc.signal(signal.SIGKILL)
        with self._lock:
            if not running:  # never asked anything: nothing started, nothing to end
                self._close()
                return
            self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(wait)
            if self._thread.is_alive():
                log.warning("%s: persistent provider still stopping", self.provider.name)

    def health(self) -> str:
        """Why the provider is degraded (it cannot start, or keeps dying); empty when it is fine."""
        return self._degraded

    def status(self) -> Status:
        proc = self._proc
        return Status(phase=self._phase, pid=proc.pid if proc is not None and not proc.reaped else None,
                      restarts=max(0, self._starts - 1), failures=self._failures, degraded=self._degraded,
                      outstanding=len(self._outstanding), queued=len(self._queue) + len(self._inbox))

    def _wake(self) -> None:
        """Wake the loop (caller holds ``_lock``, under which the eventfd is closed at the end: a closed
        descriptor's number may already name another file)."""
        if not self._closed:
            os.eventfd_write(self._wake_fd, 1)

    def _close(self) -> None:
        """Refuse all further calls and release the loop's descriptors (caller holds ``_lock``)."""
        self._closed = True
        self._sel.close()
        os.close(self._wake_fd)

    # --- the loop -------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._start(time.monotonic())
            while True:
                now = time.monotonic()
                events = self._sel.select(max(0.0, self._next_timer(now) - now))
                if self._intake():
                    break  # stopping: the process was killed by stop(); that is no failure of it
                for key, _ in events:
                    self._event(key.data)
                now = time.monotonic()
                self._timers(now)
                self._pump(now)
        except Exception:  # a bug here must still end every call in a result
            log.exception("%s: persistent provider loop failed", self.provider.name)
        finally:
            self._shutdown()

    def _event(self, what: str) -> None:
        try:
            if what == "wake":
                os.eventfd_read(self._wake_fd)
            elif what == "stdout":
                self._read_stdout()
            elif what == "stderr":
                self._read_stderr()
            elif what == "stdin":
                self._flush()
            elif what == "exit":
                self._drain_stdout()
                raise _Failed("exited")
        except BlockingIOError:
            pass
        except _Failed as failed:
            self._fail(failed.why, time.monotonic())

    def _next_timer(self, now: float) -> float:
        phase = self._phase
        if phase == "starting":
            moments = [self._hello_by]
        elif phase in ("ready", "draining"):
            moments = [self._next_ping, *(job.due for job in self._outstanding.values())]
        elif phase == "down":
            moments = [self._restart_at]
        else:
            moments = []
        return min(moments, default=now + 60.0)

    def _intake(self) -> bool:
        """Take submitted calls into the queue; True once the runner is stopping."""
        with self._lock:
            jobs = list(self._inbox)
            self._inbox.clear()
            stopping = self._stopping
        if stopping:
            self._queue.extend(jobs)
            return True
        for job in jobs:
            if self._phase == "ready" or not self._degraded:
                self._queue.append(job)
            else:  # cannot start, or keeps dying: fail as the provider's exit 75 would
                self._deliver(self._result(job, self._refusal, f"provider degraded: {self._degraded}"), job.tag)
        return False

    def _timers(self, now: float) -> None:
        phase = self._phase
        if phase == "starting" and now >= self._hello_by:
            self._fail(f"did not say hello within {self.script.start_timeout:g}s", now)
        elif phase in ("ready", "draining"):
            for call_id, job in [(i, j) for i, j in self._outstanding.items() if now >= j.due]:
                del self._outstanding[call_id]
                self._remember(call_id, job.action, now)
                why = f"timed out after {job.timeout:g}s (outcome unknown)"
                self._deliver(self._result(job, "timeout", why, duration_s=round(now - job.sent, 3)), job.tag)
            if now >= self._next_ping:
                self._ping(now)
            if self._phase == "draining" and not self._outstanding:
                self._replace(now)
        elif phase == "down" and now >= self._restart_at:
            self._start(now)

    def _pump(self, now: float) -> None:
        """Send queued calls while the process is ready and has room."""
        while self._queue and self._phase == "ready" and len(self._outstanding) < self.script.max_concurrent:
            job = self._queue.popleft()
            if job.action not in self._actions:
                listed = ", ".join(sorted(self._actions)) or "none"
                self._deliver(self._result(job, "failed", f"the provider does not serve {job.action} "
                                                          f"(its hello lists {listed})"), job.tag)
                continue
            try:
                document = build_input("v2", self.provider.kind, job.action, job.document, job.token)
            except ContractError as exc:
                self._deliver(self._result(job, exc.outcome, str(exc)), job.tag)
                continue
            if not self.may_act():
                why = "not started: the provider's lease is no longer held"
                self._deliver(self._result(job, "not_started", why), job.tag)
                continue
            self._ids += 1
            job.id = f"c-{self._ids}"
            job.timeout = self.script.timeouts.get(job.action, self.script.timeout)
            job.sent, job.due = now, now + job.timeout
            self._outstanding[job.id] = job
            self._send({"id": job.id, "action": job.action, "input": document,
                        "deadline": round(time.time() + job.timeout, 3)})
            if self._phase != "ready":
                break  # writing failed: the process is gone

    # --- the process's life ----------------------------------------------------------------------

    def _start(self, now: float) -> None:
        cfg = self.provider
        if not self.may_act():
            self._phase, self._restart_at = "down", now + NOT_ACTING_RETRY
            return
        try:
            secrets = read_env_file(cfg.env_file) if cfg.env_file else {}
        except EnvFileError as exc:
            self._start_failed(str(exc), now, "config")
            return
        scrub = Scrubber.of(secrets, cfg.script.secrets)
        if scrub.unmasked and scrub.unmasked != self._scrub.unmasked:
            log.warning("%s", unmasked_warning(cfg.name, cfg.env_file, scrub.unmasked))
        self._scrub = scrub
        self._env_stamp = _stamp(cfg.env_file)
        env = script_env(cfg, "serve", token=None, deadline=None, work_dir=self.work_dir, env_file=secrets,
                         daemon_env=os.environ, home=self.home)
        program = str(self.script.path)
        self._starts += 1
        try:
            proc = spawn([program, "serve"], env)
        except OSError as exc:
            self._start_failed(f"cannot start {program}: {exc.strerror or exc}", now, "transient")
            return
        with self._lock:
            self._proc = proc
            stopping = self._stopping
        if stopping:  # stop() came while it was being started: it goes at once
            proc.signal(signal.SIGKILL)
        self._sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        self._sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        self._sel.register(proc.pidfd, selectors.EVENT_READ, "exit")
        self._phase, self._hello_by = "starting", now + self.script.start_timeout
        self._lines, self._err, self._err_last = Lines(self.line_limit), Lines(STDERR_LINE * 64), ""
        self._out.clear()
        self._pings.clear()
        self._misses, self._served = 0, False
        log.info("%s: persistent provider started (pid %d)", cfg.name, proc.pid)

    def _hello(self, line: bytes, now: float) -> None:
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise _Failed(f"wrote a first line that is not JSON: {self._shown(line)}") from None
        hello = doc.get("hello") if isinstance(doc, dict) else None
        if not isinstance(hello, dict):
            raise _Failed(f"wrote a first line that is not a hello: {self._shown(line)}")
        if hello.get("protocol") != PROTOCOL:
            raise _Failed(f"speaks protocol {clip(repr(hello.get('protocol')))[:20]}; the daemon speaks {PROTOCOL}")
        actions = hello.get("actions")
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            raise _Failed("hello.actions is not a list of action names")
        self._actions = frozenset(actions) & V2_ACTIONS
        self._phase, self._ready_since, self._refusal = "ready", now, "transient"
        self._next_ping = now + self.script.ping_every
        proc = self._proc
        log.info("%s: persistent provider ready (pid %d, actions: %s)", self.provider.name,
                 proc.pid if proc else 0, ", ".join(sorted(self._actions)) or "none")

    def _fail(self, why: str, now: float) -> None:
        """The process goes: killed with its group; its calls in flight end with an unknown outcome."""
        proc = self._proc
        if proc is None:
            return
        starting = self._phase == "starting"
        exited = proc.exited()
        code = self._end(proc)
        if why == "exited" or (exited and why == "closed its stdout"):
            why = f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}"
        # What it said on stderr just before, if anything: an older line may be about something else.
        said = f" ({self._err_last})" if self._err_last and now - self._err_last_at <= STDERR_RECENT else ""
        for call_id, job in list(self._outstanding.items()):
            self._remember(call_id, job.action, now)
            reason = f"the provider process {why} before answering (outcome unknown){said}"
            self._deliver(self._result(job, "timeout", reason, duration_s=round(now - job.sent, 3)), job.tag)
        self._outstanding.clear()
        if starting:
            outcome: Outcome = EXIT_OUTCOMES[code][0] if exited and code in (77, 78) else "transient"
            ended = exited or why.startswith(("closed", "was killed"))
            self._start_failed(f"the provider process {why}{' before its hello' if ended else ''}{said}", now,
                               outcome)
            return
        if now - self._ready_since >= self.script.restart_backoff_max:
            self._failures = 0  # it had run steadily: this is a new run of bad luck
        self._failures += 1
        if self._failures >= KEEPS_DYING:
            self._degraded = clip(self._scrub(f"keeps dying: {self._failures} failures in a row, "
                                              f"the last: the process {why}{said}"))
        self._down(now)
        log.warning("%s: persistent provider %s%s; restarting in %.3gs", self.provider.name, why, said,
                    self._restart_at - now)

    def _start_failed(self, why: str, now: float, outcome: Outcome) -> None:
        """It cannot start: degraded, and its queued calls fail as exit 75 (or the exit it gave) would."""
        self._failures += 1
        self._degraded = clip(self._scrub(f"cannot start: {why}"))
        self._refusal = outcome
        for job in self._queue:
            self._deliver(self._result(job, outcome, f"provider degraded: {self._degraded}"), job.tag)
        self._queue.clear()
        self._down(now)
        log.error("%s: persistent provider %s; trying again in %.3gs", self.provider.name, self._degraded,
                  self._restart_at - now)

    def _down(self, now: float) -> None:
        self._phase = "down"
        self._restart_at = now + restart_delay(self._failures, self.backoff_base, self.script.restart_backoff_max)

    def _replace(self, now: float) -> None:
        """Its env_file changed and no call is in flight: a new process reads the new one."""
        proc = self._proc
        if proc is not None:
            self._end(proc, grace=self.kill_grace)
        log.info("%s: persistent provider restarted to read its changed env_file", self.provider.name)
        self._start(now)

    def _end(self, proc: ServeProcess, grace: float = 0.0) -> int:
        for fd in (proc.stdout, proc.stderr, proc.pidfd, proc.stdin):
            try:
                self._sel.unregister(fd)
            except (KeyError, ValueError):
                pass
        code = proc.end(grace)
        self._drain_stderr(proc)
        proc.close()
        with self._lock:
            if self._proc is proc:
                self._proc = None
        self._pings.clear()
        return code

    def _shutdown(self) -> None:
        """The end of the runner: the process killed first, then every call ended with a result."""
        proc = self._proc
        if proc is not None:
            self._end(proc)
        now = time.monotonic()
        with self._lock:
            self._close()
            self._queue.extend(self._inbox)
            self._inbox.clear()
        self._phase = "stopped"
        for job in self._outstanding.values():
            why = "stopped by the daemon before it finished (outcome unknown)"
            self._deliver(self._result(job, "timeout", why, duration_s=round(now - job.sent, 3)), job.tag)
        self._outstanding.clear()
        for job in self._queue:
            self._deliver(self._result(job, "not_started", "runner stopped"), job.tag)
        self._queue.clear()

    # --- lines in and out ----------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        self._out += orjson.dumps(message) + b"\n"
        self._flush()

    def _flush(self) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            while self._out:
                n = os.write(proc.stdin, self._out)
                del self._out[:n]
        except BlockingIOError:
            pass
        except (BrokenPipeError, OSError):
            self._fail("closed its stdin", time.monotonic())
            return
        mask = selectors.EVENT_WRITE if self._out else 0
        registered = self._sel.get_map().get(proc.stdin)
        if mask and registered is None:
            self._sel.register(proc.stdin, mask, "stdin")
        elif not mask and registered is not None:
            self._sel.unregister(proc.stdin)

    def _read_stdout(self) -> None:
        proc = self._proc
        if proc is None:
            return
        chunk = os.read(proc.stdout, _CHUNK)
        if not chunk:
            proc.exited(EOF_GRACE)
            raise _Failed("closed its stdout")
        self._take(chunk)

    def _drain_stdout(self) -> None:
        """What an exited process wrote before it went: its last answers still count."""
        proc = self._proc
        while proc is not None and proc is self._proc:
            try:
                chunk = os.read(proc.stdout, _CHUNK)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        try:
            lines = self._lines.feed(chunk)
        except LineTooLong:
            raise _Failed(f"wrote a line longer than the output limit ({self.line_limit} bytes)") from None
        now = time.monotonic()
        for line in lines:
            if self._phase == "starting":
                self._hello(line, now)
            else:
                self._answer(line, now)

    def _answer(self, line: bytes, now: float) -> None:
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise _Failed(f"wrote a line that is not JSON: {self._shown(line)}") from None
        call_id = doc.get("id") if isinstance(doc, dict) else None
        if not isinstance(call_id, str):
            raise _Failed(f"wrote a line that is not an answer (no id): {self._shown(line)}")
        if call_id in self._pings:
            self._pings.clear()  # a newer pong says the older pings are answered too
            self._misses = 0
            self._recovered()
            return
        job = self._outstanding.pop(call_id, None)
        if job is not None:
            self._recovered()
            self._deliver(judge(self.provider, job.action, job.token, doc, self._scrub, now - job.sent), job.tag)
            return
        ended = self._ended.get(call_id)
        if ended is not None:
            action, at = ended
            log.warning("%s: late answer to %s (%s) ignored, %.3gs after the call ended", self.provider.name,
                        call_id, action, now - at)
        else:
            log.warning("%s: answer to an unknown call %s ignored", self.provider.name, clip(call_id)[:40])

    def _ping(self, now: float) -> None:
        if self._pings:
            self._misses += 1
            if self._misses >= 2:
                self._fail(f"missed {self._misses} pings ({self.script.ping_every:g}s apart)", now)
                return
        if self._phase == "ready" and _stamp(self.provider.env_file) != self._env_stamp:
            self._phase = "draining"
            log.info("%s: env_file changed; the persistent provider is restarted once its calls in flight end",
                     self.provider.name)
        self._ids += 1
        ping = f"p-{self._ids}"
        self._pings[ping] = now
        self._next_ping = now + self.script.ping_every
        self._send({"id": ping, "action": "ping"})

    def _recovered(self) -> None:
        if not self._served:
            self._served = True
            if self._degraded:
                log.info("%s: persistent provider serves again", self.provider.name)
                self._degraded = ""

    def _remember(self, call_id: str, action: str, now: float) -> None:
        self._ended[call_id] = (action, now)
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    # --- stderr: the provider's log -----------------------------------------------------------------

    def _read_stderr(self) -> None:
        proc = self._proc
        if proc is None:
            return
        chunk = os.read(proc.stderr, _CHUNK)
        if not chunk:
            self._sel.unregister(proc.stderr)
            return
        self._log_stderr(chunk)

    def _drain_stderr(self, proc: ServeProcess) -> None:
        for _ in range(16):  # a bounded last read: a child left behind may still write
            try:
                chunk = os.read(proc.stderr, _CHUNK)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            self._log_stderr(chunk)
        rest = self._err.rest()
        if rest:
            self._log_stderr(b"\n")

    def _log_stderr(self, chunk: bytes) -> None:
        try:
            lines = self._err.feed(chunk)
        except LineTooLong:
            lines, self._err = [b"(a stderr line too long to log)"], Lines(STDERR_LINE * 64)
        now = time.monotonic()
        start, logged, dropped = self._err_window
        if now - start >= STDERR_WINDOW:
            if dropped:
                log.warning("%s: %d stderr lines not logged", self.provider.name, dropped)
            start, logged, dropped = now, 0, 0
        for raw in lines:
            text = clip(self._scrub(raw.decode("utf-8", "replace")))
            if not text:
                continue
            self._err_last, self._err_last_at = text, now
            if logged < STDERR_LINES:
                log.info("%s: %s", self.provider.name, text[:STDERR_LINE])
                logged += 1
            else:
                dropped += 1
        self._err_window = (start, logged, dropped)

    # --- results ----------------------------------------------------------------------------------

    def _shown(self, line: bytes) -> str:
        return clip(self._scrub(line[:80].decode("utf-8", "replace")))[:60]

    def _result(self, job: _Job, outcome: Outcome, reason: str, **extra: Any) -> ScriptResult:
        return result(self.provider, job.action, job.token, outcome, reason, self._scrub, **extra)

    def _deliver(self, res: ScriptResult, tag: object) -> None:
        try:
            self._on_result(res, tag)
        except Exception:
            log.exception("%s %s: on_result failed", res.provider, res.action)


def _stamp(path: Path | None) -> tuple[int, int, int] | None:
    """What tells a changed env_file: its inode, size and modification time."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
