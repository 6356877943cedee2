"""Pooled actors: pykka's rules on a few shared threads, one turn at a time per actor."""

from __future__ import annotations

import threading
import time

import pykka
import pytest
from pykka._envelope import Envelope

from actors import pooled
from actors.pooled import PooledActor


class Recorder(PooledActor):
    def __init__(self, log: list, busy: dict | None = None) -> None:
        super().__init__()
        self.log = log
        self.busy = busy if busy is not None else {}

    def on_start(self) -> None:
        self.log.append(("start", self.actor_urn))

    def on_receive(self, message):
        if message == "boom":
            raise ValueError("boom")
        if message == "slow":
            # Two workers inside one actor at once would both be counted here.
            self.busy[self.actor_urn] = self.busy.get(self.actor_urn, 0) + 1
            overlap = self.busy[self.actor_urn] > 1
            time.sleep(0.001)
            self.busy[self.actor_urn] -= 1
            self.log.append(("overlap", overlap))
            return threading.current_thread().name
        self.log.append(message)
        return message

    def double(self, n: int) -> int:
        return 2 * n


def _stop_all(refs) -> None:
    for ref in refs:
        ref.stop()


def test_messages_are_handled_in_order_after_on_start_and_asks_are_answered():
    log: list = []
    ref = Recorder.start(log)
    try:
        for i in range(200):
            ref.tell(i)
        assert ref.ask("last") == "last"
        assert log[0][0] == "start" and log[1:] == [*range(200), "last"]
        assert ref.proxy().double(21).get() == 42, "proxies work as on any pykka actor"
    finally:
        ref.stop()


def test_a_thousand_actors_share_a_few_threads_and_each_is_served_by_one_at_a_time():
    log: list = []
    busy: dict = {}
    before = threading.active_count()
    refs = [Recorder.start(log, busy) for _ in range(1000)]
    try:
        futures = [ref.ask("slow", block=False) for ref in refs for _ in range(3)]
        names = {f.get(timeout=30) for f in futures}
        assert names <= {t.name for t in pooled._WORKERS.threads}
        assert threading.active_count() - before <= pooled.WORKERS
        assert not any(overlap for kind, overlap in log if kind == "overlap")
    finally:
        _stop_all(refs)


def test_an_ask_that_fails_fails_for_its_caller_only():
    log: list = []
    ref = Recorder.start(log)
    try:
        with pytest.raises(ValueError, match="boom"):
            ref.ask("boom")
        assert ref.is_alive() and ref.ask("after") == "after"
    finally:
        ref.stop()


def test_a_tell_that_fails_stops_the_actor_as_pykka_does():
    log: list = []
    ref = Recorder.start(log)
    ref.tell("boom")
    deadline = time.monotonic() + 5
    while ref.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("more")


def test_asks_queued_behind_a_stop_learn_the_actor_is_dead():
    gate = threading.Event()

    class Gated(PooledActor):
        def on_receive(self, message):
            gate.wait(5)
            return message

    ref = Gated.start()
    first = ref.ask("first", block=False)
    stopped = ref.stop(block=False)
    future = pykka.ThreadingFuture()
    ref.actor_inbox.put(Envelope("late", reply_to=future))  # an ask that raced the stop: queued behind it
    gate.set()
    assert first.get(timeout=5) == "first"
    stopped.get(timeout=5)
    with pytest.raises(pykka.ActorDeadError):
        future.get(timeout=5)
    assert not ref.is_alive()


def test_an_actor_whose_start_fails_is_stopped():
    class Broken(PooledActor):
        def on_start(self) -> None:
            raise RuntimeError("cannot start")

    ref = Broken.start()
    deadline = time.monotonic() + 5
    while ref.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ref.is_alive()


def test_one_busy_actor_does_not_starve_the_others_even_on_one_worker(monkeypatch):
    monkeypatch.setattr(pooled, "_WORKERS", pooled._Workers(1))
    log: list = []
    busy_ref, other = Recorder.start([]), Recorder.start(log)
    try:
        for _ in range(2000):
            busy_ref.tell("slow")  # two seconds of work at least
        assert other.ask("done", timeout=5) == "done"
        assert not busy_ref.actor_inbox.empty(), "served after a turn of the busy actor, not after all its mail"
    finally:
        _stop_all([busy_ref, other])


def test_a_stopped_actor_is_not_kept_alive_by_the_worker_that_served_it_last(monkeypatch):
    import gc
    import weakref

    monkeypatch.setattr(pooled, "_WORKERS", pooled._Workers(1))
    ref = Recorder.start([])
    assert ref.ask("hello") == "hello"
    actor = weakref.ref(ref.actor_inbox.actor)
    ref.stop()
    del ref
    deadline = time.monotonic() + 5
    while actor() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert actor() is None, "an idle worker holds no actor (nor what the actor holds: a whole projection)"


def test_actor_stopped_can_be_waited_on_like_pykkas_event():
    ref = Recorder.start([])
    assert ref.actor_stopped is ref._actor_weakref().actor_stopped, "the ref reads the actor's own flag"
    assert ref.actor_stopped.wait(0.01) is False and ref.is_alive()
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(ref.actor_stopped.wait(10)))
    waiter.start()
    ref.stop()
    waiter.join(10)
    assert woke == [True] and not ref.is_alive()
    assert ref.actor_stopped.wait(0) is True, "a wait after the stop returns at once"


def test_a_flag_set_before_its_first_wait_is_seen_by_it():
    flag = pooled._Stopped()
    flag.set()
    assert flag.is_set() and flag.wait(0) is True
