"""Turns for the owners' first scans: a daemon taking up many providers asks them what they hold a few at a time.

An owner's first scan (the orphan search and the reclaims check) comes once
it has caught up from the facts. A daemon that takes up a thousand providers
at once has a thousand owners catch up together: scanning all at once would
send a thousand ``list`` calls to the providers' APIs in the same moment, and
hold every answer in memory until its owner has read it. Waiting a fixed
time per provider instead leaves the scripts idle: a thousand owners 20 a
second take 50 s, however fast the providers answer.

So owners take turns: at most ``width`` first scans are under way at once
(by default as many as the daemon's script workers can run, two calls
each), and an owner gives its turn back once its scan's answers are in and
read, which hands it to the next owner waiting, in the order they asked. The
first scans go as fast as the providers answer and the owners read the
answers, and never more at once than the turns allow.

An owner's later scans keep their own period; only the first ones, which
come together, take turns. Owners only ``tell``: one waiting for its turn is
told ``ScanTurn`` when it comes.
"""

from __future__ import annotations

import threading
from typing import Any

import pykka


class ScanTurn:
    """Told to an owner that waited: its first scan may start now."""


#: One message for all: it carries nothing.
TURN = ScanTurn()


class FirstScans:
    """At most ``width`` owners' first scans under way at once; the others wait their turn, in order.

    Owners are known by a key of their own (their actor's urn), so that giving a turn back is
    the same whether it was held, still awaited, or already handed on: it can be asked twice.
    """

    def __init__(self, width: int) -> None:
        self.width = max(1, width)
        self._lock = threading.Lock()
        #: keys of the owners whose turn it is (told, or answered yes)
        self._held: set[str] = set()
        #: key -> ref of the owners waiting, in the order they asked
        self._waiting: dict[str, Any] = {}

    def ask(self, key: str, ref: Any) -> bool:
        """True: ``key``'s turn is now. False: ``ref`` is told ``ScanTurn`` when it comes."""
        with self._lock:
            if key in self._held:
                return True
            if len(self._held) < self.width and not self._waiting:
                self._held.add(key)
                return True
            self._waiting.setdefault(key, ref)
            return False

    def give_back(self, key: str) -> None:
        """``key`` is done with its turn, or no longer wants one: the next owner waiting gets it."""
        with self._lock:
            if self._waiting.pop(key, None) is not None or key not in self._held:
                return
            self._held.discard(key)
        self._hand_on()

    def _hand_on(self) -> None:
        while True:
            with self._lock:
                if len(self._held) >= self.width or not self._waiting:
                    return
                key = next(iter(self._waiting))
                ref = self._waiting.pop(key)
                self._held.add(key)
            try:
                ref.tell(TURN)
                return
            except pykka.ActorDeadError:
                # Stopped while it waited: its turn goes to the next one.
                with self._lock:
                    self._held.discard(key)

    def under_way(self) -> int:
        """Turns held now."""
        with self._lock:
            return len(self._held)

    def waiting(self) -> int:
        """Owners waiting for a turn."""
        with self._lock:
            return len(self._waiting)
