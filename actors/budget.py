"""BudgetActor: global caps on hosts, units and cost per hour.

It answers the planner's ``Review`` with the orders clamped so that what is
held plus what is on its way plus the new orders stays within every cap.
Spend per period comes with the full policy; this is the first set of caps.
"""

from __future__ import annotations

import logging
from typing import Any

from actors.base import Actor, handles
from messages.commands import CaughtUp, Committed, DemandChanged, HostEvents, Review, Reviewed, Subscribe, Tick
from messages.facts import Order
from messages.states import GRANT, INSTANCE, REQUEST
from persistence.projection import Projection
from provisioner.config import BudgetConfig

log = logging.getLogger(__name__)


class BudgetActor(Actor):
    def __init__(self, journal: Any, budget: BudgetConfig) -> None:
        super().__init__()
        self.journal = journal
        self.budget = budget
        self.p = Projection()

    def on_start(self) -> None:
        self.journal.tell(Subscribe(ref=self.actor_ref))

    @handles(Committed)
    def _committed(self, msg: Committed) -> None:
        self.p.apply_all(msg.facts)

    @handles(CaughtUp)
    def _caught_up(self, _: CaughtUp) -> None:
        """Reviews use whatever the projection holds; nothing to start."""

    @handles(DemandChanged)
    def _demand(self, _: DemandChanged) -> None:
        """The planner's business."""

    @handles(HostEvents)
    def _events(self, _: HostEvents) -> None:
        """The owners' business."""

    @handles(Tick)
    def _tick(self, _: Tick) -> None:
        """Nothing periodic yet."""

    def usage(self) -> tuple[int, int, float]:
        """Hosts and units held or on their way, and the cost per hour they run at."""
        hosts, units, rate = 0, 0, 0.0
        seen: dict[str, int] = {}
        for inst in self.p.instances.values():
            seen[inst.request_id] = seen.get(inst.request_id, 0) + 1
            if inst.state not in INSTANCE.terminal:
                hosts += 1
                rate += self._price(inst.provider, inst.template)
        for req in self.p.requests.values():
            if req.action == "request" and req.supply == "hosts" and req.state not in REQUEST.terminal:
                n = max(0, req.count - seen.get(req.id, 0))
                hosts += n
                rate += n * self._price(req.provider, req.template)
        for g in self.p.grants.values():
            if g.state not in GRANT.terminal:
                n = g.count if g.state != "requested" else g.requested
                units += n
                rate += n * self._price(g.provider, g.resource)
        for order in self.p.orders.values():
            o = order.order
            if o.action == "request" and not order.request_ids:
                if o.supply == "hosts":
                    hosts += o.count
                else:
                    units += o.count
                rate += o.count * self._price(order.provider, o.template or o.resource)
        return hosts, units, rate

    def _price(self, provider: str, key: str | None) -> float:
        rec = self.p.providers.get(provider)
        return rec.description.price(key) if rec and rec.description else 0.0

    @handles(Review)
    def _review(self, msg: Review) -> None:
        hosts, units, rate = self.usage()
        b = self.budget
        approved: list[tuple[str, Order]] = []
        clamps: list[tuple[str, str]] = []
        for provider, order in msg.orders:
            price = self._price(provider, order.template or order.resource)
            limits: list[tuple[str, int]] = []
            if order.supply == "hosts" and b.max_hosts is not None:
                limits.append(("max_hosts", b.max_hosts - hosts))
            if order.supply == "units" and b.max_units is not None:
                limits.append(("max_units", b.max_units - units))
            if b.max_cost_per_hour is not None and price > 0:
                limits.append(("max_cost_per_hour", int((b.max_cost_per_hour - rate) / price + 1e-9)))
            count = order.count
            for limit, room in limits:
                if room < count:
                    count = max(0, room)
                    detail = f"{provider}: order for {order.item_id} clamped from {order.count} to {count}"
                    clamps.append((limit, detail))
                    log.info("budget: %s by %s", detail, limit)
            if count > 0:
                approved.append((provider, order.model_copy(update={"count": count})))
                if order.supply == "hosts":
                    hosts += count
                else:
                    units += count
                rate += count * price
        msg.reply_to.tell(Reviewed(orders=approved, clamps=clamps))
