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
from collections.abc import Callable, Container
from typing import Any

import pykka

from owner.calls import CheckReclaims, List, ScanStatus

#: The slots of a scan's calls: its turn is given back once none of them is under way.
SCAN_SLOTS = (List, ScanStatus, CheckReclaims)


class ScanTurn:
    """Told to an owner that waited: its first scan may start now."""


#: One message for all: it carries nothing.
TURN = ScanTurn()


class FirstScans:
    """At most ``width`` owners' first scans under way at once; the others wait their turn, in order.

    Owners are known by a key of their own (their actor's urn), so that giving a turn back is
    the same whether it was held, still awaited, or already handed on: it can be asked twice.

    ``after``, if given, is called once the last turn of a run of first scans is given back with
    no owner waiting (on the thread that gave it back): the burst of answers is over.
    """

    def __init__(self, width: int, after: Callable[[], None] | None = None) -> None:
        self.width = max(1, width)
        self._after = after
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
        if self._after is not None:
            with self._lock:
                over = not self._held and not self._waiting
            if over:
                self._after()

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


class FirstScan:
    """One owner's place in the turns: none taken or wanted (no turns, or its first scan is done), waiting
    for its turn, holding it, its scan under way. Its own object, so that the owner keeps one attribute."""

    __slots__ = ("turns", "phase", "key", "state")
    NONE, AWAITING, TURN, SCANNING = range(4)

    def __init__(self, turns: FirstScans | None, phase: float = 0.0) -> None:
        self.turns, self.phase, self.key, self.state = turns, phase, "", self.NONE

    @property
    def over(self) -> bool:
        """No first scan is waited for or under way: the owner's scans keep their own period."""
        return self.state == self.NONE

    def ask(self, key: str, ref: Any, now: float, period: float) -> float:
        """Caught up: the first scan is due now, or when ``ref`` is told ``ScanTurn``. Returns when the later
        scans count their period from: ``phase`` (at most one period) after now, so that a daemon's owners,
        caught up together, do not all scan again in the same moment."""
        self.key = key
        self.state = self.TURN if self.turns is None or self.turns.ask(key, ref) else self.AWAITING
        return now + min(self.phase, period)

    def told(self) -> bool:
        """``ScanTurn`` came: True if it was waited for (it is told once, to an owner that waits)."""
        if self.state != self.AWAITING:
            return False
        self.state = self.TURN
        return True

    def take(self) -> bool:
        """True once, when the turn is held: the first scan starts now."""
        if self.state != self.TURN:
            return False
        self.state = self.SCANNING
        return True

    def scanned(self, busy: Container[object]) -> None:
        """The first scan's answers are all in and read (or it made no call): the turn goes to the next owner."""
        if self.state == self.SCANNING and not any(slot in busy for slot in SCAN_SLOTS):
            self.end()

    def end(self) -> None:
        """Held or awaited, the turn goes to the next owner waiting."""
        if self.state != self.NONE:
            self.state = self.NONE
            if self.turns is not None:
                self.turns.give_back(self.key)
