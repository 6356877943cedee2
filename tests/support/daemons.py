"""A real daemon on a temporary SQLite controller, with the simulated provider scripts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from config.models import Config
from persistence.controller import open_controller
from persistence.replay import replay
from provisioner.cli.demo import SIM_SCRIPT
from provisioner.daemon.root import Daemon

#: How long a test waits for a ``provisioner run`` process to start and take its leases. Its imports
#: alone take seconds, and many more on a loaded 2-core machine (CI runs while other work does): a
#: bound to give up at, not an expectation, since a wait returns as soon as its condition holds and
#: ends at once when the process exits. Below pytest's own timeout (120 s a test, ``PROCESS_TEST``
#: for tests that wait on a process more than once), so a failure is the wait's, saying what the
#: daemon printed, not a bare stack dump.
STARTUP = 90.0
#: pytest's timeout for a test that starts ``provisioner run`` and waits on it several times.
PROCESS_TEST = 300


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition",
               said: Callable[[], str] | None = None) -> Any:
    """Poll a condition of real processes, bounded in time; ``said``: what they printed, for the failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}" + _printed(said))
        time.sleep(0.05)


def _printed(said: Callable[[], str] | None) -> str:
    return f"; it printed, last:\n{said()}" if said is not None else ""


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file (what a daemon printed), or a note that it printed nothing."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        text = ""
    return "\n".join(text.splitlines()[-lines:]) or "(nothing)"


def free_port() -> int:
    """A loopback port nobody listens on now (each daemon serves its own API; none the default 8787,
    which a demo may hold)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunProcess:
    """One ``provisioner run`` process with its stdout and stderr in a log file, so a wait that gives up,
    or sees it exit, says what the daemon printed instead of only what it waited for."""

    def __init__(self, config: Path, log: Path, *args: str, env: dict[str, str] | None = None,
                 **popen: Any) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "provisioner.cli", "--config", str(config), "run", *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, **popen)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return tail(self.log, lines)

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = STARTUP) -> Any:
        """``wait_until`` while the process lives: its exit ends the wait at once, with its exit code."""
        def check() -> Any:
            value = predicate()
            if not value and self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited ({self.proc.returncode}) while waiting for {what}"
                                     + _printed(self.tail))
            return value

        return wait_until(check, timeout, what, said=self.tail)

    def stop(self, timeout: float = STARTUP) -> int:
        """SIGTERM, and its exit code once it has stopped (SIGKILL if it is still there after ``timeout``)."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the daemon did not stop within {timeout}s of SIGTERM" + _printed(self.tail))

    def end(self, grace: float = 30.0) -> None:
        """For a ``finally``: SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds."""
        if self.proc.poll() is None:
            end_process(self.proc, grace)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def end_process(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def sim_provider(tmp: Path, name: str, sim: dict, **script: Any) -> dict:
    folder = tmp / name
    folder.mkdir(parents=True)
    (folder / "sim.json").write_text(json.dumps(sim))
    env = folder / "provider.env"
    env.write_text(f"SIM_CONFIG={folder / 'sim.json'}\nSIM_STATE_DIR={folder / 'state'}\n")
    env.chmod(0o600)
    return {"name": name, "kind": sim["kind"], "env_file": str(env),
            "script": {"style": "v2", "path": str(SIM_SCRIPT), "timeout": "10s", **script}}


def wait_state(read: Callable[[], Any], condition: Callable[[Any], bool], what: str, timeout: float = 20.0) -> Any:
    """The first state ``read()`` returns for which ``condition`` holds, bounded in time."""
    found: list = []

    def check() -> bool:
        s = read()
        if condition(s):
            found.append(s)
            return True
        return False

    wait_until(check, timeout, what)
    return found[0]


def sim_call(folder: Path, action: str, doc: dict | None = None, *admin: str) -> Any:
    """Act on a simulated provider directly, as its cloud's console would (no daemon involved)."""

    env = {"PATH": "/usr/bin:/bin", "SIM_CONFIG": str(folder / "sim.json"), "SIM_STATE_DIR": str(folder / "state")}
    if action == "admin":
        argv = [str(SIM_SCRIPT), "admin", *admin]
    else:
        (folder / "in.json").write_text(json.dumps(doc or {}))
        argv = [str(SIM_SCRIPT), action, "-f", str(folder / "in.json")]
    out = subprocess.run(argv, capture_output=True, env=env, timeout=10, check=True)
    return json.loads(out.stdout) if out.stdout.strip() else None


HOSTS_SIM = {
    "kind": "hosts", "seed": 3, "name_prefix": "h", "priority": 10, "cost_per_hour": 0.5, "lead_time": 0,
    "templates": [{"id": "small", "max_number": 10, "attributes": {"type": "X86_64", "ncpus": 8}}],
}
UNITS_SIM = {"kind": "units", "seed": 3, "priority": 5, "lead_time": 0,
             "pools": [{"resource": "vcs", "capacity": 10, "cost_per_unit_hour": 2.0}]}


def make_config(tmp: Path, providers: list[dict], instance: str = "a", **over: Any) -> Config:
    doc = {
        "instance": {"id": instance, "serves": [p["name"] for p in providers], "planner": True},
        "controller": {"url": f"sqlite:///{tmp / 'state.db'}"},
        "lease": {"ttl": "3s", "renew_every": "1s"},
        "policy": {"idle_time": "0s", "poll_every": "0.1s", "plan_every": "0.1s", "join_grace": "60s",
                   "cooldown": "1s", "backoff_max": "1s"},
        "providers": providers,
        "resources": [{"name": "vcs", "elastic": True, "base": 2, "provider": "units"}]
        if any(p["name"] == "units" for p in providers) else [],
        "home": str(tmp / "home"),
    }
    for key, value in over.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    return Config.model_validate(doc)


class Running:
    def __init__(self, cfg: Config, home: Path) -> None:
        self.cfg = cfg
        self.daemon = Daemon(cfg, home, tick=0.05).start()
        self.controller = open_controller(cfg.controller.url)

    def state(self):
        return replay(self.controller)

    def wait_state(self, condition: Callable[[Any], bool], what: str, timeout: float = 20.0):
        """The projection once ``condition`` holds for it."""
        return wait_state(self.state, condition, what, timeout)

    def stop(self) -> None:
        self.daemon.stop()
        self.controller.close()


@pytest.fixture
def start_daemon(tmp_path):
    started: list[Running] = []

    def start(cfg: Config) -> Running:
        run = Running(cfg, tmp_path / "home")
        started.append(run)
        return run

    yield start
    for run in reversed(started):
        run.stop()


def sim_list(folder: Path) -> list:
    """The machines a simulated provider holds, as its ``list`` answers."""
    return sim_call(folder, "list", {})["machines"]
