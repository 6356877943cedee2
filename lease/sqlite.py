"""Ownership leases in an SQLite file, and the connection handling the SQLite controller shares.

Several daemon processes on one host share the file. SQLite serialises writers,
so every check-then-write (acquire, renew, a fenced append) runs inside one
``BEGIN IMMEDIATE`` transaction: the write lock is taken before anything is
read, and the controller clock is read only after the lock is held, so no two
processes can both believe they were granted the same lease.

The lease table keeps one row per name forever. Releasing or expiring a lease
leaves its fence in the row, so the next grant, to anyone, gets a higher one.

Expiry is judged by the host's clock of seconds since boot (``HostClock``),
not by the wall clock: every process on the host reads it alike, and no
setting of the wall clock moves it. By the wall clock, a step forward would
expire every lease at once, and a step back would let a dead holder's lease
stand for as long as the step. Each row names the boot it was granted in: the
count starts again at each boot, and a lease of an earlier boot is void
(every process that could hold it is gone with that boot).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from lease.port import Lease, LeaseRecord
from messages.errors import ControllerUnavailable

Clock = Callable[[], float]

_LEASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,      -- '' once released
    fence      INTEGER NOT NULL,   -- only grows, kept across release and expiry
    expires_at REAL NOT NULL,      -- lease clock
    boot       TEXT NOT NULL DEFAULT '', -- the boot whose lease clock expires_at counts in
    granted_at REAL                -- lease clock, when this fence was granted; NULL where not known
)
"""

#: Columns added after files were first made, with what an older file's rows get. A lease of a file made
#: before ``boot`` counted by the wall clock and is void here (its boot '' is not this one); one made before
#: ``granted_at`` does not say when it was granted.
_ADDED_COLUMNS = {"boot": "TEXT NOT NULL DEFAULT ''", "granted_at": "REAL"}


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""  # a system that does not say: its monotonic clock is taken to run since one boot


class HostClock:
    """Seconds since this host booted (``CLOCK_BOOTTIME``, which counts suspends), and which boot that is."""

    def __init__(self) -> None:
        self.boot = _boot_id()
        self._read = (lambda: time.clock_gettime(time.CLOCK_BOOTTIME)) if hasattr(time, "CLOCK_BOOTTIME") \
            else time.monotonic

    def __call__(self) -> float:
        return self._read()


class SqliteDatabase:
    """One SQLite file used from several threads: one connection per thread.

    Actors call the controller from their own threads; an sqlite3 connection
    must not be shared between threads in the middle of a transaction, so each
    thread gets its own. Every sqlite3 failure (locked past the busy timeout, a
    missing directory, an unwritable or corrupt file) becomes
    ``ControllerUnavailable`` naming the file.
    """

    def __init__(self, path: str, busy_timeout: float = 5.0) -> None:
        self.path = path
        self._busy_ms = max(0, int(busy_timeout * 1000))
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if self._closed:
            raise ControllerUnavailable(f"controller database {self.path} is closed")
        if conn is None:
            with self.unavailable():
                conn = self._connect()
            self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are begun explicitly, so a write
        # can start with BEGIN IMMEDIATE instead of the module's implicit BEGIN.
        conn = sqlite3.connect(
            self.path, timeout=self._busy_ms / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise ControllerUnavailable(
                    f"controller database {self.path}: cannot use WAL journal mode (got {mode!r})"
                )
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if self._closed:
                conn.close()
                raise ControllerUnavailable(f"controller database {self.path} is closed")
            self._connections.append(conn)
        return conn

    @contextmanager
    def unavailable(self) -> Iterator[None]:
        """Turn sqlite3 failures into ``ControllerUnavailable`` naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            raise ControllerUnavailable(f"controller database {self.path}: {exc}") from exc

    def ensure_schema(self, tables: dict[str, str]) -> None:
        """Create the tables (name -> CREATE statement) that are missing.

        Looks first under a read transaction: a daemon joining a live file must
        not wait for the write lock just to learn the tables are there, since a
        process frozen inside a write transaction holds that lock until thawed.
        """
        with self.read() as conn:
            present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [statement for name, statement in tables.items() if name not in present]
        if missing:
            with self.write() as conn:
                for statement in missing:
                    conn.execute(statement)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the database's write lock from its start."""
        conn = self.connection()
        with self.unavailable():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            finally:
                # Reached with an open transaction only when the body or COMMIT failed.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: all its queries see the same snapshot."""
        conn = self.connection()
        with self.unavailable():
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()


class SqliteLeases:
    """``LeasePort`` on an ``SqliteDatabase``; expiry is judged by the lease clock (``HostClock`` unless a
    test gives its own, whose boot is ``""``)."""

    def __init__(self, db: SqliteDatabase, clock: Clock | None = None) -> None:
        self._db = db
        self._clock: Clock = clock or HostClock()
        self._boot: str = getattr(self._clock, "boot", "")
        db.ensure_schema({"leases": _LEASE_SCHEMA})
        with db.read() as conn:
            have = {row[1] for row in conn.execute("PRAGMA table_info(leases)")}
        if not have >= _ADDED_COLUMNS.keys():  # a file an older daemon made
            with db.write() as conn:
                have = {row[1] for row in conn.execute("PRAGMA table_info(leases)")}
                for column, kind in _ADDED_COLUMNS.items():
                    if column not in have:
                        conn.execute(f"ALTER TABLE leases ADD COLUMN {column} {kind}")

    def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        return self.acquire_all([name], holder, ttl)[0]

    def acquire_all(self, names: list[str], holder: str, ttl: float) -> list[Lease | None]:
        for name in names:
            _check_name(name, "lease name")
        _check_name(holder, "lease holder")
        _check_ttl(ttl)
        if not names:
            return []
        with self._db.write() as conn:
            now = self._clock()
            return [self._grant(conn, name, holder, now, ttl) for name in names]

    def _grant(self, conn: sqlite3.Connection, name: str, holder: str, now: float, ttl: float) -> Lease | None:
        row = conn.execute("SELECT holder, fence, expires_at, boot FROM leases WHERE name = ?", (name,)).fetchone()
        if row is not None and self._held(row[0], row[2], row[3], now):
            if row[0] != holder:
                return None
            fence = row[1]
        else:
            fence = (row[1] if row is not None else 0) + 1
        # Asked again by its holder, the same grant is renewed: it keeps the moment it was granted.
        conn.execute(
            "INSERT INTO leases (name, holder, fence, expires_at, boot, granted_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, fence = excluded.fence,"
            " expires_at = excluded.expires_at, boot = excluded.boot,"
            " granted_at = CASE WHEN leases.fence = excluded.fence THEN leases.granted_at"
            " ELSE excluded.granted_at END",
            (name, holder, fence, now + ttl, self._boot, now),
        )
        return Lease(name=name, holder=holder, fence=fence, expires_at=now + ttl)

    def renew(self, lease: Lease, ttl: float) -> Lease | None:
        return self.renew_all([lease], ttl)[0]

    def renew_all(self, leases: list[Lease], ttl: float) -> list[Lease | None]:
        _check_ttl(ttl)
        if not leases:
            return []
        with self._db.write() as conn:
            now = self._clock()
            out: list[Lease | None] = []
            for lease in leases:
                changed = conn.execute(
                    "UPDATE leases SET expires_at = ?"
                    " WHERE name = ? AND holder = ? AND holder != '' AND fence = ? AND expires_at > ? AND boot = ?",
                    (now + ttl, lease.name, lease.holder, lease.fence, now, self._boot),
                ).rowcount
                out.append(lease.model_copy(update={"expires_at": now + ttl}) if changed else None)
            return out

    def release(self, lease: Lease) -> bool:
        with self._db.write() as conn:
            now = self._clock()
            return bool(
                conn.execute(
                    "UPDATE leases SET holder = '', expires_at = 0"
                    " WHERE name = ? AND holder = ? AND holder != '' AND fence = ? AND expires_at > ? AND boot = ?",
                    (lease.name, lease.holder, lease.fence, now, self._boot),
                ).rowcount
            )

    def get(self, name: str) -> Lease | None:
        with self._db.read() as conn:
            now = self._clock()
            row = conn.execute(
                "SELECT name, holder, fence, expires_at FROM leases"
                " WHERE name = ? AND holder != '' AND expires_at > ? AND boot = ?",
                (name, now, self._boot),
            ).fetchone()
        return _lease(row) if row is not None else None

    def all(self) -> list[Lease]:
        with self._db.read() as conn:
            now = self._clock()
            rows = conn.execute(
                "SELECT name, holder, fence, expires_at FROM leases"
                " WHERE holder != '' AND expires_at > ? AND boot = ? ORDER BY name",
                (now, self._boot),
            ).fetchall()
        return [_lease(row) for row in rows]

    def table(self) -> list[LeaseRecord]:
        with self._db.read() as conn:
            now = self._clock()
            rows = conn.execute(
                "SELECT name, holder, fence, expires_at, boot, granted_at FROM leases ORDER BY name"
            ).fetchall()
        out = []
        for name, holder, fence, expires_at, boot, granted_at in rows:
            ours = boot == self._boot  # a lease clock of another boot says nothing about now
            out.append(LeaseRecord(
                name=name, holder=holder, fence=fence,
                expires_in=expires_at - now if holder and ours else None,
                granted_ago=now - granted_at if holder and ours and granted_at is not None else None))
        return out

    def refusal(self, conn: sqlite3.Connection, name: str, fence: int) -> str | None:
        """Why a write under ``name`` at ``fence`` must be refused now, or None if it may go in.

        Called inside the caller's write transaction so the check and the write
        are one atomic step.
        """
        row = conn.execute(
            "SELECT holder, fence, expires_at, boot FROM leases WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            return f"no such lease {name}"
        holder, current, expires_at, boot = row
        now = self._clock()
        if current != fence:
            state = "is held" if self._held(holder, expires_at, boot, now) else "has moved on"
            return f"lease {name} {state} under fence {current}, fact has {fence}"
        if not holder:
            return f"lease {name} was released (fence {fence})"
        if boot != self._boot:
            return f"lease {name} was granted before this host last booted (fence {fence})"
        if expires_at <= now:
            return f"lease {name} expired (fence {fence})"
        return None

    def _held(self, holder: str, expires_at: float, boot: str, now: float) -> bool:
        return boot == self._boot and _held(holder, expires_at, now)


def _held(holder: str, expires_at: float, now: float) -> bool:
    """Whether a lease row is held at ``now`` of one clock (etcd's rows: every host's wall clock)."""
    return bool(holder) and expires_at > now


def _lease(row: tuple[str, str, int, float]) -> Lease:
    return Lease(name=row[0], holder=row[1], fence=row[2], expires_at=row[3])


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")


def _check_ttl(ttl: float) -> None:
    if not (0 < ttl < math.inf):
        raise ValueError(f"lease ttl must be a positive number of seconds, got {ttl!r}")
