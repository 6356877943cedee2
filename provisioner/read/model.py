"""The cluster-wide view that REST handlers and metrics read: a projection of every fact.

It is the daemon's shared projection (``state.shared``), the one the
journal keeps fed and the planner and budget read. Before each read it is
also caught up from the controller itself, so every instance of the daemon
serves the same, current view, owners' facts and others' alike; a fact that
arrives both ways is applied once. Handlers run on several threads; the
projection is only touched under its lock.

It starts from the latest snapshot when there is one, and it is what new
snapshots are taken from: the daemon holds this full projection anyway, so
snapshots cost no second copy of the state.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Mapping

from persistence.port import Controller
from persistence.replay import catch_up
from persistence.snapshot import Snapshot, SnapshotStore, encode
from state.projection import Projection
from state.shared import SharedProjection


class ReadModel:
    def __init__(self, controller: Controller, snapshots: SnapshotStore | None = None,
                 shared: SharedProjection | None = None) -> None:
        self.controller = controller
        self.snapshots = snapshots
        self.shared = shared or SharedProjection()
        self._started = False
        #: seq of the last snapshot written from here, or loaded; writers take turns
        self.snapshot_seq = 0
        self._writing = threading.Lock()

    def start_from(self, snapshot: Snapshot | None) -> None:
        """Start from a snapshot already loaded (by the daemon, for its actors too) instead of reading the file."""
        with self.shared.lock:
            if not self._started:
                self._restore(snapshot)

    def _restore(self, snapshot: Snapshot | None) -> None:
        self._started = True
        if snapshot is not None:
            self.shared.restore(snapshot)
            self.snapshot_seq = max(self.snapshot_seq, snapshot.seq)

    def refresh(self) -> int:
        """Read the facts committed since the last refresh; returns how many there were.

        The controller is read outside the lock, which is taken per page to
        apply it: a slow controller must not hold up the journal, which
        applies under the same lock.
        """
        if not self._started:
            snapshot = self.snapshots.load(self.controller) if self.snapshots is not None else None
            with self.shared.lock:
                if not self._started:
                    self._restore(snapshot)
        return catch_up(self.shared, self.controller)

    @property
    def facts_by_kind(self) -> Mapping[str, int]:
        """Facts read so far, by kind: the whole log's once caught up."""
        return self.shared.counts

    @contextlib.contextmanager
    def current(self) -> Iterator[Projection]:
        """The projection brought up to date, held still while the caller reads it."""
        self.refresh()
        with self.shared.lock:
            yield self.shared.projection

    @property
    def seq(self) -> int:
        return self.shared.seq

    def write_snapshot(self) -> int | None:
        """Bring the view up to date and snapshot it; the seq written, or None when nothing is new.

        Only encoding holds the lock (readers wait that long); the file is
        written after.
        """
        if self.snapshots is None:
            return None
        with self._writing:
            self.refresh()
            with self.shared.lock:
                seq, fact_id = self.shared.seq, self.shared.fact_id
                if seq == self.snapshot_seq:
                    return None
                body = encode(self.shared.projection, fact_id, self.shared.counts)
            self.snapshots.write(body, seq, fact_id)
            self.snapshot_seq = seq
            return seq
