"""The daemon-wide pool of script threads: bounded, in order, and never short of a worker."""

from __future__ import annotations

import threading
import time

from providers.pool import ScriptPool


def _wait(cond: threading.Condition, pred, timeout: float = 5.0) -> None:
    with cond:
        assert cond.wait_for(pred, timeout), "timed out"


def _soon(pred, timeout: float = 5.0) -> bool:
    """True once ``pred()`` holds: workers end on their own time, with no one to notify."""
    until = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > until:
            return False
        time.sleep(0.01)
    return True


def test_no_more_workers_than_allowed_however_many_turns_wait():
    pool = ScriptPool(workers=2, idle_exit=5)
    cond = threading.Condition()
    gate = threading.Event()
    state = {"now": 0, "most": 0, "done": 0}

    def turn() -> None:
        with cond:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        gate.wait(5)
        with cond:
            state["now"] -= 1
            state["done"] += 1
            cond.notify_all()

    try:
        for _ in range(10):
            pool.put(turn)
        assert len(pool.threads()) == 2
        _wait(cond, lambda: state["now"] == 2)  # both workers busy, eight turns waiting
        gate.set()
        _wait(cond, lambda: state["done"] == 10)
        assert state["most"] == 2
    finally:
        pool.close()


def test_turns_run_in_the_order_they_came():
    pool = ScriptPool(workers=1, idle_exit=5)
    cond = threading.Condition()
    order: list[int] = []

    def turn(i: int) -> None:
        with cond:
            order.append(i)
            cond.notify_all()

    try:
        for i in range(20):
            pool.put(lambda i=i: turn(i))
        _wait(cond, lambda: len(order) == 20)
        assert order == list(range(20))
    finally:
        pool.close()


def test_a_failing_turn_costs_no_worker():
    pool = ScriptPool(workers=1, idle_exit=5)
    ran = threading.Event()

    def bad() -> None:
        raise RuntimeError("runner bug")

    try:
        pool.put(bad)
        pool.put(ran.set)
        assert ran.wait(5)
    finally:
        pool.close()


def test_idle_workers_end_and_work_after_that_still_runs():
    pool = ScriptPool(workers=3, idle_exit=0.1)
    ran = threading.Event()
    pool.put(lambda: None)
    assert _soon(lambda: pool.threads() == []), "an idle worker ends"
    pool.put(ran.set)
    assert ran.wait(5)


def test_a_turn_queued_after_close_still_runs():
    pool = ScriptPool(workers=2, idle_exit=30)
    first, second = threading.Event(), threading.Event()
    pool.put(first.set)
    assert first.wait(5)
    pool.close()
    pool.put(second.set)
    assert second.wait(5)
    pool.close()
    assert _soon(lambda: pool.threads() == []), "closed workers end"


def test_an_idle_worker_holds_no_turn_it_ran():
    import gc
    import weakref

    class Runner:
        def __init__(self) -> None:
            self.ran = threading.Event()

        def turn(self) -> None:
            self.ran.set()

    pool = ScriptPool(workers=1, idle_exit=30)
    runner = Runner()
    gone = weakref.ref(runner)
    pool.put(runner.turn)
    assert runner.ran.wait(5)
    del runner
    assert _soon(lambda: gc.collect() is not None and gone() is None), "a stopped runner (and its actor) must go"
    pool.close()
