"""The machine's floors: the same work as a figure, done with nothing of the project in the timed part.

A figure alone moves with the machine (the same code gave 30,000 and 123,000
journal facts/s on two 2-core machines); the floor, measured in the same run
on the same data with the same durability, moves with it. ``make bench``
judges these figures on ``value / floor``. Each floor here takes its inputs
ready made (rows, operations, argv and environment, built untimed by the
figure's benchmark) and times only SQLite, etcd through the controller's own
client, ``os.posix_spawn`` or orjson.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True)
class Measured:
    """A figure and what it is judged on: the floor measured with it (ratio = value / floor, same unit),
    or, where it has no floor, a ratio of its own (the simulated month: simulated seconds per wall second)."""

    value: float
    floor: float | None = None
    ratio: float | None = None

# --- SQLite ------------------------------------------------------------------


class SqliteSettings:
    """A table's shape and a connection's durability, read from the file and the connection a figure used."""

    def __init__(self, conn: sqlite3.Connection, table: str) -> None:
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        if row is None:
            raise RuntimeError(f"floor: no table {table} to copy")
        self.table = table
        self.create = row[0]
        self.columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        self.journal_mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        self.synchronous = int(conn.execute("PRAGMA synchronous").fetchone()[0])

    def open(self, path: Path) -> sqlite3.Connection:
        """A fresh file with the same table, journal mode and ``synchronous`` level."""
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        mode = conn.execute(f"PRAGMA journal_mode = {self.journal_mode}").fetchone()[0]
        if str(mode).lower() != self.journal_mode.lower():
            raise RuntimeError(f"floor: journal mode {self.journal_mode} refused (got {mode})")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute(self.create)
        return conn

    def insert(self, columns: Sequence[str]) -> str:
        return f"INSERT INTO {self.table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def sqlite_inserts(path: Path, settings: SqliteSettings, columns: Sequence[str],
                   batches: list[list[tuple[Any, ...]]]) -> float:
    """Rows per second inserted into a fresh file, one ``BEGIN IMMEDIATE`` ... ``COMMIT`` per batch."""
    conn = settings.open(path)
    sql = settings.insert(columns)
    try:
        started = time.perf_counter()
        for rows in batches:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows)
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    return sum(len(rows) for rows in batches) / elapsed


def orjson_parse(path: Path, table: str = "facts") -> float:
    """Seconds to read every stored row's payload, in seq order, and parse each with ``orjson.loads``."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        started = time.perf_counter()
        loads = orjson.loads
        n = 0
        for (payload,) in conn.execute(f"SELECT payload FROM {table} ORDER BY seq"):
            loads(payload)
            n += 1
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    if not n:
        raise RuntimeError(f"floor: no rows in {path}")
    return elapsed


# --- etcd --------------------------------------------------------------------


def etcd_txns(txn: Callable[[list, list], Any], transactions: list[list[dict[str, Any]]]) -> float:
    """Seconds for the given transactions' puts, one ``txn`` each, with no compares."""
    started = time.perf_counter()
    for success in transactions:
        if not txn([], success).succeeded:
            raise RuntimeError("floor: an etcd txn without compares failed")
    return time.perf_counter() - started


# --- processes ---------------------------------------------------------------

#: As the script runner starts a script, but stdin, stdout and stderr on /dev/null (no pipes to drain).
_QUIET = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]


def spawn(argv: list[str], env: dict[str, str]) -> int:
    """``os.posix_spawn`` with the runner's attributes (own process group, default SIGPIPE and SIGXFSZ)."""
    return os.posix_spawn(argv[0], argv, env, file_actions=_QUIET, setpgroup=0,
                          setsigdef=(signal.SIGPIPE, signal.SIGXFSZ), setsigmask=())


def reap(pid: int) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def spawn_and_wait(argv: list[str], env: dict[str, str], n: int, parallel: int) -> float:
    """Runs per second: ``n`` runs of ``argv``, ``parallel`` at a time, each spawned and waited for."""
    counter = itertools.count()  # next() on it is atomic under the GIL
    failures: list[int] = []

    def worker() -> None:
        while next(counter) < n:
            code = reap(spawn(argv, env))
            if code:
                failures.append(code)

    threads = [threading.Thread(target=worker, name=f"floor-spawn-{i}") for i in range(parallel)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"floor: {len(failures)} runs of {argv[0]} failed, e.g. exit {failures[0]}")
    return n / elapsed


class CommitAndSpawn:
    """One fsync'd SQLite commit of a row, then one ``os.posix_spawn``: the least a demand -> spawn round costs."""

    def __init__(self, path: Path, settings: SqliteSettings, columns: Sequence[str]) -> None:
        self.conn = settings.open(path)
        self.sql = settings.insert(columns)

    def sample(self, row: tuple[Any, ...], argv: list[str], env: dict[str, str]) -> float:
        """Milliseconds from before the commit to ``posix_spawn``'s return; the child is then waited for, untimed."""
        started = time.perf_counter()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(self.sql, row)
        self.conn.execute("COMMIT")
        pid = spawn(argv, env)
        elapsed = time.perf_counter() - started
        reap(pid)
        return elapsed * 1000

    def close(self) -> None:
        self.conn.close()


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]
