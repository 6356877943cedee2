"""The watch on an SQLite file's write-ahead log: a commit wakes a waiting reader, other files do not."""

from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path

import pytest

import persistence.sqlite as sqlite_backend
import persistence.wal_watch as wal_watch
from messages.facts import UsageObserved, make_fact
from persistence.port import Changes, Cursor
from persistence.sqlite import SqliteController
from persistence.wal_watch import WalWatch

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _wal_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x INTEGER)")
    return conn


@linux_only
def test_a_commit_to_the_log_wakes_it_and_another_file_in_the_folder_does_not(tmp_path: Path) -> None:
    conn = _wal_db(tmp_path / "state.db")
    watch = WalWatch(str(tmp_path / "state.db"))
    try:
        assert watch.watching
        assert watch.wait(0) is False, "nothing written since it began"
        (tmp_path / "state.db.bak").write_bytes(b"x")
        (tmp_path / "other-wal").write_bytes(b"x")
        assert watch.wait(0) is False, "only the database's own log counts"
        conn.execute("INSERT INTO t VALUES (1)")
        assert watch.wait(5.0) is True
        assert watch.wait(0) is False, "the events were read: a wait takes each write once"
    finally:
        watch.close()
        conn.close()
    assert not watch.watching and watch.wait(0) is False


def test_without_inotify_it_watches_nothing_and_never_wakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wal_watch, "_CALLS", None)
    conn = _wal_db(tmp_path / "state.db")
    watch = WalWatch(str(tmp_path / "state.db"))
    conn.execute("INSERT INTO t VALUES (1)")
    assert not watch.watching and watch.wait(0) is False
    conn.close()


def _wait_for_a_fact(tmp_path: Path) -> tuple[list[Changes], list]:
    """A reader waiting in ``changes`` while another controller on the same file commits a fact."""
    path = str(tmp_path / "state.db")
    reader, writer = SqliteController(path), SqliteController(path)
    try:
        cursor = reader.changes(Cursor(), timeout=0).cursor
        results: list[Changes] = []
        waiting = threading.Event()
        real_watch = reader._watch

        def watch() -> WalWatch:
            made = real_watch()
            waiting.set()  # once it watches: a commit from now on is one it must see
            return made

        reader._watch = watch  # type: ignore[method-assign]
        waiter = threading.Thread(target=lambda: results.append(reader.changes(cursor, timeout=120)))
        waiter.start()
        assert waiting.wait(30)
        written = writer.append([make_fact(UsageObserved(resource="vcs", in_use=1), now=1.0)]).accepted
        waiter.join(60)
        assert not waiter.is_alive(), "the commit was not found"
        return results, written
    finally:
        reader.close()
        writer.close()


@linux_only
def test_a_waiting_reader_is_woken_by_the_log_not_its_next_poll(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Polls far apart: only the watch can wake the reader before the join gives up.
    monkeypatch.setattr(sqlite_backend, "POLL_INTERVAL", 600.0)
    results, written = _wait_for_a_fact(tmp_path)
    assert [c.facts for c in results] == [written]


def test_without_inotify_a_waiting_reader_finds_the_commit_by_polling(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wal_watch, "_CALLS", None)
    results, written = _wait_for_a_fact(tmp_path)
    assert [c.facts for c in results] == [written]
