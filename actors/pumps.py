"""Two plain threads that turn time and the controller's changes into messages.

They are the only loops that wait; actors never block, they get told.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from typing import Any, Callable

from messages.commands import Tick
from messages.errors import ControllerUnavailable
from persistence.port import Controller, Cursor

log = logging.getLogger(__name__)


class _Loop:
    """A named daemon thread running ``_run`` until ``stop()``."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        raise NotImplementedError


class Ticker(_Loop):
    """Tells every registered actor ``Tick(now)`` every ``period`` seconds, and an actor that asks for one
    (``wake``) a Tick of its own at the moment it asks for, between the periodic ones."""

    def __init__(self, period: float, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__("ticker")
        self.period = period
        self.clock = clock
        self.monotonic = monotonic
        self._refs: list[Any] = []
        self._lock = threading.Lock()
        #: (when, order, ref) of the Ticks asked for, soonest first.
        self._wakes: list[tuple[float, int, Any]] = []
        self._order = itertools.count()
        #: Set when a wake is asked for or the loop must stop: the loop's wait ends early.
        self._kick = threading.Event()

    def add(self, ref: Any) -> None:
        with self._lock:
            self._refs.append(ref)

    def remove(self, ref: Any) -> None:
        with self._lock:
            if ref in self._refs:
                self._refs.remove(ref)

    def tick(self) -> None:
        """One round; also what tests call to drive time by hand."""
        tick = Tick(now=self.clock())  # one frozen message for all: a thousand owners may be slow to read it
        with self._lock:
            refs = list(self._refs)
        for ref in refs:
            if ref.is_alive():
                ref.tell(tick)

    def wake(self, ref: Any, delay: float) -> None:
        """Tell ``ref`` one Tick ``delay`` seconds from now (by ``monotonic``), whatever the period."""
        with self._lock:
            heapq.heappush(self._wakes, (self.monotonic() + max(0.0, delay), next(self._order), ref))
        self._kick.set()

    def fire_due(self) -> float:
        """Tell the Ticks asked for that are due; seconds until the next one (inf when none is asked for).

        Also what tests call to drive time by hand.
        """
        now = self.monotonic()
        due = []
        with self._lock:
            while self._wakes and self._wakes[0][0] <= now:
                due.append(heapq.heappop(self._wakes)[2])
            after = self._wakes[0][0] - now if self._wakes else math.inf
        if due:
            tick = Tick(now=self.clock())
            for ref in due:
                if ref.is_alive():
                    ref.tell(tick)
        return after

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        super().stop()

    def _run(self) -> None:
        next_tick = self.monotonic() + self.period
        while not self._stop.is_set():
            self._kick.clear()  # before looking: a wake asked for from now on ends the wait below
            wait = min(next_tick - self.monotonic(), self.fire_due())
            if wait > 0:
                self._kick.wait(wait)
                continue
            self.tick()
            next_tick = self.monotonic() + self.period


class Tailer(_Loop):
    """Follows the controller's changes and hands each batch to the journal."""

    def __init__(self, controller: Controller, on_changes: Callable[[Any], None], cursor: Cursor) -> None:
        super().__init__("tailer")
        self.controller = controller
        self.on_changes = on_changes
        self.cursor = cursor
        self.healthy = True

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                changes = self.controller.changes(self.cursor, timeout=0.25)
            except ControllerUnavailable as exc:
                if self.healthy:
                    log.error("controller unreachable, retrying: %s", exc)
                self.healthy = False
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if not self.healthy:
                log.info("controller reachable again")
            self.healthy, backoff = True, 0.1
            if changes.cursor != self.cursor:
                self.cursor = changes.cursor
                self.on_changes(changes)
