"""The pool ledger in one SQLite file, for clusters whose provider runs can all reach one file system.

Every change is one write transaction opened with ``BEGIN IMMEDIATE``: it
takes the database's write lock before reading, so the pool's total it
decides on cannot change before it commits, and concurrent grants simply
queue on the lock (``busy_timeout``). A process killed inside the transaction
leaves nothing behind: SQLite rolls the journal back on the next open.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from providers.flexlm import drill
from providers.flexlm.errors import ConfigError, Transient
from providers.flexlm.ledger import records, rules
from providers.flexlm.ledger.port import BorrowAsk, Grant, PoolView, Return, ReturnAsk, Sizer

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE grants (
    cluster TEXT NOT NULL, token TEXT NOT NULL, pool TEXT NOT NULL, resource TEXT NOT NULL,
    requested INTEGER NOT NULL, granted INTEGER NOT NULL, count INTEGER NOT NULL,
    tags TEXT NOT NULL, created REAL NOT NULL, ended REAL,
    PRIMARY KEY (cluster, token));
CREATE INDEX grants_pool ON grants (pool, count);
CREATE TABLE returns (
    cluster TEXT NOT NULL, token TEXT NOT NULL, doc TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (cluster, token));
CREATE TABLE clusters (
    pool TEXT NOT NULL, cluster TEXT NOT NULL, hosts TEXT NOT NULL,
    PRIMARY KEY (pool, cluster));
"""
_GRANT_COLUMNS = "cluster, token, pool, resource, requested, granted, count, tags, created, ended"


class SqliteLedger:
    def __init__(self, path: Path, busy_timeout: float = 10.0) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"ledger {path}: cannot open: {exc}") from None
        with self._failures():
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            if self.db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                with self._write():
                    if self.db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                        # One statement at a time: executescript() would commit the open transaction first.
                        for statement in filter(str.strip, _SCHEMA.split(";")):
                            self.db.execute(statement)
                        self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    # --- writes ----------------------------------------------------------------

    def borrow(self, ask: BorrowAsk, size: Sizer) -> Grant:
        with self._failures(), self._write():
            existing = self._grant(ask.cluster, ask.token)
            if existing is not None:
                return rules.same_borrow(existing, ask)
            n = size(self._view(ask.pool))
            grant = Grant(ask.cluster, ask.token, ask.pool, ask.resource, ask.count, n, n, dict(ask.tags), time.time())
            self.db.execute(
                f"INSERT INTO grants ({_GRANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                (grant.cluster, grant.token, grant.pool, grant.resource, grant.requested, grant.granted, grant.count,
                 json.dumps(grant.tags, sort_keys=True), grant.created))
            drill.pause("borrow:mid")
            self.db.execute(
                "INSERT INTO clusters (pool, cluster, hosts) VALUES (?, ?, ?) "
                "ON CONFLICT (pool, cluster) DO UPDATE SET hosts = excluded.hosts",
                (ask.pool, ask.cluster, json.dumps(list(ask.hosts))))
            return grant

    def give_back(self, ask: ReturnAsk) -> Return:
        with self._failures(), self._write():
            existing = self.returned(ask.cluster, ask.token)
            if existing is not None:
                return rules.same_return(existing, ask)
            now = time.time()
            live = self._live(ask.cluster, ask.pool)
            takes = rules.plan_return(live, ask)
            for g in rules.apply_takes(live, takes, now):
                self.db.execute("UPDATE grants SET count = ?, ended = ? WHERE cluster = ? AND token = ?",
                                (g.count, g.ended, g.cluster, g.token))
            ret = Return(ask.cluster, ask.token, ask.pool, ask.resource, ask.count, ask.named, tuple(takes), now)
            self.db.execute("INSERT INTO returns (cluster, token, doc, created) VALUES (?, ?, ?, ?)",
                            (ret.cluster, ret.token, json.dumps(records.return_doc(ret)), ret.created))
            drill.pause("return:mid")
            cutoff = now - rules.RETENTION_S
            self.db.execute("DELETE FROM grants WHERE cluster = ? AND count = 0 AND ended < ?", (ask.cluster, cutoff))
            self.db.execute("DELETE FROM returns WHERE cluster = ? AND created < ?", (ask.cluster, cutoff))
            return ret

    # --- reads -----------------------------------------------------------------

    def grant(self, cluster: str, token: str) -> Grant | None:
        with self._failures():
            return self._grant(cluster, token)

    def returned(self, cluster: str, token: str) -> Return | None:
        with self._failures():
            row = self.db.execute("SELECT doc FROM returns WHERE cluster = ? AND token = ?",
                                  (cluster, token)).fetchone()
        return records.return_of(json.loads(row[0])) if row else None

    def grants(self, cluster: str) -> list[Grant]:
        with self._failures():
            rows = self.db.execute(f"SELECT {_GRANT_COLUMNS} FROM grants WHERE cluster = ? AND count > 0 "
                                   "ORDER BY created, token", (cluster,)).fetchall()
        return [_grant_row(r) for r in rows]

    def _grant(self, cluster: str, token: str) -> Grant | None:
        row = self.db.execute(f"SELECT {_GRANT_COLUMNS} FROM grants WHERE cluster = ? AND token = ?",
                              (cluster, token)).fetchone()
        return _grant_row(row) if row else None

    def _live(self, cluster: str, pool: str) -> list[Grant]:
        rows = self.db.execute(f"SELECT {_GRANT_COLUMNS} FROM grants WHERE cluster = ? AND pool = ? AND count > 0",
                               (cluster, pool)).fetchall()
        return [_grant_row(r) for r in rows]

    def _view(self, pool: str) -> PoolView:
        held = dict(self.db.execute("SELECT cluster, SUM(count) FROM grants WHERE pool = ? AND count > 0 "
                                    "GROUP BY cluster", (pool,)).fetchall())
        hosts = {c: tuple(json.loads(h)) for c, h in
                 self.db.execute("SELECT cluster, hosts FROM clusters WHERE pool = ?", (pool,)).fetchall()}
        return PoolView(pool, held, hosts)

    # --- transactions and failures ------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @contextmanager
    def _failures(self) -> Iterator[None]:
        """A busy database may free up (75); one that cannot be opened or is damaged needs an operator (78)."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise Transient(f"ledger {self.path}: {text}") from None
            raise ConfigError(f"ledger {self.path}: {text}") from None
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"ledger {self.path}: {exc}") from None


def _grant_row(row: tuple) -> Grant:
    cluster, token, pool, resource, requested, granted, count, tags, created, ended = row
    return Grant(cluster, token, pool, resource, requested, granted, count, json.loads(tags), created, ended)
