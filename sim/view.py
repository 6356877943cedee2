"""The projection as a planning round needs it: what is in motion, and what ended recently.

A month of facts holds tens of thousands of finished requests and returned
hosts, and the policy functions walk every record they are given; yet a
record that ended long ago can no longer sway a round. ``Recent`` hands the
rounds the projection's own records (the same objects, kept current by
``Projection.apply``) minus those that ended more than ``horizon`` ago:

- orders stay while they may still count as in flight or towards a rate
  limit (a packed order while its request is kept: the bundles its hosts
  carry are found through it), requests while they may bring supply (hosts
  not seen, coming up or joined within ``join_grace``) or sway a cooldown
  (a failure for as long as a run of cooldowns takes to reach
  ``backoff_max`` twice over; a success while an earlier failure it clears
  is kept);
- with a spend cap, records that accrued cost in the current period stay.

Providers and resources come from the projection untouched. Of the
decisions (the projection keeps the last 1000), a round reads per item only
the last one and the edges of its last wanting spell (``policy.reclaim``'s
hysteresis), so ``Decisions`` keeps just those, with the same window.
``tests/sim_engine`` runs the same trace with and without trimming and
checks the decisions agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from messages.facts import Fact, GrantChanged, InstanceSeen, Order, RequestPlanned
from messages.records import (
    DecisionRecord,
    GrantRecord,
    InstanceRecord,
    NodeRecord,
    OrderRecord,
    ProviderRecord,
    RequestRecord,
    ResourceRecord,
)
from messages.states import GRANT, INSTANCE, REQUEST
from policy.budget import period_start
from policy.settings import PlanSettings
from policy.supply import ARRIVING, SERVING, unresolved
from state.projection import Projection

#: Request ends that count against a provider in its cooldowns.
_STRIKES = frozenset({"failed", "timed_out"})


def horizon(settings: PlanSettings) -> float:
    """How long after it ended a record may still sway a round."""
    doublings = math.ceil(math.log2(max(1.0, settings.backoff_max / max(settings.cooldown, 1e-9))))
    windows = [lim.rate_per for lim in settings.providers.values() if lim.rate_count is not None]
    return max(settings.order_timeout, *windows, 2 * settings.backoff_max * (doublings + 3), 3600.0) + 1.0


class Recent:
    def __init__(self, p: Projection, settings: PlanSettings) -> None:
        self.p = p
        self.settings = settings
        self.horizon = horizon(settings)
        self.orders: dict[str, OrderRecord] = {}
        self.requests: dict[str, RequestRecord] = {}
        self.instances: dict[str, InstanceRecord] = {}
        self.grants: dict[str, GrantRecord] = {}

    @property
    def providers(self) -> Mapping[str, ProviderRecord]:
        return self.p.providers

    @property
    def resources(self) -> Mapping[str, ResourceRecord]:
        return self.p.resources

    @property
    def nodes(self) -> Mapping[str, NodeRecord]:
        return self.p.nodes

    @property
    def decided(self) -> Iterable[DecisionRecord]:
        return self.p.decided

    def add(self, fact: Fact) -> None:
        """Take up the record a just-applied fact created, if any."""
        p, payload = self.p, fact.payload
        if isinstance(payload, Order):
            self.orders[fact.id] = p.orders[fact.id]
        elif isinstance(payload, RequestPlanned):
            if fact.id in p.requests:
                self.requests[fact.id] = p.requests[fact.id]
            if fact.id in p.grants:
                self.grants[fact.id] = p.grants[fact.id]
        elif isinstance(payload, InstanceSeen):
            key = f"{fact.provider}/{payload.machine_id}"
            if key in p.instances:
                self.instances[key] = p.instances[key]
        elif isinstance(payload, GrantChanged) and payload.grant_id in p.grants:
            self.grants[payload.grant_id] = p.grants[payload.grant_id]

    def retire(self, now: float) -> None:
        """Let go of what can no longer sway a round."""
        cutoff = now - self.horizon
        budget = self.settings.budget
        spend_from = period_start(now, budget.spend_per) if budget.max_spend is not None else math.inf
        windows = [lim.rate_per for lim in self.settings.providers.values() if lim.rate_count is not None]
        rate_window = max(windows, default=0.0)
        timeout = self.settings.order_timeout
        # Finished requests feed the cooldowns: a strike up to the horizon, a success while a strike
        # of its provider before it is still kept (else it clears nothing).
        first_strike: dict[str, float] = {}
        for r in self.requests.values():
            if r.action == "request" and r.state in _STRIKES:
                end = r.history.since(r.state) or now
                if end >= cutoff:
                    first_strike[r.provider] = min(first_strike.get(r.provider, math.inf), end)
        grace = self.settings.join_grace
        # A request's hosts coming up, or joined within the grace, are still in flight for it.
        bringing = {i.request_id for i in self.instances.values() if i.state in ARRIVING or (
            i.state in SERVING and i.joined_at is not None and now - i.joined_at < grace)}
        for rid, r in list(self.requests.items()):
            if r.state not in REQUEST.terminal or unresolved(r, now, timeout) or rid in bringing:
                continue
            end = r.history.since(r.state) or now
            if r.action == "return" or end < cutoff or (
                    r.state not in _STRIKES and end < first_strike.get(r.provider, math.inf)):
                del self.requests[rid]
        for oid, o in list(self.orders.items()):
            reqs = [self.p.requests.get(r) for r in o.request_ids]
            if o.order.action == "request":
                # Taken up, it is a request now; untaken, it stops counting after the order timeout.
                # A packed order stays while a request of it does: its bundles ride on the request's
                # hosts, found through the order (``policy.supply.bundles_in_flight``).
                gone = now - o.at > (rate_window if reqs else max(rate_window, timeout)) and not (
                    o.order.loads and any(r in self.requests for r in o.request_ids))
            else:
                gone = bool(reqs) and all(r is None or r.state in REQUEST.terminal for r in reqs)
            if gone:
                del self.orders[oid]
        for key, i in list(self.instances.items()):
            # An ended host counts only towards its request's machines while that may bring more.
            req = self.requests.get(i.request_id)
            if i.state in INSTANCE.terminal and (i.ended_at or now) < spend_from and (
                    req is None or not unresolved(req, now, timeout)):
                del self.instances[key]
        for gid, g in list(self.grants.items()):
            if g.state in GRANT.terminal and (g.ended_at or now) < spend_from:
                del self.grants[gid]

