"""ProviderActor: the live driver of one provider's owner.

What to do is decided in ``owner`` (pure functions of the facts, the
settings and the time); this actor only carries it out: it keeps the timers
(when to describe, poll, scan, read usage), what is in flight (calls under
way, writes awaiting the journal's answer), and hands writes to the journal
and calls to its ``ProviderCalls`` port (the script runner). Effects follow
committed facts only, so a live run and a restart take the same path: an
intent found in the log is carried out with its token, by the restart rules
declared beside the state machines.

In-memory state is only what is in flight and when things are next due;
losing it loses nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.answers import KeptAnswers
from actors.base import Actor, Mandate, handles
from actors.pacing import FirstScan, FirstScans, ScanTurn
from actors.pooled import PooledActor
from actors.reconfigure import Reconfigure
from actors.repeats import Repeats
from config.models import PolicyConfig, ProviderConfig, ResourceConfig
from lease.port import Lease
from messages.commands import (
    Append,
    Appended,
    CaughtUp,
    Committed,
    HostEvents,
    Interest,
    LeaseRevoked,
    Recipient,
    Subscribe,
    SupplyChanged,
    Tick,
    Unsubscribe,
)
from messages.demand import HostEvent, SupplySnapshot
from messages.facts import RequestPlanned, make_fact
from owner.calls import Call, CallDone, Carry, OnDone, Poll, ProviderCalls
from owner.describe import describe
from owner.effects import Effects, Notes, RequestSettled, Write
from owner.health import describe_again, health, why_degraded
from owner.hosts import being_returned, host_events
from owner.polls import poll
from owner.scans import SCAN_EVERY_POLLS, Sightings, scan
from owner.settings import OwnerSettings
from owner.step import answer, step
from owner.supply import Unlisted, correct, hosts_of
from owner.units import read_usage
from persistence.failpoints import failpoint
from state.projection import Projection
from state.shared import SharedProjection

log = logging.getLogger(__name__)

#: Makes an owner's port to its provider: (config, work folder, where results go, whether it may still act).
CallsFactory = Callable[[ProviderConfig, Path, OnDone, Callable[[], bool]], ProviderCalls]


class ProviderActor(PooledActor, Actor):
    """The owner of one provider; a thousand of them take turns on a few threads (``actors.pooled``)."""

    #: Its provider's facts as news, and what the scheduler says of hosts; the demand is the planner's.
    WANTS = frozenset({Interest.FACTS, Interest.SUPPLY, Interest.HOST_EVENTS})

    def __init__(self, cfg: ProviderConfig, lease: Lease, revoked: Mandate, journal: Recipient, lease_actor: Recipient,
                 policy: PolicyConfig, resources: list[ResourceConfig], work_dir: Path, calls_factory: CallsFactory,
                 shared: SharedProjection, clock: Callable[[], float] = time.time, scan_after: float = 0.0,
                 turns: FirstScans | None = None, answers: KeptAnswers | None = None,
                 shown: frozenset[str] = frozenset()) -> None:
        """``shared``: the journal's projection of every fact, of which this owner reads its provider's part.

        ``answers``: the process's answers of request and return calls not yet in the facts
        (``actors.answers``); an owner of this provider before this one may have left some there.

        ``turns``: the daemon's turns for first scans (``actors.pacing``): once caught up, the owner makes
        its first orphan search and reclaims check when its turn comes (without ``turns``, at once).
        ``scan_after``: the phase of its later scans (at most one period), so that a daemon's providers
        are not all asked what they hold in the same moment, each period.
        ``shown``: the resources a scheduler's bridge shows its scheduler (``Config.shown_to_scheduler``).
        """
        super().__init__()
        # At most 29 attributes in all (pykka's four included): beyond that Python gives each
        # instance a dict of its own, a kilobyte more per provider.
        self.s = OwnerSettings.of(cfg, policy, resources, shown=shown)
        self.lease = lease
        self.revoked = revoked
        self.journal = journal
        self.lease_actor = lease_actor
        self.work_dir = work_dir
        self.calls_factory = calls_factory
        self.view = shared
        self.clock = clock
        self.first_scan = FirstScan(turns, phase=scan_after)
        self.ready = False
        self.inherited_upto = 0
        #: slot -> since: calls under way and writes awaiting the journal's answer
        self.busy: dict[object, float] = {}
        self.last_poll = 0.0
        self.last_usage = 0.0
        self.last_scan = 0.0
        self.describe_due = 0.0
        #: describe's failures in a row, and the last one's reason (enough of them degrade the provider)
        self.describe_failed: tuple[int, str] = (0, "")
        #: repeating failures (a status script printing garbage at every poll) are logged once a minute
        self.repeats = Repeats()
        self.seen = Sightings()
        self.calls: ProviderCalls | None = None
        #: the scheduler's latest view of its hosts, and who of ours it has stopped listing
        self.supply: SupplySnapshot | None = None
        self.unlisted = Unlisted()
        #: host events that came while a host-events write was under way: read against its outcome
        self.held_events: list[HostEvent] = []
        self.kept = answers if answers is not None else KeptAnswers()

    @property
    def name(self) -> str:
        return self.s.name

    @property
    def p(self) -> Projection:
        """The projection read, held still by ``view.lock`` while a message is handled."""
        return self.view.projection

    @property
    def acting(self) -> bool:
        return self.ready and not self.revoked.is_set()

    # --- lifecycle ---------------------------------------------------------------------

    def on_start(self) -> None:
        self.calls = self.calls_factory(self.s.config, self.work_dir, self._done, lambda: not self.revoked.is_set())
        self.journal.tell(Subscribe(ref=self.actor_ref, providers=[self.name], wants=self.WANTS))
        log.info("provider %s: acting under fence %d", self.name, self.lease.fence)

    def on_stop(self) -> None:
        # The provider's processes first: a persistent one must not act a moment longer than the lease.
        if self.calls is not None:
            self.calls.stop()
        self.first_scan.end()
        self.journal.tell(Unsubscribe(ref=self.actor_ref))
        log.info("provider %s: stopped", self.name)

    def _done(self, done: CallDone) -> None:
        # Called on a runner thread. A request or return call that was answered has happened: its answer
        # is kept at once, whatever becomes of this actor, until its facts are committed.
        if isinstance(done.call.purpose, Carry) and done.result.outcome != "not_started":
            self.kept.keep(self.name, done, self.clock())
        # Then handed to the actor's own thread.
        if self.actor_ref.is_alive():
            self.actor_ref.tell(done)

    # --- feed ----------------------------------------------------------------------------

    def _dispatch(self, message: Any) -> Any:
        # Every handler reads the projection: the journal applies no batch meanwhile.
        with self.view.lock:
            return super()._dispatch(message)

    @handles(Committed)
    def _committed(self, msg: Committed) -> None:
        # News only: the journal applied the facts to the shared projection already.
        if self.ready:
            self._reconcile(self.clock())

    @handles(CaughtUp)
    def _caught_up(self, msg: CaughtUp) -> None:
        now = self.clock()
        if not self.ready:  # the first scan is due now, or at its turn
            period = self.s.policy.poll_every * SCAN_EVERY_POLLS
            self.last_scan = self.first_scan.ask(self.actor_urn, self.actor_ref, now, period)
        self.ready = True
        self.inherited_upto = msg.seq
        self._reconcile(now)

    @handles(ScanTurn)
    def _scan_turn(self, _: ScanTurn) -> None:
        if self.first_scan.told():
            self._reconcile(self.clock())

    @handles(Tick)
    def _tick(self, msg: Tick) -> None:
        if self.ready:
            self._reconcile(msg.now)

    @handles(Reconfigure)
    def _reconfigure(self, msg: Reconfigure) -> None:
        """A reloaded config that keeps this owner: its policy, describe overrides and resources.

        (A changed script is not for this owner to take: the lease actor replaces it.) New describe
        overrides merge into the description at the next describe, which is asked for now.
        """
        cfg = msg.config.provider(self.name)
        if cfg is None:
            return
        before = self.s.config
        self.s = OwnerSettings.of(cfg, msg.config.policy, msg.config.resources,
                                  shown=msg.config.shown_to_scheduler())
        if cfg.describe != before.describe:
            self.describe_due = 0.0
        if self.ready:
            self._reconcile(self.clock())

    @handles(HostEvents)
    def _host_events(self, msg: HostEvents) -> None:
        if not self.acting:
            return
        if Notes("host-events") in self.busy:
            # Host events are read against the hosts' states: not until the write under way is committed.
            self.held_events += msg.events
            return
        done = self.p.host_event_seq.get(self.name, 0)
        by_name = self.p.live_by_name(self.name)
        events = [(inst, ev.event, ev.seq) for ev in msg.events
                  if (ev.seq is None or ev.seq > done) and ev.provider in (None, self.name)
                  and (inst := by_name.get(ev.name)) is not None]
        self._carry(host_events(self.s, events, being_returned=being_returned(self.p, self.busy)))

    @handles(SupplyChanged)
    def _supply(self, msg: SupplyChanged) -> None:
        self.supply = msg.supply
        if self.acting:
            self._correct(self.clock())

    def _correct(self, now: float) -> None:
        """What the scheduler's view says of our hosts, and of those it stopped listing (once no host-events
        write is under way: the view is read against the hosts' states)."""
        if self.supply is not None and Notes("host-events") not in self.busy:
            fx, self.unlisted = correct(self.p, self.s, self.supply, now, self.unlisted, self.busy)
            self._carry(fx)

    def _host_events_written(self) -> None:
        """A host-events write is committed: what waited for it is read against the states it wrote."""
        held, self.held_events = self.held_events, []
        if held:
            self._host_events(HostEvents(events=held))
        if Notes("host-events") not in self.busy:
            self._correct(self.clock())

    # --- reconcile ----------------------------------------------------------------------

    def _reconcile(self, now: float) -> None:
        if not self.acting:
            return
        p, s, policy = self.p, self.s, self.s.policy
        fx = self._record_kept(now)
        fx += describe(self.busy) if now >= self.describe_due else Effects()
        port = self.calls.health() if self.calls is not None else ""
        fx += health(p, s, why_degraded(port, *self.describe_failed), self.busy)
        fx += step(p, s, now, self.busy, self.inherited_upto)
        if now - self.last_poll >= policy.poll_every and Poll not in self.busy:
            self.last_poll = now
            fx += poll(p, s, self.busy)
            if self.unlisted.since:
                self._correct(now)  # someone is missing from the view: is their grace over?
        if self.first_scan.take():
            self.last_scan = max(self.last_scan, now)
            fx += scan(p, s, now, self.busy)
        elif self.first_scan.over and now - self.last_scan >= policy.poll_every * SCAN_EVERY_POLLS:
            self.last_scan = now
            fx += scan(p, s, now, self.busy)
        if s.kind == "units" and now - self.last_usage >= policy.poll_every:
            self.last_usage = now
            fx += read_usage(s, self.busy)
        self._carry(fx)
        self.first_scan.scanned(self.busy)

    def _record_kept(self, now: float) -> Effects:
        """The facts of every answer kept for this provider that no write is recording now.

        Each is read against the facts as they are now (a successor may have ended its request
        meanwhile), and holds its request's call slot while it is kept, so the request is not
        called again, timed out, or failed as an unknown outcome by a restart rule. An answer
        whose request needs nothing more is let go.
        """
        fx = Effects()
        for k in self.kept.of(self.name):
            call = k.done.call
            self.busy.setdefault(call.purpose.slot, now)
            settled = RequestSettled(k.request_id)
            if settled in self.busy:
                continue  # its write is under way
            more, self.seen = answer(self.p, self.s, call, k.done.result, now, self.busy, self.seen)
            if any(w.slot == settled for w in more.writes):
                fx += more
            else:
                self._let_go(k.request_id)
        return fx

    def _let_go(self, request_id: str) -> None:
        self.kept.release(self.name, request_id)
        self.busy.pop(Carry(request_id).slot, None)

    def _carry(self, fx: Effects) -> None:
        """Carry effects out: notes to the log, writes to the journal, calls to the provider."""
        for n in fx.notes:
            line = self.repeats.say(n.repeats, n.text, self.clock())
            if line is not None:
                getattr(log, n.level)("%s", line)
        for w in fx.writes:
            self._write(w)
        for c in fx.calls:
            self._call(c)

    def _write(self, w: Write) -> None:
        # Whether a write is due while another of its slot is under way is the owner's decision
        # (an intent is not written twice; a status answer is always recorded), not the driver's.
        if self.revoked.is_set():
            return
        if w.payloads and isinstance(intent := w.payloads[0], RequestPlanned):
            failpoint(f"{intent.action}.before_intent")
        now = self.clock()
        facts = [make_fact(p, provider=self.name, lease=self.lease.name, fence=self.lease.fence,
                           fact_id=(w.ids[i] if i < len(w.ids) else None), now=now)
                 for i, p in enumerate(w.payloads)]
        self.busy[w.slot] = now
        self.journal.tell(Append(facts=facts, reply_to=self.actor_ref, tag=w))

    def _call(self, c: Call) -> None:
        slot = c.purpose.slot
        if not self.acting or slot in self.busy or self.calls is None:
            return
        if c.token is not None:
            failpoint(f"{c.action}.after_intent")
        self.busy[slot] = self.clock()
        self.calls.submit(c)

    @handles(Appended)
    def _appended(self, msg: Appended) -> None:
        w = msg.tag
        assert isinstance(w, Write), "an owner's writes are tagged with their Write"
        self.busy.pop(w.slot, None)
        if isinstance(w.slot, RequestSettled) and not msg.error and not msg.refused \
                and self.kept.holds(self.name, w.slot.request_id):
            self._let_go(w.slot.request_id)  # the answer is in the facts
        if msg.refused:
            _, lease, reason = msg.refused[0]
            if lease == self.lease.name and not self.revoked.is_set():
                log.error("provider %s: writes refused, lease lost: %s", self.name, reason)
                self.revoked.set()
                self.lease_actor.tell(LeaseRevoked(name=self.lease.name, reason=reason))
            return
        if w.slot == Notes("host-events") and self.acting:
            self._host_events_written()
        # On an error nothing was committed: reconciling again writes it again, and the journal paces the
        # tries while the controller refuses writes.
        if self.ready:
            self._reconcile(self.clock())

    # --- call results ---------------------------------------------------------------------

    @handles(CallDone)
    def _call_done(self, msg: CallDone) -> None:
        call, result = msg.call, msg.result
        self.busy.pop(call.purpose.slot, None)
        if not self.acting:
            log.info("provider %s: result of %s after losing the lease ignored", self.name, result.action)
            return
        if result.outcome == "not_started":
            # Not run: the mandate lapsed between submit and start (it may be renewed by now). Nothing
            # happened at the provider, so there is nothing to record; the next reconcile decides again.
            log.info("provider %s: %s", self.name, result.reason)
            self.first_scan.scanned(self.busy)
            return
        purpose = call.purpose
        now = self.clock()
        if isinstance(purpose, Carry):
            req = self.p.requests.get(purpose.request_id)
            if req is not None and req.state == "planned":
                failpoint(f"{req.action}.after_script")
            if result.ok:
                self.repeats.clear(call.action)
            # Kept by ``_done``: recorded from there, now and until the controller takes it.
            self._carry(self._record_kept(now))
            self.first_scan.scanned(self.busy)
            return
        fx, self.seen = answer(self.p, self.s, call, result, now, self.busy, self.seen, hosts_of(self.s, self.supply))
        if result.ok:
            self.repeats.clear(call.action)
        if call.action == "describe":
            self.describe_failed, wait = describe_again(self.describe_failed, result.ok, result.reason,
                                                        self.s.policy.backoff_max)
            self.describe_due = now + wait
        self._carry(fx)
        if call.action == "describe":
            self._reconcile(now)  # a provider whose describe keeps failing (or serves again) says so now
        self.first_scan.scanned(self.busy)
