"""Snapshots in the daemon: the journal starts subscribers from one, the read model writes them."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest

from actors.base import Ping
from actors.journal import JournalActor, Restored
from config.models import Config
from messages.commands import CaughtUp, Committed, Subscribe
from persistence.controller import open_controller
from persistence.replay import replay
from persistence.snapshot import SnapshotStore
from provisioner.daemon import Daemon
from provisioner.readmodel import ReadModel
from provisioner.snapshotter import Snapshotter
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


def test_the_journal_starts_a_subscriber_from_the_snapshot_then_sends_only_the_facts_after_it(tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    ReadModel(controller, store).write_snapshot()
    at = store.seq()
    _append_rest(controller)
    journal = JournalActor.start(controller, snapshots=store)
    try:
        inbox, own = Inbox(), Inbox()
        journal.tell(Subscribe(ref=inbox))
        journal.tell(Subscribe(ref=own, providers=["a"]))
        seen = _feed(inbox)
        assert isinstance(seen[0], Restored) and seen[0].snapshot.seq == at
        replayed = [f for m in seen if isinstance(m, Committed) for f in m.facts]
        assert replayed and min(f.seq for f in replayed) == at + 1, "nothing the snapshot holds is sent again"
        p = seen[0].snapshot.projection()
        p.apply_all(replayed)
        assert state(p) == state(replay(controller))

        mine = _feed(own)
        p = mine[0].snapshot.projection()
        assert p.instances and {i.provider for i in p.instances.values()} == {"a"}
        assert all(f.provider in ("", "a") for m in mine if isinstance(m, Committed) for f in m.facts)
    finally:
        journal.stop()


def test_without_a_usable_snapshot_the_journal_replays_everything(tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    store.path.write_bytes(b"not a snapshot")
    journal = JournalActor.start(controller, snapshots=store)
    try:
        inbox = Inbox()
        journal.tell(Subscribe(ref=inbox))
        seen = _feed(inbox)
        assert not any(isinstance(m, Restored) for m in seen)
        assert min(f.seq for m in seen if isinstance(m, Committed) for f in m.facts) == 1
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


def test_a_stopped_journal_leaves_no_timer_holding_it_and_its_snapshot(tmp_path, controller):
    store = SnapshotStore(tmp_path / "x.snapshot")
    ReadModel(controller, store).write_snapshot()
    journal = JournalActor.start(controller, snapshots=store)
    inbox = Inbox()
    journal.tell(Subscribe(ref=inbox))
    _feed(inbox)
    timers = journal.proxy().timers.get()
    assert timers and all(t.is_alive() for t in timers), "the decoded snapshot is kept a while for joiners"
    journal.stop()
    for t in timers:
        t.join(timeout=5)
        assert not t.is_alive(), "cancelled at stop, not left to hold the journal for KEEP_SNAPSHOT seconds"
