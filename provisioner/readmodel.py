"""The cluster-wide view that REST handlers and metrics read: a projection of every fact.

It follows the controller itself rather than this daemon's journal, so every
instance of the daemon serves the same view, owners' facts and others' alike.
Handlers run on several threads; the projection is only touched under the lock.

It starts from the latest snapshot when there is one, and it is what new
snapshots are taken from: the daemon holds this full projection anyway, so
snapshots cost no second copy of the state.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Iterator

from messages.facts import Fact
from persistence.port import Controller
from persistence.projection import Projection
from persistence.snapshot import Snapshot, SnapshotStore, encode
from provisioner.views import catch_up


class ReadModel:
    def __init__(self, controller: Controller, snapshots: SnapshotStore | None = None) -> None:
        self.controller = controller
        self.snapshots = snapshots
        self._p = Projection()
        self._lock = threading.Lock()
        #: Facts read so far, by kind: the whole log once the first refresh is done.
        self.facts_by_kind: Counter[str] = Counter()
        #: The id of the fact at ``_p.seq`` (a snapshot names it to prove which log it belongs to).
        self._fact_id = ""
        self._started = False
        #: seq of the last snapshot written from here; writers take turns
        self.snapshot_seq = 0
        self._writing = threading.Lock()

    def start_from(self, snapshot: Snapshot | None) -> None:
        """Start from a snapshot already loaded (by the daemon, for its actors too) instead of reading the file."""
        with self._lock:
            if not self._started:
                self._restore(snapshot)

    def _restore(self, snapshot: Snapshot | None) -> None:
        self._started = True
        if snapshot is not None:
            self._p = snapshot.projection()
            self.facts_by_kind = Counter(snapshot.counts)
            self._fact_id = snapshot.fact_id
            self.snapshot_seq = snapshot.seq

    def refresh(self) -> int:
        """Read the facts committed since the last refresh; returns how many there were."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> int:
        if not self._started:
            self._restore(self.snapshots.load(self.controller) if self.snapshots is not None else None)
        return catch_up(self._p, self.controller, self._count)

    def _count(self, facts: list[Fact]) -> None:
        self.facts_by_kind.update(f.kind for f in facts)
        self._fact_id = facts[-1].id

    @contextlib.contextmanager
    def current(self) -> Iterator[Projection]:
        """The projection brought up to date, held still while the caller reads it."""
        with self._lock:
            self._refresh()
            yield self._p

    @property
    def seq(self) -> int:
        return self._p.seq

    def write_snapshot(self) -> int | None:
        """Bring the view up to date and snapshot it; the seq written, or None when nothing is new.

        Only encoding holds the lock (readers wait that long); the file is
        written after.
        """
        if self.snapshots is None:
            return None
        with self._writing:
            with self._lock:
                self._refresh()
                seq, fact_id = self._p.seq, self._fact_id
                if seq == self.snapshot_seq:
                    return None
                body = encode(self._p, fact_id, self.facts_by_kind)
            self.snapshots.write(body, seq, fact_id)
            self.snapshot_seq = seq
            return seq
