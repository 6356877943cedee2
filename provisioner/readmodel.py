"""The cluster-wide view that REST handlers and metrics read: a projection of every fact.

It follows the controller itself rather than this daemon's journal, so every
instance of the daemon serves the same view, owners' facts and others' alike.
Handlers run on several threads; the projection is only touched under the lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Iterator

from messages.facts import Fact
from persistence.port import Controller
from persistence.projection import Projection
from provisioner.views import catch_up


class ReadModel:
    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self._p = Projection()
        self._lock = threading.Lock()
        #: Facts read so far, by kind: the whole log once the first refresh is done.
        self.facts_by_kind: Counter[str] = Counter()

    def refresh(self) -> int:
        """Read the facts committed since the last refresh; returns how many there were."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> int:
        return catch_up(self._p, self.controller, self._count)

    def _count(self, facts: list[Fact]) -> None:
        self.facts_by_kind.update(f.kind for f in facts)

    @contextlib.contextmanager
    def current(self) -> Iterator[Projection]:
        """The projection brought up to date, held still while the caller reads it."""
        with self._lock:
            self._refresh()
            yield self._p

    @property
    def seq(self) -> int:
        return self._p.seq
