"""The snapshot file: trusted only for its own log and code, written so a crash never leaves half of one."""

from __future__ import annotations

import logging
import os

import orjson
import pytest

from persistence import snapshot as snapshot_module
from persistence.controller import open_controller
from persistence.replay import replay
from persistence.snapshot import SnapshotStore, encode
from tests.support.facts import state
from tests.support.snapshots import varied_log


@pytest.fixture
def log_db(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="state.projection")
    c = open_controller(f"sqlite:///{tmp_path / 'log.db'}")
    c.append([f.model_copy(update={"seq": None}) for f in varied_log(11, steps=300)])
    yield c
    c.close()


def write(store: SnapshotStore, c, upto: int | None = None) -> int:
    p = replay(c)
    if upto is not None:
        p = type(p)()
        p.apply_all(c.read(limit=upto))
    fact_id = c.read(after=p.seq - 1, limit=1)[0].id
    store.write(encode(p, fact_id, {}), p.seq, fact_id)
    return p.seq


def test_round_trip_through_the_file(tmp_path, log_db):
    store = SnapshotStore(tmp_path / "snap" / "x.snapshot")
    seq = write(store, log_db)
    assert store.seq() == seq
    snap = store.load(log_db)
    assert snap is not None and snap.seq == seq
    assert state(snap.projection()) == state(replay(log_db))


def test_the_file_name_does_not_show_the_controller_url(tmp_path):
    store = SnapshotStore.for_controller(tmp_path, "etcd://user:secret@h:2379/ns")
    assert "secret" not in str(store.path) and store.path.parent == tmp_path / "snapshots"
    assert SnapshotStore.for_controller(tmp_path, "sqlite:///other.db").path != store.path


def test_no_snapshot_means_a_full_replay(tmp_path, log_db, caplog):
    caplog.set_level(logging.INFO, logger="persistence.snapshot")
    assert SnapshotStore(tmp_path / "none.snapshot").load(log_db) is None
    assert "replaying the whole log" in caplog.text


def _ignored(store, c, caplog, why: str) -> None:
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="persistence.snapshot")
    assert store.load(c) is None
    assert why in caplog.text and "replaying the whole log" in caplog.text


def test_a_damaged_file_is_ignored(tmp_path, log_db, caplog):
    store = SnapshotStore(tmp_path / "x.snapshot")
    write(store, log_db)
    data = store.path.read_bytes()
    header, body = data.split(b"\n", 1)
    store.path.write_bytes(header + b"\n" + body[:100] + bytes([body[100] ^ 1]) + body[101:])
    _ignored(store, log_db, caplog, "checksum")
    store.path.write_bytes(data[: len(data) - 10])  # cut short
    _ignored(store, log_db, caplog, "checksum")
    store.path.write_bytes(b"garbage\n" + body)
    _ignored(store, log_db, caplog, "header does not read")


def _rewrite_header(store: SnapshotStore, **changes) -> None:
    header, body = store.path.read_bytes().split(b"\n", 1)
    store.path.write_bytes(orjson.dumps({**orjson.loads(header), **changes}) + b"\n" + body)


def test_a_snapshot_of_other_projection_code_or_format_is_ignored(tmp_path, log_db, caplog):
    store = SnapshotStore(tmp_path / "x.snapshot")
    write(store, log_db)
    _rewrite_header(store, schema="0" * 32)
    _ignored(store, log_db, caplog, "another version of the projection code")
    write(store, log_db)
    _rewrite_header(store, version=snapshot_module.VERSION + 1)
    _ignored(store, log_db, caplog, "format")


def test_a_snapshot_of_another_log_is_ignored(tmp_path, log_db, caplog):
    store = SnapshotStore(tmp_path / "x.snapshot")
    write(store, log_db)
    other = open_controller(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        other.append([f.model_copy(update={"seq": None, "id": f"x{f.seq}"}) for f in varied_log(11, steps=300)])
        _ignored(store, other, caplog, "another log")
    finally:
        other.close()


def test_a_snapshot_ahead_of_the_log_is_ignored(tmp_path, log_db, caplog):
    """The log was restored from an older backup: the snapshot knows facts the log no longer has."""
    store = SnapshotStore(tmp_path / "x.snapshot")
    write(store, log_db)
    shorter = open_controller(f"sqlite:///{tmp_path / 'short.db'}")
    try:
        shorter.append([f.model_copy(update={"seq": None}) for f in log_db.read(limit=100)])
        _ignored(store, shorter, caplog, "ahead of the log")
    finally:
        shorter.close()


def test_a_body_that_lies_about_its_seq_is_ignored(tmp_path, log_db, caplog):
    store = SnapshotStore(tmp_path / "x.snapshot")
    write(store, log_db, upto=50)
    fact = log_db.read(after=59, limit=1)[0]
    _rewrite_header(store, seq=60, fact_id=fact.id)
    _ignored(store, log_db, caplog, "does not match its header")


@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_a_crash_while_writing_leaves_the_previous_snapshot_whole(tmp_path, log_db, monkeypatch, step):
    store = SnapshotStore(tmp_path / "x.snapshot")
    old = write(store, log_db, upto=100)
    before = store.path.read_bytes()

    class Crash(BaseException):
        pass

    def crash(*_a, **_k):
        raise Crash()

    if step == "write":
        real_open = open

        def open_then_crash(path, mode="r", *a, **k):
            f = real_open(path, mode, *a, **k)
            if "w" in mode:
                f.write(b'{"format"')
                f.flush()
                raise Crash()
            return f

        monkeypatch.setattr("builtins.open", open_then_crash)
    else:
        monkeypatch.setattr(os, step, crash)
    with pytest.raises(Crash):
        write(store, log_db)
    monkeypatch.undo()
    assert store.path.read_bytes() == before
    assert not list(tmp_path.glob("*.tmp")), "what was half written is cleared away"
    snap = store.load(log_db)
    assert snap is not None and snap.seq == old


def test_a_temporary_file_left_by_a_killed_writer_is_never_read_and_later_removed(tmp_path, log_db, monkeypatch):
    """SIGKILL between writing the temporary file and renaming it: nothing cleans up at once."""
    store = SnapshotStore(tmp_path / "x.snapshot")
    old = write(store, log_db, upto=100)
    leftover = store.path.with_name(f"{store.path.name}.99999-1.tmp")
    leftover.write_bytes(b'{"format": "provisioner-snapshot", "seq": 1')
    snap = store.load(log_db)
    assert snap is not None and snap.seq == old
    write(store, log_db)
    assert leftover.exists(), "a writer that may still be running keeps its file"
    monkeypatch.setattr(snapshot_module, "ABANDONED", -1.0)
    write(store, log_db, upto=120)
    assert not leftover.exists()


def test_a_file_already_judged_is_not_read_again_until_it_changes(tmp_path, log_db, caplog):
    """The daemon, the journal and the read model all ask at start: one warning, one decode."""
    store = SnapshotStore(tmp_path / "x.snapshot")
    store.path.write_bytes(b"junk")
    _ignored(store, log_db, caplog, "header does not read")
    caplog.clear()
    assert store.load(log_db) is None and "ignoring" not in caplog.text
    write(store, log_db)
    first = store.load(log_db)
    assert first is not None and store.load(log_db) is first, "one decoded snapshot, shared"
