"""Runs one provider's scripts off the caller's thread, bounded in time, output and number.

The daemon is multi-threaded (pykka actors), so scripts start with
``os.posix_spawn``: forking a threaded process can deadlock the child on a lock
another thread held. Each script gets its own process group, so a timeout or a
stop kills whatever the script started too, and a grandchild that keeps the
stdout pipe open cannot keep a run alive past its deadline: the script's exit
is watched through a pidfd (Linux), not through the end of its output.

Every submit ends in exactly one ``on_result(result, tag)`` call, made from a
pool thread: failures of any kind (a script that cannot start, a timeout, a
stop) are results, never exceptions, so the caller's bookkeeping cannot miss one.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import math
import os
import queue
import re
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from config.models import ProviderConfig
from messages.scripts import Action, Outcome, ScriptResult
from providers.contract import V2_ACTIONS, ContractError, build_argv, build_input, decode_stdout, parse_output
from providers.environment import EnvFileError, Scrubber, data_dir, log_dir, read_env_file, script_env, unmasked_warning
from providers.inputs import MEMORY, memory_folder
from providers.output import cleaned
from providers.pool import ScriptPool
from providers.spawning import close_pipe, read_ready, reap_exited, spawn

log = logging.getLogger(__name__)

ResultCallback = Callable[[ScriptResult, object], None]

STDOUT_LIMIT = 16 * 1024 * 1024
STDERR_TAIL = 64 * 1024
REASON_TAIL = 300
_CHUNK = 64 * 1024
#: The runner whose turn the current pool thread is running (and the thread's buffer for pipe reads):
#: one thread-local for every runner, not one each (each would hold a dict and weak references per
#: thread that ever ran its turn).
_TURN = threading.local()

#: Exit codes with a meaning of their own (docs/script-contract.md); any other non-zero code is "failed".
EXIT_OUTCOMES: dict[int, tuple[Outcome, str]] = {
    75: ("transient", "transient"),
    69: ("capacity", "capacity unavailable"),
    77: ("credentials", "credentials or permission"),
    78: ("config", "configuration"),
}
_SAFE_TOKEN = re.compile(r"[^A-Za-z0-9._-]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WORDY = re.compile(r"\w")
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
#: The scrubber of a provider without an env_file: nothing to hide.
_NO_SECRETS = Scrubber({})


@dataclass
class _Job:
    action: Action
    document: dict[str, Any]
    token: str | None
    tag: object
    spawned: bool = False


@dataclass(eq=False)
class _Process:
    """A started script. Signals go to its group only while the leader is unreaped,
    so the group id cannot have been reused by an unrelated process."""

    pid: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    reaped: bool = False
    stopped: bool = False

    def signal(self, sig: int) -> None:
        with self.lock:
            if not self.reaped:
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    pass

    def reap(self) -> int:
        """Collect the exit status; called once the leader has exited (or was sent SIGKILL)."""
        with self.lock:
            status = reap_exited(self.pid)  # without letting go of the interpreter, if it has exited
            if status is None:
                _, status = os.waitpid(self.pid, 0)
            self.reaped = True
        return os.waitstatus_to_exitcode(status)


@dataclass
class _Finished:
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    overflow: bool = False
    stopped: bool = False


def _make_folder(folder: str) -> None:
    """Make ``folder`` (mode 0700) if it is not there, parents too: one system call when it is."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(folder, 0o700, exist_ok=True)


class ScriptRunner:
    """The script runner of one provider: a FIFO of runs, at most ``max_concurrent`` at once.

    Runs execute on the threads of ``pool``, which a daemon shares among all
    its providers (``providers.pool``); without one, the runner has a pool of
    its own, ``max_concurrent`` threads that end after ``idle_exit`` seconds
    without work.

    ``home`` is the scripts' HOME (default: the daemon's). ``kill_grace`` is
    how long a timed-out script has between SIGTERM and SIGKILL, and how long
    output is still drained after a script exited while something it left
    behind (outside its process group) holds its pipes. ``memory`` is the
    memory file system that holds the runs' input files where it can
    (``providers.inputs``); None, or where it cannot, they go to the work
    folder's ``in/``.
    """

    def __init__(
        self,
        provider: ProviderConfig,
        work_dir: Path,
        on_result: ResultCallback,
        home: Path | None = None,
        *,
        kill_grace: float = 2.0,
        idle_exit: float = 30.0,
        pool: ScriptPool | None = None,
        memory: Path | None = MEMORY,
    ) -> None:
        self.provider = provider
        self.work_dir = Path(work_dir)
        self._memory = memory
        #: The folder of the input files: chosen at the first run, and again when it has gone.
        self._in_dir: str | None = None
        #: Input file names: this runner's random stem and a count, so a run costs no random bytes. The
        #: memory folder is shared by the runners of every daemon of the user: 64 bits keep names apart.
        self._stem = os.urandom(8).hex()
        self._count = itertools.count()  # next() on it is atomic under the GIL
        #: A v2 script's program, checked (``build_argv``) only when it fails to start: the exec is the check.
        self._program = str(Path(provider.script.path)) if provider.script.style == "v2" else None
        #: Folders an lsf plugin is given that the daemon makes when missing: its log folder (here), and
        #: its data folder when the config names one (else it is this folder, made with ``in``).
        self._lsf_dirs: tuple[str, ...] = ()
        if provider.script.style == "lsf":
            data = data_dir(provider, self.work_dir)
            self._lsf_dirs = (str(log_dir(self.work_dir)),) + (() if data == self.work_dir else (str(data),))
        self.home = home
        self.kill_grace = kill_grace
        self._on_result = on_result
        self._own_pool = pool is None
        self.pool = pool or ScriptPool(provider.script.max_concurrent, idle_exit, name=f"script-{provider.name}")
        # Small while idle, as a thousand runners are: a SimpleQueue, not a deque and its 64-slot block.
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: Notified whenever a turn of this runner ends (under ``_lock``); made by the first wait for one.
        self._turn_ended: threading.Condition | None = None
        #: Turns of this runner queued in the pool or running there.
        self._turns = 0
        self._stopped = False
        self._killing = False
        self._running: set[_Process] = set()
        #: Asked on the pool thread right before each spawn: a run queued while the daemon
        #: still held the provider's lease must not start after it lost it (e.g. woken from a
        #: freeze past its TTL). The owner sets it to its lease mandate.
        self.may_act: Callable[[], bool] = lambda: True
        #: The secret variables too short to scrub that were last warned about: warned once, not at every run.
        self._unmasked: tuple[str, ...] = ()

    # --- caller side ---------------------------------------------------------

    def submit(self, action: Action, document: dict[str, Any], token: str | None = None, tag: object = None) -> None:
        """Queue one run; its result comes back through ``on_result`` on a pool thread.

        Only an action outside the contract's vocabulary raises (``ValueError``):
        no result can name it.
        """
        if action not in V2_ACTIONS:
            raise ValueError(f"unknown script action {action!r}")
        job = _Job(action, document, token, tag)
        with self._lock:
            if self._stopped:
                self._turns += 1
                self.pool.put(lambda: self._turn(job))
                return
            self._jobs.put(job)
            self._offer()

    def health(self) -> str:
        """Always well: a one-shot run has no process to keep between calls (``PersistentRunner.health``)."""
        return ""

    def stop(self, kill: bool = True, wait: float = 5.0) -> None:
        """Refuse new work, end queued runs with "runner stopped", and (``kill``) end running scripts.

        A killed script's outcome is unknown, like a timeout: it may have acted.
        Returns when every run of this runner has ended, or after ``wait`` seconds.
        """
        until = time.monotonic() + wait
        with self._lock:
            self._stopped = True
            self._killing = self._killing or kill
            running = list(self._running)
            # Queued runs end now, each as a turn of its own: none waits behind a busy pool's queue
            # for its refusal any longer than it must.
            while not self._jobs.empty():
                job = self._jobs.get_nowait()
                self._turns += 1
                self.pool.put(functools.partial(self._turn, job))
        if kill:
            for proc in running:
                proc.stopped = True
                proc.signal(signal.SIGTERM)
            self._join(min(until, time.monotonic() + self.kill_grace))
            for proc in running:
                proc.signal(signal.SIGKILL)
        if not self._join(until):
            log.warning("%s: script runs still going after stop", self.provider.name)
        if self._own_pool:
            self.pool.close()

    def _join(self, until: float) -> bool:
        """Wait until no turn of this runner is left (but the caller's own, when a result handler
        stops the runner); False if ``until`` came first."""
        own = 1 if getattr(_TURN, "runner", None) is self else 0
        with self._lock:
            if self._turn_ended is None:
                self._turn_ended = threading.Condition(self._lock)
            return self._turn_ended.wait_for(lambda: self._turns <= own, max(0.0, until - time.monotonic()))

    # --- turns on the pool's threads -------------------------------------------------

    def _offer(self) -> None:
        """Put a turn in the pool if runs wait and fewer than ``max_concurrent`` are out (caller holds ``_lock``)."""
        if not self._jobs.empty() and self._turns < self.provider.script.max_concurrent:
            self._turns += 1
            self.pool.put(self._turn)

    def _turn(self, job: _Job | None = None) -> None:
        """One run: the given one (a refusal), or the next queued. Then, if runs still wait, another turn
        goes to the back of the pool's queue: providers take turns."""
        _TURN.runner = self
        try:
            if job is None:
                with self._lock:
                    job = None if self._jobs.empty() else self._jobs.get_nowait()
            if job is not None:
                self._work(job)
        finally:
            _TURN.runner = None
            with self._lock:
                self._turns -= 1
                self._offer()
                if self._turn_ended is not None:
                    self._turn_ended.notify_all()

    def _work(self, job: _Job) -> None:
        if self._stopped:
            self._refuse(job)
            return
        try:
            result = self._execute(job)
        except Exception as exc:  # a bug here must still end in a result
            log.exception("%s %s: runner error", self.provider.name, job.action)
            if job.spawned:  # the script ran: whatever it did is unknown
                result = self._result(job, "timeout", f"runner error (outcome unknown): {type(exc).__name__}")
            else:
                result = self._result(job, "spawn_error", f"runner error: {type(exc).__name__}")
        self._deliver(result, job.tag)

    def _refuse(self, job: _Job) -> None:
        self._deliver(self._result(job, "not_started", "runner stopped"), job.tag)

    def _deliver(self, result: ScriptResult, tag: object) -> None:
        try:
            self._on_result(result, tag)
        except Exception:
            log.exception("%s %s: on_result failed", result.provider, result.action)

    def _result(
        self, job: _Job, outcome: Outcome, reason: str, scrub: Scrubber | None = None, **extra: Any
    ) -> ScriptResult:
        text = f"{self.provider.name} {job.action}: {reason}" if reason else ""
        return ScriptResult(
            provider=self.provider.name,
            action=job.action,
            outcome=outcome,
            reason=scrub(text) if scrub else text,
            token=job.token,
            **extra,
        )

    def _execute(self, job: _Job) -> ScriptResult:
        cfg = self.provider
        try:
            secrets = read_env_file(cfg.env_file) if cfg.env_file else {}
        except EnvFileError as exc:
            return self._result(job, "config", str(exc))
        scrub = Scrubber.of(secrets, cfg.script.secrets) if secrets else _NO_SECRETS
        if scrub.unmasked != self._unmasked:
            self._unmasked = scrub.unmasked
            if scrub.unmasked:
                log.warning("%s", unmasked_warning(cfg.name, cfg.env_file, scrub.unmasked))
        try:
            document = build_input(cfg.script.style, cfg.kind, job.action, job.document, job.token)
        except ContractError as exc:
            return self._result(job, exc.outcome, str(exc), scrub)
        for folder in self._lsf_dirs:
            try:
                _make_folder(folder)
            except OSError as exc:
                return self._result(job, "spawn_error", f"cannot create the folder {folder}: {exc.strerror}", scrub)
        try:
            input_path = self._write_input(job, document)
        except OSError as exc:
            return self._result(job, "spawn_error", f"cannot write the input file: {exc.strerror}", scrub)
        try:
            return self._run(job, input_path, secrets, scrub)
        finally:
            try:
                os.unlink(input_path)
            except FileNotFoundError:
                pass

    def _write_input(self, job: _Job, document: dict[str, Any]) -> str:
        """The run's input file, readable by the daemon's user only. Its folder is chosen (and made) at
        the first run and when a file cannot be made for want of it (someone removed it), not at every run."""
        label = _SAFE_TOKEN.sub("_", job.token)[:80] if job.token else "run"
        name = f"{job.action}-{label}-{self._stem}{next(self._count):x}.json"
        path = f"{self._in_dir or self._input_folder()}/{name}"
        try:
            fd = os.open(path, _NEW_FILE, 0o600)
        except FileNotFoundError:
            path = f"{self._input_folder(make=True)}/{name}"
            fd = os.open(path, _NEW_FILE, 0o600)
        try:
            data = memoryview(orjson.dumps(document))
            while data:
                data = data[os.write(fd, data):]
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        return path

    def _input_folder(self, make: bool = False) -> str:
        """The memory folder where it can be used, else the work folder's ``in/`` (made when ``make``)."""
        folder = memory_folder(self._memory) if self._memory is not None else None
        if folder is None:
            folder = str(self.work_dir / "in")
            if make:
                Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
        self._in_dir = folder
        return folder

    def _run(self, job: _Job, input_path: str, secrets: dict[str, str], scrub: Scrubber) -> ScriptResult:
        cfg = self.provider
        timeout = cfg.script.timeouts.get(job.action, cfg.script.timeout)
        if self._program is not None:
            argv = [self._program, job.action, "-f", input_path]
        else:
            try:
                argv = build_argv(cfg, job.action, Path(input_path))
            except ContractError as exc:
                return self._result(job, exc.outcome, str(exc), scrub)
        env = script_env(
            cfg,
            job.action,
            token=job.token,
            deadline=time.time() + timeout,
            work_dir=self.work_dir,
            env_file=secrets,
            daemon_env=os.environ,
            home=self.home,
        )
        if not self.may_act():
            return self._result(job, "not_started", "not started: the provider's lease is no longer held", scrub)
        started = time.monotonic()
        try:
            proc, out_r, err_r = self._spawn(argv, env)
        except OSError as exc:
            if self._program is not None:  # say why, as build_argv would have before the exec
                try:
                    build_argv(cfg, job.action, Path(input_path))
                except ContractError as why:
                    return self._result(job, why.outcome, str(why), scrub)
            return self._result(job, "spawn_error", f"cannot start {argv[0]}: {exc.strerror or exc}", scrub)
        job.spawned = True
        try:
            finished = self._collect(proc, out_r, err_r, timeout, scrub.margin)
        finally:
            with self._lock:
                self._running.discard(proc)
            close_pipe(out_r)
            close_pipe(err_r)
            if not proc.reaped:  # only after an error in _collect: leave nothing behind
                proc.signal(signal.SIGKILL)
                proc.reap()
        duration = time.monotonic() - started
        return self._judge(job, finished, timeout, scrub, duration)

    def _spawn(self, argv: list[str], env: dict[str, str]) -> tuple[_Process, int, int]:
        """Start the script in its own process group; returns it with the read ends of stdout and stderr."""
        pid, _, out_r, err_r = spawn(argv, env)
        proc = _Process(pid)
        with self._lock:
            self._running.add(proc)
            if self._killing:  # stop() came between taking the job and starting it
                proc.stopped = True
                proc.signal(signal.SIGKILL)
        return proc, out_r, err_r

    def _collect(self, proc: _Process, out_r: int, err_r: int, timeout: float, margin: int) -> _Finished:
        """Read both pipes until EOF and exit, within the deadline; the group is always killed at the end.

        One ``poll`` per wake-up on the two pipes and the pidfd, which cost no system call to set up,
        and as few reads as the output needs: a pipe whose writers are all gone (``POLLHUP``) is at
        its end once a read comes back short. Every system call here lets another script thread take
        the interpreter, and waits to get it back.
        """
        stdout = bytearray()
        stderr = bytearray()
        keep_err = STDERR_TAIL + 4 * margin
        pidfd = os.pidfd_open(proc.pid)
        buffer = _buffer()
        try:
            poller = select.poll()
            for fd in (out_r, err_r, pidfd):
                poller.register(fd, select.POLLIN)
            streams = 2
            exited = timed_out = overflow = killed = False
            limit = time.monotonic() + timeout
            while streams or not exited:
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    if exited or timed_out:
                        break  # grace over: leftovers hold the pipes, or the script ignores SIGTERM
                    timed_out = True
                    proc.signal(signal.SIGTERM)
                    limit = time.monotonic() + self.kill_grace
                    continue
                for fd, event in poller.poll(math.ceil(remaining * 1000)):
                    if fd == pidfd:
                        poller.unregister(pidfd)
                        exited = killed = True
                        proc.signal(signal.SIGKILL)  # whatever it left behind in its group
                        if not timed_out:
                            limit = time.monotonic() + self.kill_grace
                        continue
                    if not event & select.POLLIN:  # POLLHUP alone: empty, and its writers gone
                        poller.unregister(fd)
                        streams -= 1
                        continue
                    chunk = read_ready(fd, buffer)
                    if len(chunk) < _CHUNK and (not chunk or event & select.POLLHUP):
                        poller.unregister(fd)
                        streams -= 1
                    if fd == out_r:
                        stdout += chunk
                        if len(stdout) > STDOUT_LIMIT:
                            overflow = True
                            break
                    else:
                        stderr += chunk
                        if len(stderr) > 2 * keep_err:
                            del stderr[:-keep_err]
                if overflow:
                    break
            if not killed:
                proc.signal(signal.SIGKILL)
            if not exited:
                select.select([pidfd], [], [])  # SIGKILL was sent: the leader is on its way out
            code = proc.reap()
        finally:
            close_pipe(pidfd)
        return _Finished(
            exit_code=code,
            stdout=bytes(stdout) if not overflow else b"",
            stderr=bytes(stderr[-keep_err:]),
            timed_out=timed_out,
            overflow=overflow,
            stopped=proc.stopped,
        )

    def _judge(self, job: _Job, run: _Finished, timeout: float, scrub: Scrubber, duration: float) -> ScriptResult:
        cfg = self.provider
        err_text = scrub(run.stderr.decode("utf-8", "replace"))[-STDERR_TAIL:]
        common: dict[str, Any] = {"duration_s": round(duration, 3), "stderr_tail": err_text}
        # A script that finished by itself before a stop reached it keeps its answer.
        if run.stopped and run.exit_code != 0:
            why = "stopped by the daemon before it finished (outcome unknown)"
            return self._result(job, "timeout", why, scrub, **common)
        if run.timed_out:
            why = f"timed out after {timeout:g}s (outcome unknown){_said(run, err_text, scrub)}"
            return self._result(job, "timeout", why, scrub, **common)
        if run.overflow:
            why = f"stdout exceeds {STDOUT_LIMIT // (1024 * 1024)} MiB"
            return self._result(job, "bad_output", why, scrub, **common)
        code = run.exit_code
        if code == 0:
            try:
                data = decode_stdout(run.stdout)
                output = cleaned(parse_output(cfg.script.style, cfg.kind, job.action, data, provider=cfg.name), scrub)
            except ContractError as exc:
                what = f"bad output: {exc}" if exc.outcome == "bad_output" else str(exc)
                return self._result(job, exc.outcome, _clip(scrub(what)), scrub, exit_code=0, **common)
            return self._result(job, "ok", "", exit_code=0, output=output, **common)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            why = f"killed by signal {name}{_said(run, err_text, scrub)}"
            return self._result(job, "failed", why, scrub, exit_code=code, **common)
        outcome, label = EXIT_OUTCOMES.get(code, ("failed", ""))
        meaning = f" ({label})" if label else ""
        why = f"exit {code}{meaning}{_said(run, err_text, scrub)}"
        return self._result(job, outcome, why, scrub, exit_code=code, **common)


def _buffer() -> ctypes.Array[ctypes.c_char]:
    """This thread's buffer for pipe reads: made once per thread, not once per run."""
    buffer = getattr(_TURN, "buffer", None)
    if buffer is None:
        buffer = _TURN.buffer = ctypes.create_string_buffer(_CHUNK)
    return buffer


def _said(run: _Finished, err_text: str, scrub: Scrubber) -> str:
    """": <what the script said>" for a reason; "" if it said nothing.

    Its answer's ``message`` when stdout holds a JSON document (an LSF plugin answers a failure
    too, often over several lines, so stdout's last line is a lone ``}``), else stderr's last line
    that says something, else stdout's.
    """
    said = _message(run.stdout, scrub) or _last_line(err_text) \
        or _last_line(scrub(run.stdout[-STDERR_TAIL:].decode("utf-8", "replace")))
    return f": {said}" if said else ""


def _message(stdout: bytes, scrub: Scrubber) -> str:
    """The ``message`` of the JSON document on stdout, on one line and scrubbed; "" if there is none."""
    try:
        message = decode_stdout(stdout).get("message")
    except ContractError:
        return ""
    return _clip(_CONTROL.sub(" ", scrub(message)).strip()) if isinstance(message, str) else ""


def _last_line(text: str) -> str:
    """The last line with a letter or digit in it: a lone ``}`` or ``)`` of a dump says nothing."""
    for line in reversed(text.splitlines()):
        line = _CONTROL.sub(" ", line).strip()
        if _WORDY.search(line):
            return _clip(line)
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= REASON_TAIL else text[: REASON_TAIL - 3] + "..."
