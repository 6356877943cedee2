"""Several real processes on one SQLite controller file: fencing and appends across processes.

Children are the project's own Python (``sys.executable``) speaking one JSON
line per step on stdout and waiting for the parent on stdin, so every step is
ordered by the test instead of by sleeps; every wait is bounded.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from messages.errors import ControllerUnavailable
from messages.facts import UsageObserved, make_fact
from persistence.controller import open_controller
from persistence.port import Cursor
from persistence.sqlite import SqliteController

STEP_TIMEOUT = 8.0

pytestmark = pytest.mark.slow

_PRELUDE = """
import json, sys
from messages.facts import UsageObserved, make_fact
from persistence.controller import open_controller

def say(**kw):
    print(json.dumps(kw), flush=True)

def fact(n, lease=None, fact_id=None, provider=""):
    return make_fact(UsageObserved(resource="vcs", in_use=n), provider=provider,
                     lease=lease.name if lease else "", fence=lease.fence if lease else 0, fact_id=fact_id)
"""


class Child:
    """A child process whose stdout lines are read on a thread, so waiting on one is bounded."""

    def __init__(self, code: str, *args: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PRELUDE + textwrap.dedent(code), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def read(self) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=STEP_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"child said nothing for {STEP_TIMEOUT}s")
        if not line:
            self.proc.wait(STEP_TIMEOUT)
            assert self.proc.stderr is not None
            pytest.fail(f"child exited {self.proc.returncode}: {self.proc.stderr.read()[-2000:]}")
        return json.loads(line)

    def tell(self, line: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self) -> str:
        """Waits for a clean exit; returns stderr."""
        _, err = self.proc.communicate(timeout=STEP_TIMEOUT)
        assert self.proc.returncode == 0, err[-2000:]
        return err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STEP_TIMEOUT)


Spawn = Callable[..., Child]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    children: list[Child] = []

    def start(code: str, *args: str) -> Child:
        child = Child(code, *args, cwd=tmp_path)
        children.append(child)
        return child

    yield start
    for child in children:
        child.kill()


def wait_until(condition: Callable[[], bool], timeout: float = STEP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(0.02)


STALE_OWNER = """
url, ttl = sys.argv[1], float(sys.argv[2])
c = open_controller(url)
lease = c.leases.acquire("provider:x", "child", ttl=ttl)
r = c.append([fact(1, lease, "child-1")])
say(fence=lease.fence, accepted=[f.id for f in r.accepted])
sys.stdin.readline()
r = c.append([fact(2, lease, "child-2"), fact(3, None, "child-unfenced")])
say(accepted=[f.id for f in r.accepted], refused=[x.reason for x in r.refused])
c.close()
"""


def test_fact_under_an_expired_owners_fence_is_refused_across_processes(tmp_path: Path, spawn: Spawn) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}"
    child = spawn(STALE_OWNER, url, "0.3")
    first = child.read()
    assert first["accepted"] == ["child-1"]
    parent = open_controller(url)
    try:
        wait_until(lambda: parent.leases.get("provider:x") is None)
        taken = parent.leases.acquire("provider:x", "parent", ttl=30)
        assert taken is not None and taken.fence == first["fence"] + 1
        ours = make_fact(
            UsageObserved(resource="vcs", in_use=9), lease=taken.name, fence=taken.fence, fact_id="parent-1"
        )
        assert parent.append([ours]).refused == []
        child.tell()
        second = child.read()
        assert second["accepted"] == ["child-unfenced"]
        [reason] = second["refused"]
        assert f"fence {taken.fence}, fact has {first['fence']}" in reason
        child.finish()
        assert [f.id for f in parent.read()] == ["child-1", "parent-1", "child-unfenced"]
    finally:
        parent.close()


APPENDER = """
url, me, n, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = open_controller(url)
say(ready=me)
sys.stdin.readline()
for start in range(0, n, batch):
    r = c.append([fact(i, None, f"{me}-{i}", provider=me) for i in range(start, min(start + batch, n))])
    assert not r.refused, r.refused
say(done=me)
c.close()
"""


def test_concurrent_appenders_all_land_gap_free(tmp_path: Path, spawn: Spawn) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}"
    names, per_child = ["w1", "w2", "w3"], 500
    reader = open_controller(url)
    try:
        children = [spawn(APPENDER, url, name, str(per_child), "25") for name in names]
        assert sorted(c.read()["ready"] for c in children) == names
        for c in children:
            c.tell()
        total = per_child * len(names)
        cursor, seen = Cursor(), []
        deadline = time.monotonic() + STEP_TIMEOUT
        while cursor.facts < total and time.monotonic() < deadline:
            got = reader.changes(cursor, timeout=1.0)
            seqs = [f.seq for f in got.facts]
            assert seqs == list(range(cursor.facts + 1, cursor.facts + 1 + len(seqs))), "a reader saw a gap"
            seen.extend(got.facts)
            cursor = got.cursor
        assert sorted(c.read()["done"] for c in children) == names
        for c in children:
            assert c.finish() == ""
        assert [f.seq for f in seen] == list(range(1, total + 1))
        assert len({f.id for f in seen}) == total
        for name in names:
            mine = [f.payload.in_use for f in seen if f.provider == name]
            assert mine == list(range(per_child)), f"{name}'s facts out of order or missing"
        assert reader.read() == seen
    finally:
        reader.close()


LOCKER = """
import sqlite3

conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
say(locked=True)
sys.stdin.readline()
conn.execute("COMMIT")
say(unlocked=True)
sys.stdin.readline()
"""


def test_write_lock_held_past_busy_timeout_is_unavailable_then_recovers(tmp_path: Path, spawn: Spawn) -> None:
    path = tmp_path / "state.db"
    controller = SqliteController(str(path), busy_timeout=0.2)
    try:
        locker = spawn(LOCKER, str(path))
        assert locker.read() == {"locked": True}
        fact = make_fact(UsageObserved(resource="vcs", in_use=1), fact_id="after-lock")
        with pytest.raises(ControllerUnavailable, match="locked") as err:
            controller.append([fact])
        assert str(path) in str(err.value)
        with pytest.raises(ControllerUnavailable):
            controller.leases.acquire("planner", "a", ttl=5)
        assert controller.read() == [], "readers are not blocked by a writer in WAL mode"
        locker.tell()
        assert locker.read() == {"unlocked": True}
        assert [f.id for f in controller.append([fact]).accepted] == ["after-lock"]
        locker.tell()
        locker.finish()
    finally:
        controller.close()
