"""PlannerActor: the one planner in the whole system (it holds the planner lease).

On demand changes and on ticks it asks ``policy`` for orders and returns,
has the BudgetActor review them (tell + reply, never a blocking ask), and
writes the approved orders with their decisions as facts. It plans again
only after its last orders are committed and visible, so it never counts the
same need twice. An order the review cut is noted as a budget rejection in
its item's decision.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Sequence

from actors.base import Actor, handles
from lease.port import Lease
from messages.commands import (
    Append,
    Appended,
    CaughtUp,
    Committed,
    DemandChanged,
    HostEvents,
    LeaseRevoked,
    Review,
    Reviewed,
    Subscribe,
    Tick,
    Unsubscribe,
)
from messages.demand import DemandSnapshot
from messages.facts import BudgetEvent, Decision, Fact, Order, Rejected, make_fact
from persistence.projection import Projection
from policy.planning import Catalog, plan
from policy.reclaim import reclaim
from policy.supply import SupplyView
from provisioner.config import BudgetConfig, PolicyConfig, ProviderConfig

log = logging.getLogger(__name__)


class PlannerActor(Actor):
    def __init__(
        self,
        lease: Lease,
        revoked: threading.Event,
        journal: Any,
        budget: Any,
        lease_actor: Any,
        policy: PolicyConfig,
        clock: Callable[[], float] = time.time,
        caps: BudgetConfig | None = None,
        provider_configs: Sequence[ProviderConfig] = (),
    ) -> None:
        super().__init__()
        self.lease = lease
        self.revoked = revoked
        self.journal = journal
        self.budget = budget
        self.lease_actor = lease_actor
        self.policy = policy
        #: With ``caps`` the planner sizes within the global caps itself, so what one provider
        #: cannot take under a cap spills to the next; the budget review stays the last word.
        self.settings = policy.settings(caps, provider_configs)
        self.clock = clock
        self.p = Projection()
        self.demand: DemandSnapshot | None = None
        self.ready = False
        #: None when idle; "review", "write", or "retry" (the last write's outcome is unknown).
        self.waiting: str | None = None
        #: The facts of the last write, kept until the controller confirms them.
        self.outbox: list[Fact] = []
        self.last_plan = 0.0
        self.decisions: list[Decision] = []
        #: This round's orders and returns while the budget reviews the orders.
        self.pending_orders: list[tuple[str, Order]] = []
        self.pending_returns: list[tuple[str, Order]] = []
        self.catalog: Catalog | None = None

    def on_start(self) -> None:
        self.journal.tell(Subscribe(ref=self.actor_ref))

    def on_stop(self) -> None:
        self.journal.tell(Unsubscribe(ref=self.actor_ref))

    @handles(Committed)
    def _committed(self, msg: Committed) -> None:
        self.p.apply_all(msg.facts)

    @handles(CaughtUp)
    def _caught_up(self, _: CaughtUp) -> None:
        self.ready = True
        self._plan(self.clock())

    @handles(DemandChanged)
    def _demand(self, msg: DemandChanged) -> None:
        if self.demand is None or msg.demand.seq > self.demand.seq:
            self.demand = msg.demand
            log.info("planner: demand %d with %d items", msg.demand.seq, len(msg.demand.items))
            self._plan(self.clock())

    @handles(HostEvents)
    def _host_events(self, _: HostEvents) -> None:
        """Owners turn host events into facts; the planner sees those."""

    @handles(Tick)
    def _tick(self, msg: Tick) -> None:
        if self.waiting == "retry":
            self._send(self.outbox)
        elif msg.now - self.last_plan >= self.policy.plan_every:
            self._plan(msg.now)

    def _view(self) -> SupplyView:
        return SupplyView(orders=self.p.orders, requests=self.p.requests, instances=self.p.instances,
                          grants=self.p.grants)

    def _plan(self, now: float) -> None:
        if not self.ready or self.waiting or self.revoked.is_set():
            return
        self.last_plan = now
        view = self._view()
        if self.catalog is None or not self.catalog.fits(self.p.providers):
            self.catalog = Catalog(self.p.providers)
        result = plan(self.demand, self.p.providers, view, now, self.settings, self.catalog)
        returns = reclaim(self.demand, self.p.providers, self.p.resources, view, now, self.policy.idle_time,
                          self.settings.providers, self.p.decisions)
        self.decisions = result.decisions
        if not result.orders:
            self._write([], returns, [])
            return
        self.waiting = "review"
        self.pending_returns = returns
        self.pending_orders = result.orders
        self.budget.tell(Review(orders=result.orders, reply_to=self.actor_ref))

    @handles(Reviewed)
    def _reviewed(self, msg: Reviewed) -> None:
        if self.waiting != "review":
            return
        self.waiting = None
        self.decisions = _with_cuts(self.decisions, self.pending_orders, msg.orders)
        self._write(msg.orders, self.pending_returns, msg.clamps)

    def _write(self, orders: list[tuple[str, Order]], returns: list[tuple[str, Order]],
               clamps: list[tuple[str, str]]) -> None:
        if self.revoked.is_set():
            return
        now = self.clock()
        lease = dict(lease=self.lease.name, fence=self.lease.fence, now=now)
        facts = [make_fact(o, provider=p, **lease) for p, o in orders + returns]
        facts += [make_fact(BudgetEvent(limit=k, detail=d), **lease) for k, d in clamps]
        # A decision is news only when it orders something or differs from the last one recorded.
        last = {d.decision.item: d.decision for d in self.p.decisions}
        facts += [make_fact(d, **lease) for d in self.decisions
                  if d.chosen or _differs(last.get(d.item), d)]
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


def _with_cuts(decisions: list[Decision], asked: list[tuple[str, Order]],
               approved: list[tuple[str, Order]]) -> list[Decision]:
    """The decisions with what the budget review cut: chosen counts lowered, the cut as a rejection."""
    def totals(orders: list[tuple[str, Order]]) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for provider, o in orders:
            out[(provider, o.item_id)] = out.get((provider, o.item_id), 0) + o.count
        return out

    got = totals(approved)
    cut = {key for key, n in totals(asked).items() if got.get(key, 0) < n}
    if not cut:
        return decisions
    out = []
    for d in decisions:
        if not any((c.provider, d.item) in cut for c in d.chosen):
            out.append(d)
            continue
        left = dict(got)
        chosen, rejected = [], list(d.rejected)
        for c in d.chosen:
            n = min(c.count, left.get((c.provider, d.item), 0))
            left[(c.provider, d.item)] = left.get((c.provider, d.item), 0) - n
            if n:
                chosen.append(c.model_copy(update={"count": n}))
            if n < c.count:
                rejected.append(Rejected(provider=c.provider, reason="budget: cut by the global caps"))
        out.append(d.model_copy(update={"chosen": chosen, "rejected": rejected}))
    return out


def _differs(old: Decision | None, new: Decision) -> bool:
    if old is None:
        return True
    return (old.demand_seq, old.need, old.in_flight, old.rejected, old.note) != (
        new.demand_seq, new.need, new.in_flight, new.rejected, new.note)
