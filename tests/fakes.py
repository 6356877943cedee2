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
