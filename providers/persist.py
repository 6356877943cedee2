"""``provisioner-persist WRAPPED [serve]``: any one-shot v2 provider executable behind the persistent protocol.

Each call is one run of ``WRAPPED ACTION -f INPUT.json`` with this process's
own environment (the daemon's minimal one and the provider's env_file) plus
``PROVISIONER_ACTION``, ``PROVISIONER_TOKEN`` and ``PROVISIONER_DEADLINE``,
exactly as the daemon would run it in one-shot mode, and killed at the
call's deadline. A provider can so be moved to ``mode: persistent`` before
it serves the protocol itself: the daemon's side (supervision, pings, the
limit on calls) works the same; only the start-up cost of each run stays.

Runs start with ``os.posix_spawn`` (calls run on threads) and stay in this
process's group, so when the daemon kills the group every run goes with it.
Standard library only, and nothing of the daemon.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import tempfile
import threading
import time
from typing import Any, Dict, Optional, Tuple

from providers.serving import serve

NAME = "provisioner-persist"
ACTIONS = ("describe", "request", "status", "return", "list", "reclaims", "usage")
MUTATING = ("request", "return")
STDOUT_LIMIT = 16 * 1024 * 1024
STDERR_TAIL = 64 * 1024
#: Seconds between SIGTERM and SIGKILL of a run past its deadline, and the drain after a run exited.
KILL_GRACE = 2.0
DRAIN_GRACE = 0.2
#: A run with no deadline from the daemon (never, in practice) gets this long.
NO_DEADLINE = 3600.0
JSON_TAIL_ATTEMPTS = 8
USAGE_TEXT = f"usage: {NAME} WRAPPED [serve]   (WRAPPED: a one-shot v2 provider executable)\n"
CONFIG = 78
USAGE = 64
DEADLINE = "killed at its deadline"


class Runs:
    """The runs of one wrapped executable, and where their input files are written."""

    def __init__(self, wrapped: str, env: Dict[str, str]) -> None:
        self.wrapped = wrapped
        self.env = {k: v for k, v in env.items() if k not in ("PROVISIONER_TOKEN", "PROVISIONER_DEADLINE")}
        self.folder = tempfile.mkdtemp(prefix="provisioner-persist-")  # mode 0700
        self.lock = threading.Lock()
        self.running: set[int] = set()
        self.n = 0

    def call(self, action: str, doc: Dict[str, Any], deadline: Optional[float]) -> Optional[Dict[str, Any]]:
        """One run of the wrapped executable, as the answer to give (exit 0 with output, or exit and message);
        None for a run killed at its deadline, which the daemon has ended already (outcome unknown)."""
        with self.lock:
            self.n += 1
            path = os.path.join(self.folder, f"{action}-{self.n}.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        env = dict(self.env, PROVISIONER_ACTION=action)
        deadline = deadline if deadline is not None else time.time() + NO_DEADLINE
        env["PROVISIONER_DEADLINE"] = str(int(deadline))
        token = doc.get("token")
        if action in MUTATING and isinstance(token, str) and token:
            env["PROVISIONER_TOKEN"] = token
        try:
            code, out, err, why = self.run([self.wrapped, action, "-f", path], env, deadline)
        finally:
            os.unlink(path)
        if why == DEADLINE:
            said = last_line(err.decode("utf-8", "replace"))
            sys.stderr.write(f"{NAME}: {action} {DEADLINE}" + (f": {said}" if said else "") + "\n")
            sys.stderr.flush()
            return None
        return judge(code, out, err, why)

    def run(self, argv: list, env: Dict[str, str], deadline: float) -> Tuple[int, bytes, bytes, str]:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        actions: list = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                         (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in (out_r, out_w, err_r, err_w) if fd > 2]
        try:
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions,
                                 setsigdef=(signal.SIGPIPE, signal.SIGXFSZ), setsigmask=())
        except OSError as exc:
            os.close(out_r)
            os.close(err_r)
            return 126, b"", f"cannot start {argv[0]}: {exc.strerror or exc}".encode(), ""
        finally:
            os.close(out_w)
            os.close(err_w)
        with self.lock:
            self.running.add(pid)
        try:
            return self.collect(pid, out_r, err_r, deadline)
        finally:
            with self.lock:
                self.running.discard(pid)
            os.close(out_r)
            os.close(err_r)

    def collect(self, pid: int, out_r: int, err_r: int, deadline: float) -> Tuple[int, bytes, bytes, str]:
        """Read both pipes until the run exits (and its pipes close, within a short grace), or its deadline."""
        out, err = bytearray(), bytearray()
        pidfd = os.pidfd_open(pid)
        sel = selectors.DefaultSelector()
        why = ""
        try:
            for fd in (out_r, err_r, pidfd):
                os.set_blocking(fd, False)
                sel.register(fd, selectors.EVENT_READ)
            streams, exited, termed = 2, False, False
            until = deadline
            while streams or not exited:
                left = until - time.time()
                if left <= 0:
                    if exited or termed:
                        break
                    why, termed = DEADLINE, True
                    os.kill(pid, signal.SIGTERM)
                    until = time.time() + KILL_GRACE
                    continue
                for key, _ in sel.select(left):
                    if key.fd == pidfd:
                        sel.unregister(pidfd)
                        exited = True  # what it left behind may hold its pipes: read them a moment more
                        until = min(until, time.time() + DRAIN_GRACE)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fd)
                        streams -= 1
                    elif key.fd == out_r:
                        out += chunk
                        if len(out) > STDOUT_LIMIT:
                            why = f"stdout exceeds {STDOUT_LIMIT // (1024 * 1024)} MiB"
                            break
                    else:
                        err += chunk
                        del err[:-STDERR_TAIL]
                if why.startswith("stdout"):
                    break
            if not exited:
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        finally:
            sel.close()
            os.close(pidfd)
        return os.waitstatus_to_exitcode(status), bytes(out), bytes(err), why

    def stop(self) -> None:
        """Kill every run still going (the daemon closed stdin: it wants no more answers)."""
        with self.lock:
            pids = list(self.running)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def judge(code: int, out: bytes, err: bytes, why: str) -> Dict[str, Any]:
    """A run as the protocol's answer; the daemon judges the answer as it would judge the run."""
    err_text = err.decode("utf-8", "replace")
    said = message(out) or last_line(err_text) or last_line(out[-STDERR_TAIL:].decode("utf-8", "replace"))
    tail = f": {said}" if said else ""
    if why:  # stdout past the limit: no output, so the daemon reports bad output, with this
        return {"exit": 0, "message": why + tail}
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return {"exit": 1, "message": f"killed by signal {name}{tail}"}
    if code != 0:
        return {"exit": code, "message": said}
    doc, problem = decode(out)
    if doc is None:
        return {"exit": 0, "message": problem}  # no output: the daemon reports bad output, with this
    return {"exit": 0, "output": doc}


def decode(raw: bytes) -> Tuple[Optional[Dict[str, Any]], str]:
    """stdout's JSON object, read as the daemon reads a one-shot run's: the last ``{`` line on if the whole is not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"stdout is not UTF-8 (offset {exc.start})"
    if not text.strip():
        return None, "stdout is empty (expected one JSON object)"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        doc, end = None, len(text)
        for _ in range(JSON_TAIL_ATTEMPTS):
            start = text.rfind("\n{", 0, end)
            if start < 0:
                break
            try:
                doc = json.loads(text[start + 1:])
                break
            except ValueError:
                end = start
        if doc is None:
            return None, f"stdout is not JSON: {exc}"
    if not isinstance(doc, dict):
        return None, f"stdout is JSON but not an object (got {type(doc).__name__})"
    return doc, ""


def message(out: bytes) -> str:
    """The ``message`` of the JSON document on stdout, on one line; "" if there is none (a failed run's
    answer, often printed over several lines, says more than its last line, a lone ``}``)."""
    doc, _ = decode(out)
    said = doc.get("message") if doc is not None else None
    return one_line(said)[:300] if isinstance(said, str) else ""


def last_line(text: str) -> str:
    """The last line with a letter or digit in it: a lone ``}`` or ``)`` of a dump says nothing."""
    for line in reversed(text.splitlines()):
        line = one_line(line)
        if any(c.isalnum() or c == "_" for c in line):
            return line[:300]
    return ""


def one_line(text: str) -> str:
    return "".join(" " if ord(c) < 32 else c for c in text).strip()


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(USAGE_TEXT)
        return 0
    if len(argv) not in (1, 2) or argv[1:] not in ([], ["serve"]):
        sys.stderr.write(USAGE_TEXT)
        return USAGE
    wrapped = os.path.abspath(argv[0])
    if not os.path.isfile(wrapped) or not os.access(wrapped, os.X_OK):
        sys.stderr.write(f"{NAME}: not an executable file: {wrapped}\n")
        return CONFIG
    runs = Runs(wrapped, dict(os.environ))
    try:
        return serve(runs.call, ACTIONS, log=lambda line: print(f"{NAME}: {line}", file=sys.stderr))
    finally:
        runs.stop()
        try:
            os.rmdir(runs.folder)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
