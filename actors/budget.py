"""BudgetActor: the global caps' last word before the planner's orders are written.

It answers the planner's ``Review`` with the orders clamped so that what is
held plus what is on its way plus the new orders stays within every global
cap (hosts, units, cost per hour, spend per period), each clamp cut to the
provider's granularity. The math is ``policy.rounds.review_orders`` (the
same the simulator runs); this actor only reads a projection of the facts
to measure usage against (the daemon's shared one, or its own).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from actors.base import Actor, Tells, handles
from config.models import BudgetConfig, PolicyConfig, ProviderConfig
from messages.commands import (
    CaughtUp,
    DemandChanged,
    HostEvents,
    Reconfigure,
    Review,
    Reviewed,
    Subscribe,
    SupplyChanged,
    Tick,
)
from policy.rounds import review_orders
from policy.settings import plan_settings
from state.shared import SharedProjection

log = logging.getLogger(__name__)


class BudgetActor(Actor):
    def __init__(
        self,
        journal: Tells,
        budget: BudgetConfig,
        shared: SharedProjection,
        clock: Callable[[], float] = time.time,
        policy: PolicyConfig | None = None,
        providers: Sequence[ProviderConfig] = (),
    ) -> None:
        """``shared``: the journal's projection of every fact, which reviews read."""
        super().__init__()
        self.journal = journal
        self.clock = clock
        self.settings = plan_settings(policy or PolicyConfig(), budget, providers)
        self.view = shared

    def on_start(self) -> None:
        self.journal.tell(Subscribe(ref=self.actor_ref, shared=True))

    @handles(CaughtUp)
    def _caught_up(self, _: CaughtUp) -> None:
        """Reviews use whatever the projection holds; nothing to start."""

    @handles(DemandChanged)
    def _demand(self, _: DemandChanged) -> None:
        """The planner's business."""

    @handles(HostEvents)
    def _events(self, _: HostEvents) -> None:
        """The owners' business."""

    @handles(SupplyChanged)
    def _supply(self, _: SupplyChanged) -> None:
        """The owners' business."""

    @handles(Tick)
    def _tick(self, _: Tick) -> None:
        """Nothing periodic: reviews measure usage when asked."""

    @handles(Reconfigure)
    def _reconfigure(self, msg: Reconfigure) -> None:
        """A reloaded config: the caps and provider limits reviews hold orders to."""
        cfg = msg.config
        self.settings = plan_settings(cfg.policy, cfg.budget, cfg.providers)

    @handles(Review)
    def _review(self, msg: Review) -> None:
        with self.view.reading() as p:
            approved, clamps = review_orders(msg.orders, p, self.clock(), self.settings)
        for c in clamps:
            log.info("budget: %s by %s", c.detail, c.limit)
        msg.reply_to.tell(Reviewed(orders=approved, clamps=[(c.limit, c.detail) for c in clamps]))
