"""SQLite leases expire by the host's clock since boot, which no setting of the wall clock moves (issue 28, case 3).

By the wall clock, a step forward expired every lease at once (every owner
stopped, every fact in flight was refused), and a step back let a dead
holder's lease stand for as long as the step.
"""

from __future__ import annotations

import sqlite3
import time

from persistence.sqlite import SqliteController

DAY = 86_400.0


def test_a_wall_clock_step_neither_ends_nor_stretches_a_lease(tmp_path, monkeypatch):
    c = SqliteController(str(tmp_path / "c.db"))
    try:
        lease = c.leases.acquire("provider:p", "a", 60)
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + DAY)  # a day ahead
        assert c.leases.renew(lease, 60) is not None, "a step forward ended the lease"
        assert c.leases.acquire("provider:p", "b", 60) is None
        monkeypatch.setattr(time, "time", lambda: real() - DAY)  # a day behind
        short = c.leases.acquire("provider:q", "a", 0.05)
        deadline = time.monotonic() + 10
        while c.leases.get("provider:q") is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.leases.get("provider:q") is None, "a step back stretched the lease"
        taken = c.leases.acquire("provider:q", "b", 60)
        assert taken is not None and taken.fence > short.fence
    finally:
        c.close()


def test_a_lease_granted_before_the_host_last_booted_is_void(tmp_path):
    path = tmp_path / "c.db"
    c = SqliteController(str(path))
    try:
        old = c.leases.acquire("provider:p", "a", 3600)
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE leases SET boot = 'an-earlier-boot' WHERE name = 'provider:p'")
        conn.close()
        assert c.leases.get("provider:p") is None
        assert c.leases.renew(old, 60) is None
        new = c.leases.acquire("provider:p", "b", 60)
        assert new is not None and new.fence > old.fence
    finally:
        c.close()


def test_a_file_an_older_daemon_made_gains_the_boot_column_and_its_leases_are_void(tmp_path):
    path = tmp_path / "c.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, fence INTEGER NOT NULL, "
                     "expires_at REAL NOT NULL)")
        conn.execute("INSERT INTO leases VALUES ('provider:p', 'a', 7, ?)", (time.time() + 3600,))
    conn.close()
    c = SqliteController(str(path))
    try:
        assert c.leases.get("provider:p") is None, "a wall-clock expiry read as a lease clock's"
        assert c.leases.acquire("provider:p", "b", 60).fence == 8
    finally:
        c.close()


def test_a_file_made_before_leases_kept_when_they_were_granted_gains_the_column(tmp_path):
    path = tmp_path / "c.db"
    first = SqliteController(str(path))
    try:
        old = first.leases.acquire("provider:p", "a", 3600)
    finally:
        first.close()
    conn = sqlite3.connect(path)
    with conn:  # the table as the version before made it: no granted_at
        conn.execute("ALTER TABLE leases DROP COLUMN granted_at")
    conn.close()
    c = SqliteController(str(path))
    try:
        (row,) = c.leases.table()
        assert (row.holder, row.fence, row.held, row.granted_ago) == ("a", old.fence, True, None), \
            "a grant the older version made is held still; when it was made is not known"
        assert c.leases.renew(old, 3600) is not None
        new = c.leases.acquire("provider:q", "b", 60)
        assert new is not None
        rows = {r.name: r for r in c.leases.table()}
        assert rows["provider:p"].granted_ago is None, "a renewal does not make it a new grant"
        assert rows["provider:q"].granted_ago is not None and 0 <= rows["provider:q"].granted_ago < 60
    finally:
        c.close()
