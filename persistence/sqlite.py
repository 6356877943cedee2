"""The embedded controller: facts, demand, host events and totals in one SQLite file.

Durability: WAL journal with ``synchronous=FULL``, so a commit that returned
survives a power cut. ``append`` writes a whole batch in one transaction (group
commit: one fsync for many facts) and checks each batch lease's fence inside
that same transaction, so a fact can never land under a fence that another
process has already replaced.

Facts are stored as the orjson encoding of the whole fact (without ``seq``),
next to a few columns for inspection with the ``sqlite3`` shell. A row that no
longer decodes (written by a newer schema, or edited by hand) is skipped with
a warning naming its seq, once per controller object: one unreadable fact must
not stop every reader of the log; the cursor still moves past it.

SQLite serialises writers and assigns ``seq`` inside the write transaction, so
commit order is seq order: a reader that has seen seq N never later finds a
new fact below N.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Sequence

import orjson

from lease.sqlite import Clock, SqliteDatabase, SqliteLeases
from messages.demand import DemandSnapshot, HostEvent, HostEventKind, SupplySnapshot
from messages.facts import Fact, ResourceTotalChanged
from persistence.decoding import Decoder
from persistence.encoding import at_seq, stored_fact
from persistence.failpoints import failpoint
from persistence.port import DEMAND_HISTORY, AppendResult, Changes, Cursor, RefusedFact, ResourceTotal
from persistence.private import private_file
from persistence.wal_watch import FAST, WalWatch

log = logging.getLogger(__name__)


#: Most facts ``changes`` hands out per call (the port's bound).
CHANGES_LIMIT = 10_000
#: How often a waiting ``changes`` looks for commits by other connections.
POLL_INTERVAL = 0.01

_SCHEMA = {
    "facts": """CREATE TABLE IF NOT EXISTS facts (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        id       TEXT NOT NULL UNIQUE,
        time     REAL NOT NULL,
        provider TEXT NOT NULL,
        lease    TEXT NOT NULL,
        fence    INTEGER NOT NULL,
        kind     TEXT NOT NULL,
        v        INTEGER NOT NULL,
        payload  BLOB NOT NULL      -- orjson of the whole fact, without seq
    )""",
    # Only the latest snapshot is kept; AUTOINCREMENT keeps seq growing across the deletes.
    "demand": """CREATE TABLE IF NOT EXISTS demand (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        time    REAL NOT NULL,
        payload BLOB NOT NULL
    )""",
    # Past snapshots (those whose items changed), kept for DEMAND_HISTORY: what trace export reads.
    # A file made by an older daemon gains the table, and history from its next put on.
    "demand_history": """CREATE TABLE IF NOT EXISTS demand_history (
        seq     INTEGER PRIMARY KEY,
        time    REAL NOT NULL,
        payload BLOB NOT NULL
    )""",
    "host_events": """CREATE TABLE IF NOT EXISTS host_events (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        name     TEXT NOT NULL,
        event    TEXT NOT NULL,
        time     REAL NOT NULL,
        provider TEXT
    )""",
    # As the demand: only the latest view is kept.
    "supply": """CREATE TABLE IF NOT EXISTS supply (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        time    REAL NOT NULL,
        payload BLOB NOT NULL
    )""",
    "resource_totals": """CREATE TABLE IF NOT EXISTS resource_totals (
        name     TEXT PRIMARY KEY,
        base     INTEGER NOT NULL,
        borrowed INTEGER NOT NULL,
        total    INTEGER NOT NULL,
        time     REAL NOT NULL
    )""",
}


def _publish_totals(conn: sqlite3.Connection, facts: list[Fact]) -> None:
    """The totals a scheduler reads change with the fenced facts that say so, in the same transaction:
    a daemon whose fence is no longer current cannot change them, and no total is ever ahead of its fact."""
    conn.executemany(
        "INSERT INTO resource_totals (name, base, borrowed, total, time) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET base = excluded.base, borrowed = excluded.borrowed,"
        " total = excluded.total, time = excluded.time",
        [(p.resource, p.base, p.borrowed, p.total, f.time) for f in facts
         if isinstance(p := f.payload, ResourceTotalChanged)])


class SqliteController:
    """``Controller`` on one SQLite file, shared safely by threads and processes of one host."""

    def __init__(self, path: str, clock: Clock | None = None, busy_timeout: float = 5.0) -> None:
        """``clock``: the wall clock the demand and supply are stamped by, and, when given, the lease clock too
        (tests move both); without it leases expire by the host's clock since boot (``lease.sqlite``)."""
        self.path = path
        self._clock = clock or time.time
        try:
            # Created here 0600, so its -wal and -shm files are too (SQLite gives them its mode).
            private_file(path)
        except OSError:
            pass  # SQLite says what is wrong with the path, as ControllerUnavailable
        self._db = SqliteDatabase(path, busy_timeout=busy_timeout)
        self._decode = Decoder(path)
        self._watches = threading.local()
        self._watch_lock = threading.Lock()
        self._all_watches: list[WalWatch] = []
        try:
            self._db.ensure_schema(_SCHEMA)
            self._add_columns()
            self.leases = SqliteLeases(self._db, clock)
        except BaseException:
            self._db.close()
            raise

    def _add_columns(self) -> None:
        """Columns added since a file was made: a controller file written by an older daemon gains them."""
        with self._db.read() as conn:
            have = {row[1] for row in conn.execute("PRAGMA table_info(host_events)")}
        if "provider" not in have:
            with self._db.write() as conn:
                if "provider" not in {row[1] for row in conn.execute("PRAGMA table_info(host_events)")}:
                    conn.execute("ALTER TABLE host_events ADD COLUMN provider TEXT")

    # --- facts ---------------------------------------------------------------

    def append(self, facts: Sequence[Fact]) -> AppendResult:
        facts = list(facts)
        if not facts:
            return AppendResult()
        accepted: list[Fact] = []
        refused: list[RefusedFact] = []
        with self._db.write() as conn:
            verdicts: dict[tuple[str, int], str | None] = {}
            fresh: dict[str, Fact] = {}
            for fact in facts:
                reason = None
                if fact.lease:
                    key = (fact.lease, fact.fence)
                    if key not in verdicts:
                        verdicts[key] = self.leases.refusal(conn, fact.lease, fact.fence)
                    reason = verdicts[key]
                if reason is None:
                    fresh.setdefault(fact.id, fact)
                    continue
                stored = self._stored(conn, fact)
                if stored is not None:
                    accepted.append(stored)
                else:
                    refused.append(RefusedFact(id=fact.id, lease=fact.lease, fence=fact.fence, reason=reason))
            stored, inserted = self._insert_fresh(conn, fresh)
            accepted += stored
            accepted += inserted
            _publish_totals(conn, inserted)
            if inserted:
                failpoint("journal.mid_batch")
            # Every input gets one outcome: a repeat within the batch is accepted as its first copy.
            outcome = {f.id: f for f in accepted}
            repeats = len(facts) - len(refused) - len(outcome)
            if repeats:
                accepted = [outcome[f.id] for f in facts if f.id in outcome]
        if len(accepted) > len(inserted):  # else they are the inserted facts, in seq order already
            accepted.sort(key=lambda f: f.seq or 0)
        return AppendResult(accepted=accepted, refused=refused)

    def _insert_fresh(self, conn: sqlite3.Connection, fresh: dict[str, Fact]) -> tuple[list[Fact], list[Fact]]:
        """Facts fit to go in, by id: the stored copies of those the log holds already, and the rest inserted.

        All are inserted at once, and the unique index on ids says whether any is stored already (a retry
        after an unknown outcome): only then, the insert undone, are they looked up and the others inserted.
        """
        if not fresh:
            return [], []
        conn.execute("SAVEPOINT fresh")
        try:
            stored: dict[str, Fact] = {}
            inserted = self._insert_many(conn, list(fresh.values()))
        except sqlite3.IntegrityError:
            conn.execute("ROLLBACK TO fresh")
            stored = self._stored_many(conn, fresh)
            inserted = self._insert_many(conn, [f for i, f in fresh.items() if i not in stored])
        conn.execute("RELEASE fresh")
        return list(stored.values()), inserted

    def _insert_many(self, conn: sqlite3.Connection, facts: list[Fact]) -> list[Fact]:
        """Insert facts at consecutive seqs after the last (we hold the write lock); a stored id raises."""
        if not facts:
            return []
        first = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM facts").fetchone()[0] + 1
        conn.executemany(
            "INSERT INTO facts (seq, id, time, provider, lease, fence, kind, v, payload)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            # A generator: each row is freed once bound, so a batch's rows never wake the garbage collector.
            ((seq, f.id, f.time, f.provider, f.lease, f.fence, f.payload.kind, f.v, stored_fact(f))
             for seq, f in enumerate(facts, first)),
        )
        return [at_seq(f, seq) for seq, f in enumerate(facts, first)]

    def _stored_many(self, conn: sqlite3.Connection, facts: dict[str, Fact]) -> dict[str, Fact]:
        """The stored facts among ``facts`` (a retry after an unknown outcome finds its facts here)."""
        found: dict[str, Fact] = {}
        ids = list(facts)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = conn.execute(
                f"SELECT id, seq, payload FROM facts WHERE id IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            for fact_id, seq, payload in rows:
                # A stored copy that no longer decodes is still the same fact, at its seq.
                found[fact_id] = self._decode.fact(seq, payload) or at_seq(facts[fact_id], seq)
        return found

    def _stored(self, conn: sqlite3.Connection, fact: Fact) -> Fact | None:
        row = conn.execute("SELECT seq, payload FROM facts WHERE id = ?", (fact.id,)).fetchone()
        if row is None:
            return None
        # A stored copy that no longer decodes is still the same fact, at its seq.
        return self._decode.fact(row[0], row[1]) or at_seq(fact, row[0])

    def read(self, after: int = 0, limit: int = 10_000) -> list[Fact]:
        with self._db.read() as conn:
            return self._read_facts(conn, after, limit)[0]

    def _read_facts(self, conn: sqlite3.Connection, after: int, limit: int) -> tuple[list[Fact], int]:
        """Up to ``limit`` decodable facts after ``after``, and the last seq looked at."""
        out: list[Fact] = []
        last = after
        while len(out) < limit:
            rows = conn.execute(
                "SELECT seq, payload FROM facts WHERE seq > ? ORDER BY seq LIMIT ?",
                (last, limit - len(out)),
            ).fetchall()
            if not rows:
                break
            last = rows[-1][0]
            self._decode.facts(rows, out)
        return out, last

    def last_seq(self) -> int:
        with self._db.read() as conn:
            return conn.execute("SELECT COALESCE(MAX(seq), 0) FROM facts").fetchone()[0]

    # --- inputs from the scheduler and operators ----------------------------

    def put_demand(self, snapshot: DemandSnapshot) -> DemandSnapshot:
        payload = orjson.dumps({"items": snapshot.model_dump(mode="json", exclude_none=True)["items"]})
        with self._db.write() as conn:
            now = self._clock()
            seq = conn.execute("INSERT INTO demand (time, payload) VALUES (?, ?)", (now, payload)).lastrowid
            conn.execute("DELETE FROM demand WHERE seq < ?", (seq,))
            last = conn.execute("SELECT payload FROM demand_history ORDER BY seq DESC LIMIT 1").fetchone()
            if last is None or bytes(last[0]) != payload:
                conn.execute("INSERT INTO demand_history (seq, time, payload) VALUES (?, ?, ?)", (seq, now, payload))
            conn.execute("DELETE FROM demand_history WHERE time < ?", (now - DEMAND_HISTORY,))
        return snapshot.model_copy(update={"seq": seq, "time": now})

    def demand_history(self, since: float, until: float | None = None) -> list[DemandSnapshot]:
        with self._db.read() as conn:
            rows = conn.execute("SELECT seq, time, payload FROM demand_history WHERE time >= ? AND time <= ? "
                                "ORDER BY seq", (since, 1e300 if until is None else until)).fetchall()
        out = []
        for seq, at, payload in rows:
            snap = self._decode("demand", seq, lambda: DemandSnapshot.model_validate(
                {**orjson.loads(payload), "seq": seq, "time": at}))
            if snap is not None:
                out.append(snap)
        return out

    def get_demand(self) -> DemandSnapshot | None:
        with self._db.read() as conn:
            return self._latest_demand(conn, after=0)

    def _latest_demand(self, conn: sqlite3.Connection, after: int) -> DemandSnapshot | None:
        row = conn.execute(
            "SELECT seq, time, payload FROM demand WHERE seq > ? ORDER BY seq DESC LIMIT 1", (after,)
        ).fetchone()
        if row is None:
            return None
        seq, at, payload = row
        return self._decode(
            "demand",
            seq,
            lambda: DemandSnapshot.model_validate({**orjson.loads(payload), "seq": seq, "time": at}),
        )

    def post_host_event(self, name: str, event: HostEventKind, time: float,
                        provider: str | None = None) -> HostEvent:
        checked = HostEvent(name=name, event=event, time=time, provider=provider)
        with self._db.write() as conn:
            seq = conn.execute(
                "INSERT INTO host_events (name, event, time, provider) VALUES (?, ?, ?, ?)",
                (checked.name, checked.event, checked.time, checked.provider),
            ).lastrowid
        return checked.model_copy(update={"seq": seq})

    def read_host_events(self, after: int = 0, limit: int = 10_000) -> list[HostEvent]:
        with self._db.read() as conn:
            return self._read_host_events(conn, after, limit)[0]

    def _read_host_events(self, conn: sqlite3.Connection, after: int, limit: int) -> tuple[list[HostEvent], int]:
        rows = conn.execute(
            "SELECT seq, name, event, time, provider FROM host_events WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, max(0, limit)),
        ).fetchall()
        events = [
            self._decode("host event", seq,
                         lambda: HostEvent(seq=seq, name=name, event=event, time=at, provider=provider))
            for seq, name, event, at, provider in rows
        ]
        return [e for e in events if e is not None], (rows[-1][0] if rows else after)

    def put_supply(self, snapshot: SupplySnapshot) -> SupplySnapshot:
        payload = orjson.dumps(snapshot.model_dump(mode="json", exclude_none=True, include={"hosts", "resources"}))
        with self._db.write() as conn:
            now = self._clock()
            seq = conn.execute("INSERT INTO supply (time, payload) VALUES (?, ?)", (now, payload)).lastrowid
            conn.execute("DELETE FROM supply WHERE seq < ?", (seq,))
        return snapshot.model_copy(update={"seq": seq, "time": now})

    def get_supply(self) -> SupplySnapshot | None:
        with self._db.read() as conn:
            return self._latest_supply(conn, after=0)

    def _latest_supply(self, conn: sqlite3.Connection, after: int) -> SupplySnapshot | None:
        row = conn.execute(
            "SELECT seq, time, payload FROM supply WHERE seq > ? ORDER BY seq DESC LIMIT 1", (after,)
        ).fetchone()
        if row is None:
            return None
        seq, at, payload = row
        return self._decode(
            "supply view", seq,
            lambda: SupplySnapshot.model_validate({**orjson.loads(payload), "seq": seq, "time": at}),
        )

    def resource_totals(self) -> list[ResourceTotal]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT name, base, borrowed, total, time FROM resource_totals ORDER BY name"
            ).fetchall()
        return [ResourceTotal(name=n, base=b, borrowed=br, total=t, time=at) for n, b, br, t, at in rows]

    # --- push -----------------------------------------------------------------

    def changes(self, cursor: Cursor, timeout: float) -> Changes:
        """Polls ``PRAGMA data_version``, which moves when another connection commits.

        The version is read before each look, so a commit landing between the
        look and the wait is caught by the next poll rather than missed. Between
        polls the thread waits for the write-ahead log to be written
        (``persistence.wal_watch``): a commit is then looked for every
        ``FAST`` seconds until it shows, instead of at the next ``POLL_INTERVAL``.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        conn = self._db.connection()
        # Made before the first look, so a commit after it cannot go unseen; a call that may not wait needs none.
        watch = self._watch() if timeout > 0 else None
        soon = 0.0  # until then, the log was just written: look again at once
        while True:
            version = self._data_version(conn)
            found = self._changes_since(cursor)
            if found is not None:
                return found
            while self._data_version(conn) == version:
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    return Changes(cursor=cursor)
                if watch is None:  # no time to wait: returned just above
                    return Changes(cursor=cursor)
                if now < soon:
                    time.sleep(min(FAST, remaining))
                elif watch.wait(min(POLL_INTERVAL, remaining)):
                    soon = time.monotonic() + POLL_INTERVAL
                elif not watch.watching:
                    time.sleep(min(POLL_INTERVAL, remaining))

    def _watch(self) -> WalWatch:
        """This thread's watch of the log (each waiting thread reads events of its own)."""
        watch: WalWatch | None = getattr(self._watches, "watch", None)
        if watch is None:
            watch = self._watches.watch = WalWatch(self.path)
            with self._watch_lock:
                self._all_watches.append(watch)
        return watch

    def _data_version(self, conn: sqlite3.Connection) -> int:
        with self._db.unavailable():
            return conn.execute("PRAGMA data_version").fetchone()[0]

    def _changes_since(self, cursor: Cursor) -> Changes | None:
        with self._db.read() as conn:
            facts, fact_seq = self._read_facts(conn, cursor.facts, CHANGES_LIMIT)
            demand = self._latest_demand(conn, after=cursor.demand)
            events, event_seq = self._read_host_events(conn, cursor.host_events, CHANGES_LIMIT)
            supply = self._latest_supply(conn, after=cursor.supply)
        new_cursor = Cursor(
            facts=fact_seq,
            demand=demand.seq if demand is not None else cursor.demand,
            host_events=event_seq,
            supply=supply.seq if supply is not None else cursor.supply,
        )
        if new_cursor == cursor:
            return None
        return Changes(cursor=new_cursor, facts=facts, demand=demand, host_events=events, supply=supply)

    # --- lifecycle ----------------------------------------------------------

    def close(self) -> None:
        self._db.close()
        with self._watch_lock:
            watches, self._all_watches = self._all_watches, []
        for watch in watches:
            watch.close()
