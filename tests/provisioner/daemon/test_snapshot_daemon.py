"""Snapshots in the daemon: the journal starts the shared projection from one, the read model writes them."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest

from actors.base import Ping
from actors.journal import JournalActor
from config.models import Config
from messages.commands import CaughtUp, Committed, Subscribe
from persistence.controller import open_controller
from persistence.replay import replay
from persistence.snapshot import SnapshotStore
from provisioner.daemon.root import Daemon
from provisioner.daemon.snapshotter import Snapshotter
from provisioner.read.model import ReadModel
from state.shared import SharedProjection
from tests.support.facts import state
from tests.support.fakes import Inbox
from tests.support.snapshots import varied_log

pytestmark = pytest.mark.slow


@pytest.fixture
def controller(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="state.projection")
    c = open_controller(f"sqlite:///{tmp_path / 'log.db'}")
    c.append([f.model_copy(update={"seq": None}) for f in varied_log(21, steps=300)[:250]])
    yield c
    c.close()


def _append_rest(c) -> None:
    c.append([f.model_copy(update={"seq": None}) for f in varied_log(21, steps=300)[250:]])


def _feed(inbox: Inbox) -> list:
    seen: list = []
    while not seen or not isinstance(seen[-1], CaughtUp):
        seen.append(inbox.get(object))
    return seen


class _Reads:
    """The controller, noting where each read of the log began (but the one-fact reads that check a
    snapshot's last fact is still in the log)."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self.after: list[int] = []

    def read(self, after: int = 0, limit: int = 10_000):
        if limit > 1:
            self.after.append(after)
        return self.controller.read(after=after, limit=limit)

    def __getattr__(self, name):
        return getattr(self.controller, name)


def test_the_journal_starts_the_shared_projection_from_the_snapshot_then_reads_only_the_facts_after_it(
        tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    ReadModel(controller, store).write_snapshot()
    at = store.seq()
    _append_rest(controller)
    reads, shared = _Reads(controller), SharedProjection()
    journal = JournalActor.start(reads, snapshots=store, shared=shared)
    try:
        inbox, own = Inbox(), Inbox()
        journal.tell(Subscribe(ref=inbox))
        journal.tell(Subscribe(ref=own, providers=["a"]))
        seen, mine = _feed(inbox), _feed(own)
        assert not any(isinstance(m, Committed) for m in seen + mine), "subscribers read the shared projection"
        assert min(reads.after) == at, "nothing the snapshot holds is read again"
        with shared.reading() as p:
            assert state(p) == state(replay(controller))
        assert journal.proxy().snapshot.get() is None, "the decoded snapshot is let go once the projection holds it"
    finally:
        journal.stop()


def test_without_a_usable_snapshot_the_journal_replays_everything(tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    store.path.write_bytes(b"not a snapshot")
    reads, shared = _Reads(controller), SharedProjection()
    journal = JournalActor.start(reads, snapshots=store, shared=shared)
    try:
        inbox = Inbox()
        journal.tell(Subscribe(ref=inbox))
        _feed(inbox)
        assert min(reads.after) == 0
        with shared.reading() as p:
            assert state(p) == state(replay(controller))
    finally:
        journal.stop()


def test_the_read_model_starts_from_the_snapshot_and_counts_every_fact(tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    first = ReadModel(controller, store)
    assert first.write_snapshot() == controller.last_seq()
    assert first.write_snapshot() is None, "nothing new, nothing written"
    _append_rest(controller)
    second = ReadModel(controller, store)
    with second.current() as p:
        assert state(p) == state(replay(controller))
    assert second.facts_by_kind == Counter(f.kind for f in controller.read(limit=100_000))
    assert second.write_snapshot() == controller.last_seq()


def test_the_snapshotter_writes_once_enough_facts_are_new_and_at_stop(tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    snapshotter = Snapshotter(ReadModel(controller, store), controller, every=200, period=0.02)
    snapshotter.start()
    try:
        deadline = time.monotonic() + 10
        while store.seq() != controller.last_seq() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.seq() == controller.last_seq()
        written = store.seq()
        _append_rest(controller)  # fewer than ``every`` facts: not due yet
        time.sleep(0.1)
        assert store.seq() == written
    finally:
        snapshotter.stop()
    assert store.seq() == controller.last_seq(), "a clean stop writes the last snapshot"


def test_a_daemon_writes_a_snapshot_at_stop_and_its_successor_starts_from_it(tmp_path, controller, caplog):
    url = f"sqlite:///{tmp_path / 'log.db'}"
    cfg = Config.model_validate({"instance": {"id": "d", "serves": [], "planner": False},
                                 "controller": {"url": url}, "home": str(tmp_path / "home")})
    Daemon(cfg, tmp_path / "home").start().stop()
    store = SnapshotStore.for_controller(tmp_path / "home", url)
    assert store.seq() == controller.last_seq()
    _append_rest(controller)  # written while no daemon ran: the successor must not miss them
    caplog.set_level(logging.INFO, logger="persistence.snapshot")
    daemon = Daemon(cfg, tmp_path / "home").start()
    try:
        daemon.budget.ask(Ping(), timeout=10)
        view = daemon.budget.proxy().view.get(timeout=10)  # the journal's shared projection
        deadline = time.monotonic() + 10
        while view.projection.seq < controller.last_seq() and time.monotonic() < deadline:
            time.sleep(0.02)
        with view.reading() as p:
            assert state(p) == state(replay(controller))
    finally:
        daemon.stop()
    assert "loaded seq" in caplog.text
