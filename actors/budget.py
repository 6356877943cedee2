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

from actors.base import Actor, handles
from actors.reconfigure import Reconfigure
from config.models import BudgetConfig, PolicyConfig, ProviderConfig
from messages.commands import Review, Reviewed, Tick
from policy.rounds import review_orders
from policy.settings import plan_settings
from state.shared import SharedProjection

log = logging.getLogger(__name__)


class BudgetActor(Actor):
    def __init__(
        self,
        budget: BudgetConfig,
        shared: SharedProjection,
        clock: Callable[[], float] = time.time,
        policy: PolicyConfig | None = None,
        providers: Sequence[ProviderConfig] = (),
    ) -> None:
        """``shared``: the journal's projection of every fact, which reviews read.

        It subscribes to nothing: reviews read the shared projection when asked, and the demand, the
        scheduler's hosts and the facts as news are the planner's and the owners' business.
        """
        super().__init__()
        self.clock = clock
        self.settings = plan_settings(policy or PolicyConfig(), budget, providers)
        self.view = shared

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
