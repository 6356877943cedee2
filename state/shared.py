"""The daemon's one projection of every fact, shared by everything that reads them all.

The planner, the budget and the REST read model all read every fact, and
the provider actors together read them all too. Each keeping its own copy
cost a full projection apiece (about 90 MiB per 100,000 instances). Here one
projection serves them all: the journal applies each fact on its own thread
before it tells anyone the fact was committed (so a writer still sees its own
facts before its reply), the read model may catch it up from the controller
for a fresher view, and readers hold ``lock`` while they read. A fact reaching
it twice (from the journal and from the read model) is applied once: the
projection skips what its seq says it has.

In a daemon (given its clock), a fact stamped in the future (written
under another host's clock, or before this host's clock was set back) is
taken as stamped now, with a warning: by its stamp, a host idle since then
would stay held until the clock caught up with it. A reader without a
clock (the CLI reading the controller directly) shows stamps as recorded.

A provider actor reads its own provider's part (``Projection.part``): what
is in motion there, without scanning the other providers' records.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from typing import Any, Callable, Iterator, Sequence

from state.projection import Projection, pause_gc, resume_gc

log = logging.getLogger(__name__)

#: Seconds a stamp may lie ahead of now before it is taken as now (clocks of two hosts differ a little).
AHEAD = 2.0
#: Seconds between the warnings about stamps in the future.
SAY_EVERY = 60.0


class SharedProjection:
    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        """``clock``: the daemon's time, which no stamp may lie ahead of; None keeps every stamp as recorded."""
        self.clock = clock
        self._said = float("-inf")
        self.projection = Projection()
        #: Held while facts are applied and while a reader reads.
        self.lock = threading.RLock()
        #: Facts applied so far, by kind (the whole log's count once caught up, a snapshot's included).
        self.counts: Counter[str] = Counter()
        #: The id of the fact at ``seq`` (a snapshot names it to prove which log it belongs to).
        self.fact_id = ""
        #: The seq the journal's replay ended at; 0 until then.
        self.caught_up = 0
        self._replaying = False

    @property
    def seq(self) -> int:
        return self.projection.seq

    @contextlib.contextmanager
    def reading(self) -> Iterator[Projection]:
        """The projection, held still while the caller reads it."""
        with self.lock:
            yield self.projection

    def restore(self, snapshot: Any) -> bool:
        """Start from a snapshot, unless the projection already holds more; True if it did."""
        with self.lock:
            if snapshot.seq <= self.projection.seq:
                return False
            self.projection = snapshot.projection()
            self.counts = Counter(snapshot.counts)
            self.fact_id = snapshot.fact_id
            return True

    def apply_all(self, facts: Sequence[Any], replay: bool = False) -> None:
        """Apply committed facts in seq order; those already applied are skipped."""
        if replay and not self._replaying:
            # A replay builds many long-lived records in one go: no collector scans meanwhile.
            self._replaying = True
            pause_gc()
        with self.lock:
            seq = self.projection.seq
            fresh = facts
            if facts and facts[0].seq is not None and facts[0].seq <= seq:
                fresh = [f for f in facts if f.seq is None or f.seq > seq]
            if not fresh:
                return
            fresh = self._not_ahead(fresh)
            self.projection.apply_all(fresh)
            self.counts.update(f.kind for f in fresh)
            self.fact_id = fresh[-1].id

    def _not_ahead(self, facts: Sequence[Any]) -> Sequence[Any]:
        """The facts, with a stamp in the future taken as now (as recorded without a clock)."""
        if self.clock is None:
            return facts
        now = self.clock()
        if max(f.time for f in facts) <= now + AHEAD:
            return facts
        ahead = [f.time - now for f in facts if f.time > now + AHEAD]
        if now - self._said >= SAY_EVERY:
            self._said = now
            log.warning("projection: %d facts stamped up to %.0fs in the future are taken as stamped now (the "
                        "clock of the daemon that wrote them ran ahead, or this host's clock was set back)",
                        len(ahead), max(ahead))
        return [f.model_copy(update={"time": now}) if f.time > now + AHEAD else f for f in facts]

    def replayed(self, seq: int) -> None:
        self.caught_up = seq
        if self._replaying:
            self._replaying = False
            resume_gc()
