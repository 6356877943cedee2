"""What the SQLite backend adds to the contract: URLs, durability settings, failures, bad rows."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest

from messages.errors import ControllerUnavailable
from messages.facts import Fact, UsageObserved, make_fact
from persistence.controller import open_controller, patiently, sqlite_path
from persistence.port import Cursor
from persistence.sqlite import SqliteController


def fact(n: int) -> Fact:
    return make_fact(UsageObserved(resource="vcs", in_use=n), now=float(n))


def test_url_path_is_everything_after_the_scheme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a" / "b" / "state.db"
    assert sqlite_path(f"sqlite://{target}") == str(target)
    assert sqlite_path(f"sqlite:///{target}") == str(target), "sqlite:////abs means /abs"
    assert (tmp_path / "a" / "b").is_dir(), "parent folders are created"
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite://rel/state.db") == "rel/state.db"
    assert (tmp_path / "rel").is_dir()


def test_open_controller_creates_the_file_and_its_folders(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "state.db"
    controller = open_controller(f"sqlite://{target}")
    try:
        controller.append([fact(1)])
    finally:
        controller.close()
    assert target.is_file()


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("etcd://127.0.0.1:99999", "port out of range"),
        ("redis://localhost/0", "unknown scheme 'redis'"),
        ("/var/lib/state.db", "expected sqlite://PATH"),
        ("sqlite://", "naming a database file"),
        ("sqlite://:memory:", "in-memory"),
        ("sqlite:///tmp/x.db?mode=ro", "query parameters"),
    ],
)
def test_bad_urls_are_refused_clearly(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words) as err:
        open_controller(url)
    assert url in str(err.value)


def test_folder_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ControllerUnavailable, match="cannot create folder"):
        open_controller(f"sqlite://{blocker}/sub/state.db")


@pytest.mark.parametrize("case", ["missing folder", "folder as file", "not a database"])
def test_unopenable_file_raises_controller_unavailable_naming_it(tmp_path: Path, case: str) -> None:
    path = {
        "missing folder": tmp_path / "missing" / "state.db",
        "folder as file": tmp_path,
        "not a database": tmp_path / "garbage.db",
    }[case]
    if case == "not a database":
        path.write_bytes(b"this is not an sqlite file" * 100)
    with pytest.raises(ControllerUnavailable) as err:
        SqliteController(str(path))
    assert str(path) in str(err.value)


def test_wal_and_full_sync_on_every_connection(tmp_path: Path) -> None:
    controller = SqliteController(str(tmp_path / "state.db"))
    try:
        seen: list[tuple[str, int]] = []

        def look() -> None:
            conn = controller._db.connection()
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            seen.append((mode, conn.execute("PRAGMA synchronous").fetchone()[0]))

        look()
        worker = threading.Thread(target=look)
        worker.start()
        worker.join(5)
        assert seen == [("wal", 2), ("wal", 2)]  # 2 = FULL
    finally:
        controller.close()


def test_threads_appending_through_one_handle(tmp_path: Path) -> None:
    controller = SqliteController(str(tmp_path / "state.db"))
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for batch in range(10):
                controller.append([fact(worker * 1000 + batch * 10 + i) for i in range(10)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert errors == []
        seqs = [f.seq for f in controller.read()]
        assert seqs == list(range(1, 401))
    finally:
        controller.close()


def test_closed_controller_is_unavailable(tmp_path: Path) -> None:
    controller = SqliteController(str(tmp_path / "state.db"))
    controller.close()
    with pytest.raises(ControllerUnavailable, match="closed"):
        controller.read()
    with pytest.raises(ControllerUnavailable, match="closed"):
        controller.leases.get("planner")


def test_undecodable_row_is_skipped_with_a_warning_naming_its_seq(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    controller = SqliteController(str(path))
    try:
        before = controller.append([fact(1)]).accepted
        raw = sqlite3.connect(path)
        with raw:
            future = {"id": "f-new", "time": 2.0, "v": 2, "payload": {"kind": "from_the_future"}}
            raw.execute(
                "INSERT INTO facts (id, time, provider, lease, fence, kind, v, payload)"
                " VALUES ('f-new', 2.0, '', '', 0, 'from_the_future', 2, ?)",
                (orjson.dumps(future),),
            )
        raw.close()
        bad_seq = before[0].seq + 1
        after = controller.append([fact(3)]).accepted
        with caplog.at_level(logging.WARNING, logger="persistence.sqlite"):
            assert controller.read() == before + after
            assert controller.read(after=before[0].seq, limit=1) == after, "a skipped row does not eat the page"
            changes = controller.changes(Cursor(facts=before[0].seq), timeout=0)
        assert changes.facts == after and changes.cursor.facts == after[0].seq
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, "warned once per row, not on every read"
        assert f"seq {bad_seq}" in warnings[0]
        assert controller.append([fact(99).model_copy(update={"id": "f-new"})]).accepted[0].seq == bad_seq
    finally:
        controller.close()


def test_cursor_moves_past_a_tail_of_undecodable_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    controller = SqliteController(str(path))
    try:
        raw = sqlite3.connect(path)
        with raw:
            raw.execute(
                "INSERT INTO facts (id, time, provider, lease, fence, kind, v, payload)"
                " VALUES ('bad', 1.0, '', '', 0, 'x', 1, x'00ff')"
            )
        raw.close()
        got = controller.changes(Cursor(), timeout=0)
        assert got.facts == [] and got.cursor.facts == 1
    finally:
        controller.close()


def test_joining_a_file_whose_write_lock_is_held_needs_no_write(tmp_path: Path) -> None:
    """A daemon starting next to one frozen inside a write transaction still opens and reads the file."""
    path = tmp_path / "state.db"
    SqliteController(str(path)).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        joining = SqliteController(str(path), busy_timeout=0.05)
        try:
            assert joining.last_seq() == 0
            assert joining.leases.all() == []
            with pytest.raises(ControllerUnavailable, match="locked"):
                joining.append([fact(1)])
        finally:
            joining.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_patiently_waits_for_the_controller_and_gives_up_on_stop(caplog: pytest.LogCaptureFixture) -> None:
    answers = [ControllerUnavailable("etcd down"), ControllerUnavailable("etcd down"), "opened"]

    def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with caplog.at_level(logging.WARNING, logger="persistence.controller"):
        assert patiently("opening", call, threading.Event(), first_delay=0.0) == "opened"
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["opening", "opening"]
    assert "attempt 2" in caplog.records[1].getMessage()

    stopping = threading.Event()
    stopping.set()
    assert patiently("opening", lambda: pytest.fail("called after stop"), stopping) is None
    with pytest.raises(ValueError, match="bad url"):
        patiently("opening", lambda: (_ for _ in ()).throw(ValueError("bad url")), threading.Event())


def test_a_controller_file_of_an_older_daemon_gains_the_host_events_provider_column(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE host_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
                 " event TEXT NOT NULL, time REAL NOT NULL)")
    conn.execute("INSERT INTO host_events (name, event, time) VALUES ('n1', 'joined', 1.0)")
    conn.commit()
    conn.close()
    c = SqliteController(str(path))
    try:
        c.post_host_event("n2", "idle", 2.0, provider="p")
        assert [(e.name, e.provider) for e in c.read_host_events()] == [("n1", None), ("n2", "p")]
    finally:
        c.close()


def test_a_read_fact_is_the_appended_one_with_the_store_s_seq(tmp_path: Path) -> None:
    """Decoded facts equal what was appended, seq set as if parsed with the rest."""
    path = tmp_path / "state.db"
    controller = SqliteController(str(path))
    try:
        accepted = controller.append([fact(1), fact(2)]).accepted
        raw = sqlite3.connect(path)
        with raw:  # a row edited by hand to carry a seq of its own: the store's position is its seq
            stored = raw.execute("SELECT payload FROM facts WHERE seq = ?", (accepted[1].seq,)).fetchone()[0]
            payload = orjson.loads(stored)
            raw.execute("UPDATE facts SET payload = ? WHERE seq = ?",
                        (orjson.dumps({**payload, "seq": 1234}), accepted[1].seq))
        raw.close()
        read = controller.read()
        assert read == accepted
        assert [f.seq for f in read] == [accepted[0].seq, accepted[1].seq]
        assert all("seq" in f.model_fields_set for f in read)
    finally:
        controller.close()
