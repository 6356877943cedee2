"""JournalActor: the single writer of facts, and the one feed of committed facts.

Writers tell ``Append``; every ``Append`` that arrived before the next
``_Flush`` is committed in one transaction (group commit: the flush message
queues behind the appends). After a commit the journal feeds subscribers in
seq order: the facts as the controller gave them back when they follow on
from what it delivered last, else what the log holds from there (another
writer's facts came between). So a writer sees its own facts in its
projection before it gets the ``Appended`` reply (pykka delivers one
sender's messages in order). The commit hook (metrics, the mark, the audit
log) runs after the subscribers were told and before the replies. The
tailer's batches go the same way; facts already delivered are skipped by seq.

The journal keeps one projection of every fact (``state.shared``): it applies
each batch to it on its own thread before telling any subscriber, so the
planner, the budget, the read model and the owners read one copy of every
fact. Subscribers are sent no history: their ``CaughtUp`` comes once that
projection holds everything before. An owner is still told of its share of
each later batch, as news to act on; the facts are already in the projection
it reads.

Each subscriber is told only what it wants (``Subscribe.wants``): the
planner the demand, an owner its providers' facts, the supply view and its
hosts' events. ``CaughtUp`` goes to every subscriber. The scheduler's inputs
that come with a batch are placed by ``actors.inputs`` once the batch's facts
are in the shared projection; the journal only tells them on.

A commit the controller refuses (full, locked, unreachable) is answered
with the error, and what comes next is tried only after a wait that grows
with each failure (``Refusals``): writers send again at once, and a refusing
controller must not be asked at each of their passes.

At start the shared projection is restored from the latest snapshot, then
caught up with the facts after it (no collector scans meanwhile); the
decoded snapshot is let go once it is.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import pykka

from actors.base import Actor, handles
from actors.inputs import SchedulerInputs
from messages.base import Model
from messages.commands import Append, Appended, CaughtUp, Committed, Interest, Recipient, Subscribe, Unsubscribe
from messages.errors import ControllerUnavailable
from messages.facts import Fact, summary
from persistence.failpoints import failpoint
from persistence.port import Changes, Controller
from persistence.snapshot import Snapshot, SnapshotStore
from state.shared import SharedProjection

log = logging.getLogger(__name__)

#: Facts read from the log at a time. Each read's decoded facts die once applied, while what they
#: leave in the projection lives on among the holes they leave in the allocator's pools: a small
#: chunk keeps those holes few. 5,000 left some 10 MiB of them after replaying 200,000 facts;
#: 500 replays as fast.
CHUNK = 500
#: Seconds before a replay that could not read the log is tried again.
REPLAY_RETRY = 0.5
#: Seconds between tries while the controller refuses writes (full, locked, unreachable): the wait after
#: each failed commit, doubling to the last. Under the REST API's 10 s wait for an operator's write.
WRITE_RETRY = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Seconds between the log lines that say the controller still refuses writes.
SAY_REFUSING_EVERY = 60.0


class Refusals:
    """How long the controller has refused writes, and when the journal tries again.

    A full disk or a file locked by another process refuses every write for a
    while: the journal waits a little longer after each failed commit instead
    of trying again at each writer's next pass, and says so once a minute, not
    at every try. Time is the monotonic clock: the wall clock may step.
    """

    __slots__ = ("failures", "since", "next_try", "said")

    def __init__(self) -> None:
        self.failures = 0
        self.since = 0.0
        self.next_try = 0.0
        self.said = 0.0

    def wait(self, now: float) -> float:
        """Seconds until the next commit may be tried (0: now)."""
        return max(0.0, self.next_try - now)

    def failed(self, now: float, facts: int, why: str) -> None:
        if not self.failures:
            self.since = self.said = now
            log.error("journal: %d facts not committed: %s; writes are tried again after a growing wait, "
                      "up to %.0fs", facts, why, WRITE_RETRY[-1])
        elif now - self.said >= SAY_REFUSING_EVERY:
            self.said = now
            log.error("journal: the controller still refuses writes (%d tries over %.0fs): %s", self.failures + 1,
                      now - self.since, why)
        self.failures += 1
        self.next_try = now + WRITE_RETRY[min(self.failures, len(WRITE_RETRY)) - 1]

    def committed(self, now: float) -> None:
        if self.failures:
            log.warning("journal: the controller takes writes again, after %d failed tries over %.0fs",
                        self.failures, now - self.since)
        self.failures = 0
        self.next_try = 0.0


class _Flush(Model):
    pass


class _Replay(Model):
    pass


class Feed(Model):
    changes: Changes


@dataclass
class _Subscriber:
    ref: Recipient
    #: Of each batch, the share of these providers (every fact for None), as news, when it wants facts.
    providers: frozenset[str] | None
    #: What it is told of besides ``CaughtUp``.
    wants: frozenset[Interest] = frozenset(Interest)


class _Shares:
    """One batch of facts split by provider once, so each subscriber's share costs only its own size.

    A thousand provider actors joining at once would otherwise each test every
    fact of the log: a million tests per thousand facts.
    """

    def __init__(self, facts: list[Fact]) -> None:
        self.facts = facts
        self.at: dict[str, list[int]] = {}
        for i, fact in enumerate(facts):
            self.at.setdefault(fact.provider, []).append(i)

    def of(self, providers: frozenset[str] | None) -> list[Fact]:
        """The facts of ``providers`` and those of no provider, in log order (all of them for None)."""
        if providers is None:
            return self.facts
        names = [p for p in providers if p in self.at] if len(providers) <= len(self.at) else \
            [p for p in self.at if p in providers]
        if "" in self.at:
            names.append("")
        if not names:
            return []
        if len(names) == 1:
            at = self.at[names[0]]
            return self.facts if len(at) == len(self.facts) else [self.facts[i] for i in at]
        return [self.facts[i] for i in sorted(i for name in names for i in self.at[name])]


class JournalActor(Actor):
    def __init__(
        self,
        controller: Controller,
        *,
        on_commit: Callable[[list[Fact], float], None] | None = None,
        max_batch: int = 2_000,
        snapshots: SnapshotStore | None = None,
        snapshot: Snapshot | None = None,
        shared: SharedProjection,
        inputs: SchedulerInputs | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``snapshot``: one the caller already loaded from ``snapshots``, to spare decoding it twice.

        ``inputs``: places the scheduler's host events and supply views before they are fed (by default
        against ``shared``, refusals counted nowhere); the daemon's counts its refusals for the metrics.

        ``shared``: the projection of every fact that this journal keeps fed and every subscriber
        reads; it is applied to before any subscriber is told of a fact.
        """
        super().__init__()
        self.controller = controller
        self.snapshots = snapshots
        self.snapshot = snapshot
        self.on_commit = on_commit
        self.max_batch = max_batch
        self.pending: list[Append] = []
        self.flush_queued = False
        self.delivered = 0
        self.subscribers: list[_Subscriber] = []
        #: subscribers waiting for their replay, served together by the next ``_Replay``
        self.joining: list[_Subscriber] = []
        self.replay_queued = False
        self.shared = shared
        #: The shared projection holds every fact up to ``delivered``: built at the first replay.
        self.built = False
        self.inputs = inputs if inputs is not None else SchedulerInputs(shared)
        #: Timers started and maybe still waiting (cancelled at stop).
        self.timers: list[threading.Timer] = []
        self.monotonic = monotonic
        self.refusals = Refusals()

    def on_start(self) -> None:
        self.delivered = self.controller.last_seq()
        self._queue_replay()  # builds the shared projection, before any subscriber joined

    # --- writing -----------------------------------------------------------------

    @handles(Append)
    def _append(self, msg: Append) -> None:
        self.pending.append(msg)
        self._queue_flush()

    def _queue_flush(self) -> None:
        """A flush at once, or when the next try is due while the controller refuses writes."""
        if self.flush_queued:
            return
        self.flush_queued = True
        wait = self.refusals.wait(self.monotonic())
        if wait:
            self._later(wait, self._tell_flush)
        else:
            self.actor_ref.tell(_Flush())

    def _tell_flush(self) -> None:
        if self.actor_ref.is_alive():
            self.actor_ref.tell(_Flush())

    @handles(_Flush)
    def _flush(self, _: _Flush) -> None:
        self.flush_queued = False
        while self.pending:
            if self.refusals.wait(self.monotonic()):
                # The controller refused the last commit: what waits is tried when the next try is due.
                self._queue_flush()
                return
            batch: list[Append] = []
            size = 0
            while self.pending and (not batch or size + len(self.pending[0].facts) <= self.max_batch):
                msg = self.pending.pop(0)
                batch.append(msg)
                size += len(msg.facts)
            self._commit(batch)

    def _commit(self, batch: list[Append]) -> None:
        facts = [f for msg in batch for f in msg.facts]
        started = time.perf_counter()
        failpoint("journal.before_commit")
        try:
            result = self.controller.append(facts)
            elapsed = time.perf_counter() - started
        except ControllerUnavailable as exc:
            self.refusals.failed(self.monotonic(), len(facts), str(exc))
            for msg in batch:
                if msg.reply_to is not None:
                    self._tell(msg.reply_to, Appended(tag=msg.tag, error=str(exc)))
            return
        self.refusals.committed(self.monotonic())
        failpoint("journal.after_commit")
        self._committed(result.accepted)
        for fact in result.accepted:
            log.info("%s", summary(fact))
        refused = {r.id: r for r in result.refused}
        for r in result.refused:
            log.warning("journal: fact %s refused under lease %s: %s", r.id, r.lease, r.reason)
        if self.on_commit is not None:
            # Metrics, the mark and the audit log hang here: after the subscribers heard of the facts (an
            # owner acts on its orders meanwhile), before the writers' replies (an operator's action is in
            # the audit log when its request returns). Their failure must not lose the commit's replies.
            try:
                self.on_commit(result.accepted, elapsed)
            except Exception:
                log.exception("journal: on_commit hook failed")
        for msg in batch:
            if msg.reply_to is None:
                continue
            mine = [f.id for f in msg.facts]
            self._tell(
                msg.reply_to,
                Appended(
                    tag=msg.tag,
                    accepted=[i for i in mine if i not in refused],
                    refused=[(i, refused[i].lease, refused[i].reason) for i in mine if i in refused],
                )
            )

    def _committed(self, accepted: list[Fact]) -> None:
        """Feed what a commit wrote: as it came back from the controller when it follows on from what was
        delivered, seq after seq (no other writer's fact came between), else read from the log."""
        seqs = [f.seq for f in accepted]
        first = self.delivered + 1
        if seqs and seqs == list(range(first, first + len(seqs))):
            self._deliver(accepted)
        else:
            self._catch_up()

    # --- feeding -------------------------------------------------------------------

    @handles(Feed)
    def _feed(self, msg: Feed) -> None:
        ch = msg.changes
        if ch.facts:
            if ch.facts[0].seq is not None and ch.facts[0].seq > self.delivered + 1:
                self._catch_up()  # never leave a gap: read what lies between
            self._deliver([f for f in ch.facts if (f.seq or 0) > self.delivered])
        # Placed once the batch's facts are in the shared projection: a host recorded in them is found.
        inputs = self.inputs.fresh(ch.demand, ch.supply, ch.host_events)
        for sub in list(self.subscribers):
            for told in (inputs.demand_for(sub.wants), inputs.supply_for(sub.wants),
                         inputs.events_for(sub.wants, sub.providers)):
                if told is not None:
                    self._tell(sub.ref, told)

    def _catch_up(self) -> None:
        try:
            while True:
                facts = self.controller.read(after=self.delivered, limit=CHUNK)
                if not facts:
                    return
                self._deliver(facts)
                if len(facts) < CHUNK:
                    return
        except ControllerUnavailable as exc:
            log.error("journal: cannot read the fact log: %s", exc)

    def _deliver(self, facts: list[Fact]) -> None:
        if not facts:
            return
        self.delivered = max(self.delivered, facts[-1].seq or 0)
        if self.built:  # until then the first replay reads these from the log, after the snapshot
            self._apply(facts)
        shares = _Shares(facts)
        for sub in list(self.subscribers):
            if Interest.FACTS not in sub.wants:
                continue
            wanted = shares.of(sub.providers)
            if wanted:
                self._tell(sub.ref, Committed(facts=wanted))

    def _apply(self, facts: list[Fact], replay: bool = False) -> None:
        try:
            self.shared.apply_all(facts, replay=replay)
        except Exception:  # the subscribers must still hear of the batch
            log.exception("journal: the shared projection failed to take %d facts", len(facts))

    def _tell(self, ref: Any, msg: Any) -> None:
        """Tell, forgetting a subscriber that stopped without unsubscribing."""
        try:
            ref.tell(msg)
        except pykka.ActorDeadError:
            self.subscribers = [s for s in self.subscribers if s.ref != ref]

    # --- subscribers -----------------------------------------------------------------

    @handles(Subscribe)
    def _subscribe(self, msg: Subscribe) -> None:
        providers = frozenset(msg.providers) if msg.providers is not None else None
        self.joining.append(_Subscriber(ref=msg.ref, providers=providers, wants=msg.wants))
        self._queue_replay()

    def _queue_replay(self) -> None:
        if not self.replay_queued:
            self.replay_queued = True
            self.actor_ref.tell(_Replay())

    @handles(_Replay)
    def _replay(self, _: _Replay) -> None:
        """Build the shared projection the first time, then tell every subscriber that joined it is caught up.

        Actors start together (at boot, or when leases are won): one pass serves them all.
        """
        self.replay_queued = False
        joining, self.joining = self.joining, []
        self._catch_up()
        try:
            if not self.built:
                self._build()
            inputs = self.inputs.current(self.controller)
        except ControllerUnavailable as exc:
            # No CaughtUp on part of the history: a planner that thought it had all of it would
            # order again what is already on its way. Try again shortly (facts already applied are
            # skipped by seq).
            log.error("journal: replay for %d subscribers failed, retrying: %s", len(joining), exc)
            self.joining = joining + self.joining
            self.replay_queued = True
            self._later(REPLAY_RETRY, self._retry_replay)
            return
        for sub in joining:
            # The demand goes first: a planner that caught up without it would take "no demand
            # seen yet" for "nothing wanted" and give back what is in use.
            for told in (inputs.demand_for(sub.wants), CaughtUp(seq=self.delivered),
                         inputs.events_for(sub.wants, sub.providers), inputs.supply_for(sub.wants)):
                if told is not None:
                    self._tell(sub.ref, told)
        self.subscribers += joining

    def _build(self) -> None:
        """The shared projection from the latest snapshot, then the log after it up to ``delivered``."""
        snapshot = self._snapshot()
        # Facts the projection holds are skipped by seq: reading from what it holds reads them once.
        after = self.shared.seq
        if snapshot is not None:
            try:
                self.shared.restore(snapshot)  # refused when the projection holds more already
                after = max(after, snapshot.seq)
            except Exception:  # the log replays what the snapshot would have given
                log.exception("journal: the shared projection failed to take the snapshot")
        while after < self.delivered:
            facts = [f for f in self.controller.read(after=after, limit=CHUNK) if (f.seq or 0) <= self.delivered]
            if not facts:
                break
            self._apply(facts, replay=True)
            after = facts[-1].seq or after
        self.shared.replayed(self.delivered)
        self.built = True
        self.snapshot = None  # decoded records the projection no longer needs

    def _retry_replay(self) -> None:
        if self.actor_ref.is_alive():
            self.actor_ref.tell(_Replay())

    def _snapshot(self) -> Snapshot | None:
        """The latest trustworthy snapshot: the one given, unless a newer one was written since."""
        if self.snapshots is None:
            return self.snapshot
        if self.snapshot is None or self.snapshots.seq() > self.snapshot.seq:
            self.snapshot = self.snapshots.load(self.controller)
        return self.snapshot

    def _later(self, seconds: float, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn`` on a timer thread; ``on_stop`` cancels the timers still waiting."""
        self.timers = [t for t in self.timers if t.is_alive()]
        timer = threading.Timer(seconds, fn, args)
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def on_stop(self) -> None:
        # A waiting timer holds the journal, and with it the shared projection, long after a stop.
        for timer in self.timers:
            timer.cancel()

    def replaying(self) -> bool:
        """True while some subscriber still waits for its replay (asked through a proxy)."""
        return bool(self.joining) or self.replay_queued

    @handles(Unsubscribe)
    def _unsubscribe(self, msg: Unsubscribe) -> None:
        self.subscribers = [s for s in self.subscribers if s.ref != msg.ref]
        self.joining = [s for s in self.joining if s.ref != msg.ref]
