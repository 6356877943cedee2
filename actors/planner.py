"""PlannerActor: the one planner in the whole system (it holds the planner lease).

On demand changes and on ticks it runs a round of ``policy.rounds``: it
proposes orders and returns, has the BudgetActor review the orders (tell +
reply, never a blocking ask), and writes the approved orders with their
decisions as facts. It plans again only after its last orders are committed
and visible, so it never counts the same need twice. An order the review cut
is noted as a budget rejection in its item's decision.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Sequence

from actors.base import Actor, handles
from actors.reconfigure import Reconfigure
from config.models import BudgetConfig, PolicyConfig, ProviderConfig
from lease.port import Lease
from messages.commands import (
    Append,
    Appended,
    CaughtUp,
    DemandChanged,
    Interest,
    LeaseRevoked,
    Recipient,
    Review,
    Reviewed,
    Subscribe,
    Tick,
    Unsubscribe,
)
from messages.demand import DemandSnapshot
from messages.facts import Fact, Order, make_fact
from policy.catalog import Catalog
from policy.rounds import Proposal, catalog_for, outcome, propose
from policy.settings import plan_settings
from state.shared import SharedProjection

log = logging.getLogger(__name__)


class PlannerActor(Actor):
    #: The demand only: owners turn host events and supply views into facts, which the planner reads in
    #: the shared projection.
    WANTS = frozenset({Interest.DEMAND})

    def __init__(
        self,
        lease: Lease,
        revoked: threading.Event,
        journal: Recipient,
        budget: Recipient,
        lease_actor: Recipient,
        policy: PolicyConfig,
        shared: SharedProjection,
        clock: Callable[[], float] = time.time,
        caps: BudgetConfig | None = None,
        provider_configs: Sequence[ProviderConfig] = (),
    ) -> None:
        """``shared``: the journal's projection of every fact, which rounds read."""
        super().__init__()
        self.lease = lease
        self.revoked = revoked
        self.journal = journal
        self.budget = budget
        self.lease_actor = lease_actor
        self.policy = policy
        #: With ``caps`` the planner sizes within the global caps itself, so what one provider
        #: cannot take under a cap spills to the next; the budget review stays the last word.
        self.settings = plan_settings(policy, caps, provider_configs)
        self.clock = clock
        self.view = shared
        self.demand: DemandSnapshot | None = None
        self.ready = False
        #: None when idle; "review", "write", or "retry" (the last write's outcome is unknown).
        self.waiting: str | None = None
        #: The facts of the last write, kept until the controller confirms them.
        self.outbox: list[Fact] = []
        self.last_plan = 0.0
        #: This round's orders, returns and decisions while the budget reviews the orders.
        self.proposal: Proposal | None = None
        self.catalog: Catalog | None = None

    def on_start(self) -> None:
        self.journal.tell(Subscribe(ref=self.actor_ref, wants=self.WANTS))

    def on_stop(self) -> None:
        self.journal.tell(Unsubscribe(ref=self.actor_ref))

    @handles(CaughtUp)
    def _caught_up(self, _: CaughtUp) -> None:
        self.ready = True
        self._plan(self.clock())

    @handles(DemandChanged)
    def _demand(self, msg: DemandChanged) -> None:
        if len(msg.demand.items) > self.policy.max_demand_items:
            # Written to the controller past the API's check: planning it could starve everything else.
            log.error("planner: demand %d ignored: %d items, more than policy.max_demand_items (%d); planning "
                      "goes on with demand %s", msg.demand.seq, len(msg.demand.items), self.policy.max_demand_items,
                      self.demand.seq if self.demand else "none")
            return
        if self.demand is None or msg.demand.seq > self.demand.seq:
            self.demand = msg.demand
            log.info("planner: demand %d with %d items", msg.demand.seq, len(msg.demand.items))
            self._plan(self.clock())

    @handles(Reconfigure)
    def _reconfigure(self, msg: Reconfigure) -> None:
        """A reloaded config: the policy, caps and provider limits the next rounds plan with."""
        cfg = msg.config
        self.policy = cfg.policy
        self.settings = plan_settings(cfg.policy, cfg.budget, cfg.providers)
        self.last_plan = 0.0  # plan again at the next tick, with the new settings

    @handles(Tick)
    def _tick(self, msg: Tick) -> None:
        if self.waiting == "retry":
            self._send(self.outbox)
        elif msg.now - self.last_plan >= self.policy.plan_every:
            self._plan(msg.now)

    def _plan(self, now: float) -> None:
        if not self.ready or self.waiting or self.revoked.is_set():
            return
        self.last_plan = now
        with self.view.reading() as p:
            self.catalog = catalog_for(self.catalog, p.providers)
            self.proposal = propose(self.demand, p, now, self.settings, self.policy.idle_time, self.catalog)
        if not self.proposal.orders:
            self._write([], [])
            return
        self.waiting = "review"
        self.budget.tell(Review(orders=self.proposal.orders, reply_to=self.actor_ref))

    @handles(Reviewed)
    def _reviewed(self, msg: Reviewed) -> None:
        if self.waiting != "review":
            return
        self.waiting = None
        self._write(msg.orders, msg.clamps)

    def _write(self, approved: list[tuple[str, Order]], clamps: list[tuple[str, str]]) -> None:
        if self.revoked.is_set() or self.proposal is None:
            return
        name, fence, now = self.lease.name, self.lease.fence, self.clock()
        with self.view.reading() as p:
            facts = [make_fact(payload, provider=provider, lease=name, fence=fence, now=now)
                     for provider, payload in outcome(self.proposal, approved, clamps, p.decided)]
        if facts:
            self._send(facts)

    def _send(self, facts: list[Fact]) -> None:
        if self.revoked.is_set():
            self.waiting = None
            return
        self.outbox = facts
        self.waiting = "write"
        self.journal.tell(Append(facts=facts, reply_to=self.actor_ref, tag="plan"))

    @handles(Appended)
    def _appended(self, msg: Appended) -> None:
        if msg.error:
            # The outcome is unknown: the orders may be committed. Send the very same facts again
            # (same ids, so a committed copy is not doubled) before planning anything new.
            log.warning("planner: orders not confirmed, sending them again: %s", msg.error)
            self.waiting = "retry"
            return
        self.waiting = None
        self.outbox = []
        if msg.refused and not self.revoked.is_set():
            _, lease, reason = msg.refused[0]
            log.error("planner: writes refused, lease lost: %s", reason)
            self.revoked.set()
            self.lease_actor.tell(LeaseRevoked(name=self.lease.name, reason=reason))

