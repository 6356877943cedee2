"""What a simulated run adds up to: cost, waiting, idle spend, thrash, failures, and a series over time.

Costs come from ``policy.costs.costs``, the function behind the daemon's
``costs`` view and its budget, applied to the run's projection; the series
adds each record's cost once as it ends and sums only what is live at each
sample.

- **Unmet demand** is the integral of the scheduler's unmet need over time
  (host-hours, unit-hours).
- **Time to capacity**: for each unit of need that had to wait, from when it
  became unmet until supply met it (need the workload withdrew before it
  was met is not counted).
- **Idle cost**: what hosts cost while idle, and borrowed license units
  while nobody used them.
- **Thrash**: returns followed, within the hold time (the provider's minimum
  hold or billing unit, else ``idle_time``), by a new order for the same
  demand item (for a host bought for bundles, any item whose bundles it was
  bought to carry).
- **Warm hosts** (warm capacity, ``policy.warm``): how many hosts were bought
  to be kept warm, what they cost (idle and at work alike: once they join, the
  work takes them), and what of it they cost idle. The printed table sets each
  variant against the first: its cost and its waiting (unmet host-hours, time
  to capacity) beside the first's, and what each host-hour of waiting saved
  cost.
- **Packing** (bundle items): per resource the bundles need, the integral
  over time of what the bundle hosts have (allocated) and of what the
  bundles running on them use (``sim.scheduler.Packing``), and their ratio,
  the packing efficiency.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from messages.facts import Fact, GrantChanged, InstanceChanged, InstanceSeen, Order, RequestChanged
from messages.records import GrantRecord, InstanceRecord, ProviderRecord
from messages.states import GRANT, INSTANCE
from policy.costs import costs, grant_cost, instance_cost, price
from policy.warm import is_warm
from sim.scheduler import Packing
from state.projection import Projection


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank); None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class Sample:
    at: float
    wanted_hosts: int
    unmet_hosts: int
    wanted_units: int
    unmet_units: int
    cost: float
    supply: dict[str, int] = field(default_factory=dict)
    wanted_bundles: int = 0
    unmet_bundles: int = 0
    #: Per resource the bundles need: what the bundle hosts have, and what the bundles running use.
    allocated: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)


class Metrics:
    def __init__(self, p: Projection, billing_units: Mapping[str, float], hold: Mapping[str, float]) -> None:
        self.p = p
        self.billing = dict(billing_units)
        #: Per provider: how soon a new order after a return counts as thrash.
        self.hold = dict(hold)
        self.closed: dict[str, float] = {}
        self.unmet: dict[str, tuple[str, int]] = {}
        self.unmet_seconds = {"hosts": 0.0, "units": 0.0, "bundles": 0.0}
        self.unmet_since = 0.0
        self.waiting: dict[str, deque[float]] = {}
        self.waits: dict[str, list[float]] = {"hosts": [], "units": [], "bundles": []}
        #: Whether the workload has bundle items (their figures are reported only then).
        self.bundles = False
        #: The bundle hosts' resources and the bundles' use now, since when, and their integrals.
        self.now_packing = Packing()
        self.packing_since = 0.0
        self.allocated_seconds: dict[str, float] = {}
        self.used_seconds: dict[str, float] = {}
        self.returns: dict[str, deque[tuple[float, float]]] = {}
        self.thrash = 0
        self.counts: dict[str, int] = {}
        self.idle_unit_seconds_cost = 0.0
        self._units_idle: tuple[float, float] = (0.0, 0.0)  # (since, cost per second)
        self.samples: list[Sample] = []

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    # --- facts -------------------------------------------------------------------------------

    def fact(self, fact: Fact) -> None:
        p = fact.payload
        if isinstance(p, Order):
            self._order(fact, p)
        elif isinstance(p, RequestChanged):
            if p.state in ("failed", "timed_out") and self.p.requests[p.request_id].action == "request":
                self.count(f"requests {p.state}" + (f" ({p.outcome})" if p.outcome else ""))
        elif isinstance(p, (InstanceSeen, InstanceChanged)):
            key = f"{fact.provider}/{p.machine_id}"
            if isinstance(p, InstanceSeen):
                self.count("hosts launched" if p.state != "orphaned" else "orphans found")
            if p.state == "failed":
                self.count("hosts failed to start")
            elif p.state == "lost":
                self.count("hosts reclaimed (lost)")
            if p.state in INSTANCE.terminal:
                self._close(fact.time, self.p.instances[key])
        elif isinstance(p, GrantChanged) and p.state in GRANT.terminal:
            self._close(fact.time, self.p.grants[p.grant_id])

    def _close(self, at: float, record: InstanceRecord | GrantRecord) -> None:
        """A record ended: what it cost is final, so add it up once and forget the record."""
        if isinstance(record, InstanceRecord):
            paid = instance_cost(record, price(self.p.providers, record.provider, record.template), at,
                                 self.billing.get(record.provider, 0.0))
        else:
            paid = grant_cost(record, price(self.p.providers, record.provider, record.resource), at,
                              self.billing.get(record.provider, 0.0))
        if paid:
            self.closed[record.provider] = self.closed.get(record.provider, 0.0) + paid

    def _order(self, fact: Fact, o: Order) -> None:
        now = fact.time
        if o.action == "return":
            self.count("returns ordered")
            items = ({item for m in o.machines if f"{fact.provider}/{m}" in self.p.instances
                      for item in self._items(self.p.instances[f"{fact.provider}/{m}"])}
                     | {self.p.grants[g].item_id for g in o.grants if g in self.p.grants})
            until = now + self.hold.get(fact.provider, 0.0)
            for item in items - {""}:
                self.returns.setdefault(item, deque()).append((now, until))
            return
        self.count("orders")
        for item in [o.item_id] if not o.loads else sorted(o.bundles):
            back = self.returns.get(item)
            while back and back[0][1] < now:
                back.popleft()
            if back:
                back.popleft()
                self.thrash += 1
                break  # one order re-buys once, whatever items its hosts carry

    def _items(self, inst: InstanceRecord) -> list[str]:
        """The demand items a host was bought for: its request's, or those whose bundles its packed order carries."""
        if inst.item_id:
            return [inst.item_id]
        req = self.p.requests.get(inst.request_id)
        order = self.p.orders.get(req.order_id) if req is not None else None
        return sorted(order.order.bundles) if order is not None else []

    # --- the scheduler's need ------------------------------------------------------------------

    def need(self, now: float, unmet: Mapping[str, tuple[str, int]], met_by_supply: bool) -> None:
        """The unmet need per item (kind, count) from ``now`` on; ``met_by_supply``: drops are supply arriving."""
        self._integrate(now)
        for item, (kind, n) in unmet.items():
            self.bundles = self.bundles or kind == "bundles"
            before = self.unmet.get(item, (kind, 0))[1]
            queue = self.waiting.setdefault(item, deque())
            if n > before:
                queue.extend([now] * (n - before))
            for _ in range(before - n):
                if not queue:
                    break
                if met_by_supply:
                    self.waits[kind].append(now - queue.popleft())
                else:
                    queue.pop()
        self.unmet = dict(unmet)

    def _integrate(self, now: float) -> None:
        dt = now - self.unmet_since
        if dt > 0:
            for kind, n in self.unmet.values():
                self.unmet_seconds[kind] += n * dt
        self.unmet_since = now

    def packing(self, now: float, packing: Packing) -> None:
        """The bundle hosts' resources and the bundles' use from ``now`` on."""
        self._integrate_packing(now)
        self.now_packing = packing

    def _integrate_packing(self, now: float) -> None:
        dt = now - self.packing_since
        if dt > 0:
            for r, v in self.now_packing.allocated.items():
                self.allocated_seconds[r] = self.allocated_seconds.get(r, 0.0) + v * dt
            for r, v in self.now_packing.used.items():
                self.used_seconds[r] = self.used_seconds.get(r, 0.0) + v * dt
        self.packing_since = now

    def units_idle(self, now: float, idle_cost_per_second: float) -> None:
        since, rate = self._units_idle
        self.idle_unit_seconds_cost += rate * max(0.0, now - since)
        self._units_idle = (now, idle_cost_per_second)

    # --- the series -------------------------------------------------------------------------------

    def cost_now(self, now: float) -> float:
        live = {k: self.p.instances[k] for k in self.p.live_keys()}
        grants = {g: self.p.grants[g] for g in self.p.live_grant_ids()}
        return sum(self.closed.values()) + costs(self.p.providers, live, grants, now, self.billing).total

    def sample(self, now: float, wanted: Mapping[str, int]) -> None:
        supply: dict[str, int] = {}
        for k in self.p.live_keys():
            inst = self.p.instances[k]
            if inst.state not in ("failed", "orphaned"):
                supply[inst.provider] = supply.get(inst.provider, 0) + 1
        for g in self.p.live_grant_ids():
            grant = self.p.grants[g]
            if grant.state in ("granted", "return_planned", "returning"):
                supply[grant.provider] = supply.get(grant.provider, 0) + grant.count
        unmet = {"hosts": 0, "units": 0, "bundles": 0}
        for kind, n in self.unmet.values():
            unmet[kind] += n
        self.samples.append(Sample(at=now, wanted_hosts=wanted.get("hosts", 0), unmet_hosts=unmet["hosts"],
                                   wanted_units=wanted.get("units", 0), unmet_units=unmet["units"],
                                   cost=self.cost_now(now), supply=supply, wanted_bundles=wanted.get("bundles", 0),
                                   unmet_bundles=unmet["bundles"], allocated=dict(self.now_packing.allocated),
                                   used=dict(self.now_packing.used)))

    # --- the end ----------------------------------------------------------------------------------

    def report(self, end: float, failovers: int, rounds: int, facts: int) -> dict[str, Any]:
        self._integrate(end)
        self._integrate_packing(end)
        self.units_idle(end, 0.0)
        p = self.p
        c = costs(p.providers, p.instances, p.grants, end, self.billing)
        idle_hosts = sum(_idle_seconds(i, end) / 3600.0 * _price(p.providers, i) for i in p.instances.values())
        waits = self.waits["hosts"] + self.waits["units"] + self.waits["bundles"]
        out = {
            "total_cost": round(c.total, 4),
            "cost_by_provider": {n: round(pc.cost_so_far, 4) for n, pc in c.by_provider.items() if pc.cost_so_far},
            "unmet_host_hours": round(self.unmet_seconds["hosts"] / 3600.0, 4),
            "unmet_unit_hours": round(self.unmet_seconds["units"] / 3600.0, 4),
            "time_to_capacity_p50_s": _round(percentile(waits, 50)),
            "time_to_capacity_p95_s": _round(percentile(waits, 95)),
            "time_to_capacity_hosts_p95_s": _round(percentile(self.waits["hosts"], 95)),
            "time_to_capacity_units_p95_s": _round(percentile(self.waits["units"], 95)),
            "idle_cost": round(idle_hosts + self.idle_unit_seconds_cost, 4),
            "idle_cost_hosts": round(idle_hosts, 4),
            "idle_cost_units": round(self.idle_unit_seconds_cost, 4),
            "thrash": self.thrash,
            "failures": {k: v for k, v in sorted(self.counts.items())
                         if k.startswith(("requests ", "hosts failed", "hosts reclaimed"))},
            "failovers": failovers,
            "counts": {k: v for k, v in sorted(self.counts.items()) if k in
                       ("orders", "returns ordered", "hosts launched", "orphans found")},
            "planning_rounds": rounds,
            "facts": facts,
        }
        warm = [i for i in p.instances.values() if is_warm(i.item_id)]
        if warm:
            out["warm_hosts"] = len(warm)
            out["warm_cost"] = round(sum(instance_cost(i, _price(p.providers, i), end,
                                                       self.billing.get(i.provider, 0.0)) for i in warm), 4)
            out["warm_idle_cost"] = round(sum(_idle_seconds(i, end) / 3600.0 * _price(p.providers, i) for i in warm), 4)
        if self.bundles:
            out["unmet_bundle_hours"] = round(self.unmet_seconds["bundles"] / 3600.0, 4)
            out["time_to_capacity_bundles_p95_s"] = _round(percentile(self.waits["bundles"], 95))
            out["packing"] = {r: {"allocated_hours": round(a / 3600.0, 4),
                                  "used_hours": round(self.used_seconds.get(r, 0.0) / 3600.0, 4),
                                  "efficiency": round(self.used_seconds.get(r, 0.0) / a, 4) if a > 0 else None}
                              for r, a in sorted(self.allocated_seconds.items())}
        return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _price(providers: Mapping[str, ProviderRecord], inst: InstanceRecord) -> float:
    rec = providers.get(inst.provider)
    return rec.description.price(inst.template) if rec is not None and rec.description is not None else 0.0


def _idle_seconds(inst: InstanceRecord, end: float) -> float:
    """Seconds a host spent idle, read from its flat history (state, time, reason per change): a month
    ends with tens of thousands of hosts, and making each change an object cost the report a fifth of a second."""
    total = 0.0
    h = inst.history
    n = len(h)
    for i in range(0, n, 3):
        if h[i] == "idle":
            until = h[i + 4] if i + 3 < n else (inst.ended_at or end)
            total += max(0.0, until - h[i + 1])
    return total
