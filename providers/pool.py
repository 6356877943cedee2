"""The threads that run scripts: a bounded number for all the providers of a daemon.

A daemon serving a thousand providers must not hold a thread per provider,
or one per running script: thousands of threads cost memory, and, taking
turns at the interpreter lock, make every one of them slow (measured: a
thousand providers describing themselves at start took minutes).

Runners put *turns* here, one per script run they may start (their own
``max_concurrent`` bounds how many they have out). Turns are served in the
order they came, so a provider with many runs waiting gets one worker at a
time among the others: its runner queues its next turn only when one ends.
Workers start when turns wait and no worker is idle, up to ``workers``, and
end after ``idle_exit`` seconds without work.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

log = logging.getLogger(__name__)

Turn = Callable[[], None]


class ScriptPool:
    def __init__(self, workers: int = 32, idle_exit: float = 30.0, name: str = "script") -> None:
        self.workers = workers
        self.idle_exit = idle_exit
        self.name = name
        self._turns: queue.SimpleQueue[Turn | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: Worker threads alive, and how many of them wait for a turn (both under ``_lock``).
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._started = 0
        #: End marks queued by ``close`` and not yet taken.
        self._ends = 0

    def put(self, turn: Turn) -> None:
        """Queue a turn; a worker calls it soon. A turn must not raise (one that does is logged)."""
        with self._lock:
            self._turns.put(turn)
            self._more_hands()

    def close(self) -> None:
        """End the workers once the turns queued before have run (a runner's own pool, at its stop)."""
        with self._lock:
            for _ in self._threads:
                self._turns.put(None)
                self._ends += 1

    def threads(self) -> list[str]:
        """Names of the workers alive now."""
        with self._lock:
            return [t.name for t in self._threads]

    def _more_hands(self) -> None:
        """Start a worker when turns wait for one and the limit allows (caller holds ``_lock``)."""
        if self._turns.qsize() - self._ends > self._idle and len(self._threads) < self.workers:
            self._started += 1
            thread = threading.Thread(target=self._work, name=f"{self.name}-{self._started}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _next(self) -> Turn | None:
        """The next turn; None once this worker has waited ``idle_exit`` seconds for one, or at ``close``."""
        while True:
            with self._lock:
                self._idle += 1
            try:
                turn = self._turns.get(timeout=self.idle_exit)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    # A turn queued between the timeout and the lock is still this worker's to take.
                    if self._turns.empty():
                        self._threads.remove(threading.current_thread())
                        return None
                continue
            with self._lock:
                self._idle -= 1
                if turn is None:
                    self._ends -= 1
                    self._threads.remove(threading.current_thread())
                self._more_hands()  # for a turn queued behind ``close``, a fresh worker
            return turn

    def _work(self) -> None:
        while True:
            turn = self._next()
            if turn is None:
                return
            try:
                turn()
            except Exception:  # a runner's bug must not cost the daemon a worker
                log.exception("%s: a script turn failed", self.name)
            # Hold no runner while waiting: a stopped one (and its actor) must go.
            del turn
