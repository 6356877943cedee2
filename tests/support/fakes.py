"""Test fakes shared by the actor tests."""

from __future__ import annotations

import queue


class Inbox:
    """Stands in for an actor ref: what is told to it lands in a queue."""

    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue()

    def tell(self, msg) -> None:
        self.q.put(msg)

    def get(self, kind):
        while True:
            msg = self.q.get(timeout=5)
            if isinstance(msg, kind):
                return msg


class ScriptedCalls:
    """A ``ProviderCalls`` whose results a test gives: it records each call, and ``answer`` hands one back.

    Made by ``factory`` where an owner expects a calls factory; ``submitted`` gets the calls in order.
    """

    def __init__(self) -> None:
        self.submitted: queue.Queue = queue.Queue()
        self.on_done = None
        self.stopped = False

    def factory(self, _cfg, _work_dir, on_done, _may_act) -> "ScriptedCalls":
        self.on_done = on_done
        return self

    def submit(self, call) -> None:
        self.submitted.put(call)

    def stop(self) -> None:
        self.stopped = True

    def health(self) -> str:
        return ""

    def next(self, action: str | None = None, timeout: float = 5.0):
        """The next call submitted (of ``action``, skipping others)."""
        while True:
            call = self.submitted.get(timeout=timeout)
            if action is None or call.action == action:
                return call

    def answer(self, call, result) -> None:
        from owner.calls import CallDone

        self.on_done(CallDone(call, result))
