"""The simulator's driver of a provider's owner: the decisions of ``owner``, on a virtual clock.

What to write and which calls to make is decided by the same functions the
live ``actors.provider`` drives; the calls go to the simulated provider
through ``sim.calls``. Only the scheduling is the simulator's own: instead
of reconciling on every tick, it acts at the moments something can happen.
An order is taken up as it is written, an intent is called as it is
written, and status polls and reclaim scans happen only when the provider
has news, at the moment the live owner's periodic poll would have seen it
(the next multiple of ``poll_every``), so a quiet provider costs nothing.

A failover drops the lease and whatever calls were in flight; after the
lease TTL the new owner resumes each record by the restart rules declared
beside the state machines (``messages/states.py``), which ``owner`` reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from config.models import PolicyConfig, ResourceConfig
from messages.demand import HostEventKind
from messages.facts import LeaseChanged, Payload
from messages.states import REQUEST
from owner.calls import CallDone, Carry, CheckUse, OnDone, Poll, ProviderCalls
from owner.effects import Effects
from owner.hosts import host_events, watch_joins
from owner.polls import poll
from owner.requests import carry_out, expire, replan_returns, take_order
from owner.scans import SCAN_EVERY_POLLS, Sightings, scan
from owner.settings import OwnerSettings
from owner.step import answer, step
from owner.units import read_usage, totals
from policy.retry import backoff
from sim.calls import News, SimCalls
from sim.cloud import Cloud
from sim.config import SimConfig
from state.projection import Projection


class World(Protocol):
    """What an owner needs of the simulator: its clock, its log, and the cluster's side of a host."""

    now: float
    quantum: float
    #: facts written so far (the seq of the last one)
    facts: int
    p: Projection
    cfg: SimConfig

    def at(self, t: float, fn: Callable[..., None], *args: Any, prio: int = 0) -> None: ...

    def grid(self, t: float, every: float) -> float: ...

    def new_id(self, prefix: str) -> str: ...

    def write(self, provider: str, payloads: Sequence[Payload], ids: Sequence[str | None] | None = None,
              lease: tuple[str, int] = ("", 0)) -> None: ...

    def reclaimed(self, key: str) -> None: ...

    def license_in_use(self, resource: str) -> int: ...


class SimPort(ProviderCalls, Protocol):
    """The port of a simulated owner: its calls, and when what the provider shows of one will change."""

    def news(self, provider_request_id: str, action: str) -> News: ...


#: Makes a simulated owner's port: (the provider's own world, the simulator, where results go).
CallsFor = Callable[[Cloud, World, OnDone], SimPort]


def simulated(cloud: Cloud, world: World, on_done: OnDone) -> SimCalls:
    """The simulated provider answering as its script would (``sim.calls``)."""
    return SimCalls(cloud, lambda: world.now, world.at, on_done, world.license_in_use)


class Owner:
    def __init__(self, engine: World, cloud: Cloud, policy: PolicyConfig, resources: Sequence[ResourceConfig],
                 calls: CallsFor | None = None) -> None:
        self.e = engine
        self.cloud = cloud
        self.name = cloud.desc.name
        self.s = OwnerSettings.of(cloud.sp.as_config(), policy, resources, new_id=engine.new_id)
        self.calls: SimPort = (calls or simulated)(cloud, engine, self.done)
        self.fence = 0
        self.acting = False
        self.inherited_upto = 0
        #: the slots of the calls under way
        self.busy: set[object] = set()
        self.seen = Sightings()
        self.polls: set[float] = set()
        self.scans: set[float] = set()
        self.usage_reads: set[float] = set()
        #: host events that arrived while no owner held the lease: (instance key, event)
        self.queued: list[tuple[str, HostEventKind]] = []
        self.failovers = 0

    @property
    def policy(self) -> PolicyConfig:
        return self.s.policy

    # --- carrying effects out --------------------------------------------------------------

    def carry(self, fx: Effects) -> None:
        """Writes are applied at once (the simulated journal commits as it is told); calls go to the provider."""
        for w in fx.writes:
            self.e.write(self.name, w.payloads, w.ids or None, lease=(f"provider:{self.name}", self.fence))
        for c in fx.calls:
            if c.purpose.slot not in self.busy:
                self.busy.add(c.purpose.slot)
                self.calls.submit(c)

    # --- lease ------------------------------------------------------------------------------

    def acquire(self) -> None:
        self.fence += 1
        self.acting = True
        self.inherited_upto = self.e.facts
        self.e.write(self.name, [LeaseChanged(kind="lease_acquired", name=f"provider:{self.name}",
                                              holder=f"owner-{self.fence}", fence=self.fence)],
                     lease=(f"provider:{self.name}", self.fence))

    def fail_over(self) -> None:
        """The owner dies: its lease lapses, its calls' answers are lost; a standby takes over after the TTL."""
        if not self.acting:
            return
        self.failovers += 1
        self.acting = False
        self.calls.stop()
        self.busy.clear()
        self.e.write(self.name, [LeaseChanged(kind="lease_lost", name=f"provider:{self.name}",
                                              holder=f"owner-{self.fence}", fence=self.fence)],
                     lease=(f"provider:{self.name}", self.fence))
        self.e.at(self.e.now + self.e.cfg.lease.ttl, self.take_over)

    def take_over(self) -> None:
        """A new owner: everything due from the facts, as the live owner's first reconcile does, then a poll."""
        self.acquire()
        self.seen = Sightings()
        self.carry(step(self.e.p, self.s, self.e.now, self.busy, self.inherited_upto))
        self.poll_at(self.e.now)
        self.scan_at(self.e.now + self.policy.request_timeout)
        if self.s.resources:
            self.use_changed()
        queued, self.queued = self.queued, []
        for key, event in queued:
            self.host_event(key, event)

    # --- orders and calls -------------------------------------------------------------------

    def take(self, order_id: str) -> None:
        """An order becomes an intent (its call follows when the intent is written: ``call``)."""
        if self.acting and order_id in self.e.p.orders:
            self.carry(take_order(self.e.p, self.s, self.e.p.orders[order_id], self.e.now, self.busy))

    def call(self, rid: str) -> None:
        """A written intent becomes its call; its answer arrives after the provider's call time."""
        req = self.e.p.requests.get(rid)
        if not self.acting or req is None or req.state != "planned":
            return
        self.carry(carry_out(self.e.p, self.s, req, self.e.now, self.busy, inherited=req.seq <= self.inherited_upto))

    def done(self, msg: CallDone) -> None:
        self.busy.discard(msg.call.purpose.slot)
        if not self.acting:
            return
        p, now = self.e.p, self.e.now
        fx, self.seen = answer(p, self.s, msg.call, msg.result, now, self.busy, self.seen)
        self.carry(fx)
        purpose = msg.call.purpose
        if isinstance(purpose, CheckUse):
            self.call(purpose.request_id)  # a read that fits is written: the return's call follows
        if isinstance(purpose, (Carry, CheckUse)):
            self._carried(purpose.request_id)
        elif isinstance(purpose, Poll) and self.s.resources:
            self.carry(totals(p, self.s, self.busy))

    def _carried(self, rid: str) -> None:
        """What comes of a request's answer: polls when the provider has news, a retry after its backoff,
        its expiry, and returns planned again after a failed one."""
        req = self.e.p.requests[rid]
        now = self.e.now
        if req.state == "planned":
            if req.last_attempt_at is not None:
                self.e.at(req.last_attempt_at + backoff(req.attempts, self.policy.backoff_max), self.call, rid)
        elif req.state == "submitted":
            self.poll_at(now)
            news = self.calls.news(req.provider_request_id or "", req.action)
            for t in news.polls:
                self.poll_at(t)
                if req.action == "request" and self.s.kind == "hosts":
                    self.e.at(t + self.policy.join_timeout + self.e.quantum, self.watch_joins)
            for mid, at in news.reclaims:
                self.e.at(at, self.e.reclaimed, f"{self.name}/{mid}")
                self.scan_at(at)
            self.e.at(req.created_at + self.policy.request_timeout + self.e.quantum, self.expire)
        elif req.action == "return" and req.state in REQUEST.terminal:
            self.return_again()
            self.e.at(now + self.policy.cooldown / 4, self.return_again)
        self.expire()

    def expire(self) -> None:
        """Fail requests not done within request_timeout (as the live owner's reconcile does)."""
        if self.acting:
            self.carry(expire(self.e.p, self.s, self.e.now, self.busy))

    def watch_joins(self) -> None:
        if self.acting:
            self.carry(watch_joins(self.e.p, self.s, self.e.now))

    def return_again(self) -> None:
        """Give back again what a failed return left behind, failed machines and orphans, as live owners do."""
        if self.acting:
            self.carry(replan_returns(self.e.p, self.s, self.e.now, self.busy))

    # --- polls ---------------------------------------------------------------------------------

    def poll_at(self, t: float) -> None:
        at = self.e.grid(max(t, self.e.now), self.policy.poll_every)
        if at not in self.polls:
            self.polls.add(at)
            self.e.at(at, self.poll, at)

    def scan_at(self, t: float) -> None:
        at = self.e.grid(max(t, self.e.now), self.policy.poll_every * SCAN_EVERY_POLLS)
        if at not in self.scans:
            self.scans.add(at)
            self.e.at(at, self.scan, at)

    def poll(self, at: float) -> None:
        """A status poll of every open call and every machine still coming."""
        self.polls.discard(at)
        if self.acting:
            self.carry(poll(self.e.p, self.s, self.busy))

    def scan(self, at: float) -> None:
        """The orphan search and the reclaims check."""
        self.scans.discard(at)
        if not self.acting:
            self.scan_at(self.e.now + self.e.cfg.lease.ttl)
            return
        self.carry(scan(self.e.p, self.s, self.e.now, self.busy))

    # --- the cluster's side ----------------------------------------------------------------------

    def host_event(self, key: str, event: HostEventKind) -> None:
        """A host event from the scheduler, as the owner turns it into a fact."""
        if not self.acting:
            self.queued.append((key, event))
            return
        inst = self.e.p.instances.get(key)
        if inst is not None:
            self.carry(host_events(self.s, [(inst, event, None)]))

    def use_changed(self) -> None:
        """The license server's count changed: the owner's next usage poll (on the poll grid) reads it."""
        at = self.e.grid(self.e.now, self.policy.poll_every)
        if at not in self.usage_reads:
            self.usage_reads.add(at)
            self.e.at(at, self.read_usage, at)

    def read_usage(self, at: float) -> None:
        self.usage_reads.discard(at)
        if self.acting:
            self.carry(read_usage(self.s, self.busy))

    def publish_totals(self) -> None:
        if self.acting:
            self.carry(totals(self.e.p, self.s, self.busy))
