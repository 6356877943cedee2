"""The discrete-event simulator: the real policy and state machines on a virtual clock.

Everything is an event on one heap, in time order: trace steps, script
answers, status polls, hosts joining, planning rounds. There are no
threads and no sleeping; a month of one-minute demand runs in under a minute.

What is real: every change is a fact made by ``messages.facts.make_fact``
and applied to a ``state.projection.Projection``, so every transition
passes the state machines of ``messages/states.py``; each planning round is
``policy.rounds`` (propose, review, outcome), the very code the live
planner and budget actors run; costs are ``policy.costs``. What is
simulated: the providers (``sim.cloud``), their owners' script calls
(``sim.owner``) and the scheduler (``sim.scheduler``).

Rounds happen when the live planner's would find something new: at once on
a demand change, and at its next ``plan_every`` after any other fact that
could sway it or when a time condition comes due (``policy.due``).
``every_tick=True`` plans at every ``plan_every`` instead, as the live
planner does; tests use it to check the shortcut decides the same.

Times are kept on a 1/1024 s grid so that sums of durations compare exactly.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import (
    Decision,
    Fact,
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    LeaseChanged,
    Order,
    Payload,
    ProviderDescribed,
    RequestChanged,
    RequestPlanned,
    ResourceTotalChanged,
    UsageObserved,
    make_fact,
)
from messages.records import InstanceRecord
from policy.catalog import Catalog
from policy.due import next_change
from policy.matching import Selector, amount
from policy.rounds import catalog_for, outcome, propose, review_orders, with_cuts
from policy.settings import plan_settings
from policy.supply import ARRIVING
from policy.warm import targets_of
from sim.cloud import Cloud
from sim.config import SimConfig
from sim.metrics import Metrics
from sim.owner import CallsFor, Owner
from sim.scheduler import Host, Scheduler
from sim.trace import Step, Trace
from sim.view import Recent
from state.projection import Projection

QUANTUM = 1.0 / 1024
#: Facts that never change what a round orders or returns: the planner's own, and steps that keep
#: supply in flight as it was (an order taken up, a call answered, a machine coming up or joining,
#: a host at work).
QUIET = frozenset({"order", "decision", "budget_event", "request_planned", "request_submitted",
                   "instance_provisioning", "instance_running", "instance_joined", "instance_busy",
                   "instance_returning", "instance_return_planned", "grant_return_planned", "grant_returning"})
#: Sim time between trims of the rounds' view.
RETIRE_EVERY = 600.0


#: A fact's kind -> the prefix of its fresh ids ("instance" for "instance_idle").
_PREFIX: dict[str, str] = {}


def _prefix(kind: str) -> str:
    prefix = _PREFIX[kind] = kind.split("_")[0]
    return prefix


def q(t: float) -> float:
    return round(t * 1024) / 1024


class Engine:
    def __init__(self, cfg: SimConfig, trace: Trace, *, every_tick: bool = False, trim: bool = True,
                 kept: bool = True, calls: CallsFor | None = None,
                 on_fact: Callable[[Fact], None] | None = None) -> None:
        """``calls``: how each owner reaches its provider (default: the simulated provider, ``sim.calls``).
        ``on_fact``: sees each fact as it is written (the simulated log, for whoever wants to keep it).
        ``kept=False``: every round plans from scratch, with a new catalog and nothing kept from the last
        round (tests check that rounds from the kept catalog decide the same)."""
        self.kept = kept
        self.cfg = cfg
        self.trace = trace
        self.on_fact = on_fact
        #: per resource: the use the license server reported last (its owner polls when it changes)
        self.told_use: dict[str, int] = {}
        self.every_tick = every_tick
        self.quantum = QUANTUM
        self.start = q(trace.start)
        self.end = q(trace.start + trace.span)
        self.now = self.start
        self.p = Projection()
        self.settings = plan_settings(cfg.policy, cfg.budget, [sp.as_config() for sp in cfg.providers])
        #: With warm capacity, a host going to work leaves its scope one idle host short, and one ordered or
        #: joining may let an idle one go (a successor, a warm host ready): a round must see all three
        #: (and a host come idle, ``_sways``).
        self.quiet = QUIET - {"instance_busy", "instance_joined", "order"} if self.settings.warm.rules else QUIET
        self.view: Any = Recent(self.p, self.settings) if trim else self.p
        self.plan_every = max(QUANTUM, q(cfg.policy.plan_every))
        self._heap: list[tuple[float, int, int, Callable[..., None], tuple]] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self.facts = 0
        self.rounds = 0
        self.last_plan = -math.inf
        self.timer_at: float | None = None
        self.demand: DemandSnapshot | None = None
        self.catalog: Catalog | None = None
        #: The providers and descriptions the catalog was checked against: their count (records are never
        #: removed), and how many descriptions had been written.
        self._catalog_of = (0, -1)
        self._described = 0
        self.clouds = {sp.name: Cloud(sp, cfg.seed) for sp in cfg.providers}
        self.owners = {name: Owner(self, cloud, cfg.policy, cfg.resources, calls)
                       for name, cloud in self.clouds.items()}
        self.scheduler = Scheduler(self._fits, self._capacity)
        self._capacities: dict[tuple[str, str | None], dict[str, float]] = {}
        #: Per item object (by id, with the item, so a new object at a reused id is not mistaken for it): its
        #: selector, and whether each (provider, template) fits it.
        self._fit: dict[int, tuple[HostItem | BundleItem, Selector, dict[tuple[str, str | None], bool]]] = {}
        #: Per packed request: how many of its hosts have joined (each takes the next host's load).
        self._joined_of: dict[str, int] = {}
        hold = {sp.name: max(sp.description.min_hold_s, sp.policy.billing_unit) or cfg.policy.idle_time
                for sp in cfg.providers}
        self.metrics = Metrics(self.p, self.settings.billing_units, hold)
        self.join_rng = random.Random(f"{cfg.seed}:scheduler")
        self.host_unmet: dict[str, int] = {}
        self.demand_round = False
        self.published = -math.inf
        self.publish_due = False
        #: Moments at which to look whether a round is due (see ``_sways``), each with the
        #: number of the last fact that asked for it.
        self.checks: dict[float, int] = {}
        #: How many facts the last round saw.
        self.planned_upto = 0
        #: The last round's decisions, and whether any item had need it could not place.
        self.decided: list[Decision] = []
        self.short = False

    # --- the clock --------------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[..., None], *args: Any, prio: int = 0) -> None:
        heapq.heappush(self._heap, (q(max(t, self.now)), prio, next(self._seq), fn, args))

    def grid(self, t: float, every: float) -> float:
        """The first multiple of ``every`` (from the run's start) at or after ``t``."""
        k = math.ceil((t - self.start) / every - 1e-9)
        return q(self.start + max(0, k) * every)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):08d}"

    def run(self) -> dict[str, Any]:
        """The whole trace: start, every event up to its end, and the report.

        The trace and the config live through the run (a month's steps are hundreds of thousands
        of objects): they are set aside from the collector's full passes while it runs
        (``gc.freeze``), which would otherwise walk all of them again each time.
        """
        gc.freeze()
        try:
            self.begin()
            self.advance(self.end)
            return self.finish()
        finally:
            gc.unfreeze()

    def begin(self) -> None:
        """Providers described and owned, the trace's steps and the samples scheduled."""
        for sp in self.cfg.providers:
            self.write(sp.name, [ProviderDescribed(description=sp.description)])
            self.owners[sp.name].acquire()
            self.owners[sp.name].publish_totals()
        for step in self.trace.steps:
            self.at(self.start + step.at, self._step, step)
        t = self.start
        while t <= self.end:
            self.at(t, self._sample)
            t += self.cfg.series_every
        if isinstance(self.view, Recent):
            self.at(self.start + RETIRE_EVERY, self._retire)

    def advance(self, until: float) -> None:
        """Every event due up to ``until``, in time order; the clock ends at ``until``."""
        until = q(until)
        while self._heap and self._heap[0][0] <= until:
            t, _, _, fn, args = heapq.heappop(self._heap)
            self.now = t
            fn(*args)
        self.now = max(self.now, until)

    def finish(self) -> dict[str, Any]:
        self.now = self.end
        if not self.metrics.samples or self.metrics.samples[-1].at < self.end:
            self._sample()
        return self.metrics.report(self.end, sum(o.failovers for o in self.owners.values()), self.rounds, self.facts)

    def _retire(self) -> None:
        self.view.retire(self.now)
        self.at(self.now + RETIRE_EVERY, self._retire)

    def _sample(self) -> None:
        wanted = {"hosts": 0, "units": 0, "bundles": 0}
        for item in self.scheduler.wanted.values():
            wanted[item.kind] = wanted.get(item.kind, 0) + item.count
        self.metrics.sample(self.now, wanted)

    # --- facts ------------------------------------------------------------------------------------

    def write(self, provider: str, payloads: Sequence[Payload], ids: Sequence[str | None] | None = None,
              lease: tuple[str, int] = ("", 0)) -> None:
        self.write_each([(provider, payload) for payload in payloads], ids, lease)

    def write_each(self, placed: Sequence[tuple[str, Payload]], ids: Sequence[str | None] | None = None,
                   lease: tuple[str, int] = ("", 0)) -> None:
        for i, (provider, payload) in enumerate(placed):
            fact_id = (ids[i] if ids else None) or self.new_id(_PREFIX.get(payload.kind) or _prefix(payload.kind))
            self.facts += 1
            fact = make_fact(payload, provider=provider, lease=lease[0], fence=lease[1], fact_id=fact_id,
                             now=self.now, seq=self.facts)  # the seq as the store assigns it
            if not self.p.apply(fact):
                raise RuntimeError(f"fact refused by the projection: {fact.kind} {fact.id}: "
                                   f"{self.p.anomalies[-1] if self.p.anomalies else ''}")
            if type(payload) is Decision:
                # A third of a month's facts: rounds read them from the projection, and nothing else
                # here follows, counts or answers one (``Recent``, ``Metrics`` and ``_react`` pass them by).
                if self.on_fact is not None:
                    self.on_fact(fact)
                continue
            if isinstance(self.view, Recent):
                self.view.add(fact)
            self.metrics.fact(fact)
            if self.on_fact is not None:
                self.on_fact(fact)
            self._react(fact)

    def _react(self, fact: Fact) -> None:
        p = fact.payload
        sways = self._sways(fact)
        if sways == "plan":
            self._dirty()
        elif sways == "retime" and not self.every_tick and self.last_plan > -math.inf:
            at = q(self.now + self.cfg.policy.idle_time)
            if at not in self.checks:
                self.at(at, self._check, at, prio=1)
            self.checks[at] = self.facts
        if isinstance(p, Order):
            self.at(self.now, self.owners[fact.provider].take, fact.id)
        elif isinstance(p, RequestPlanned):
            self.at(self.now, self.owners[fact.provider].call, fact.id)
        elif isinstance(p, (InstanceSeen, InstanceChanged)):
            key = f"{fact.provider}/{p.machine_id}"
            if p.state == "running":
                self.at(self.now + self.cfg.scheduler.join_delay.draw(self.join_rng), self._join, key)
            elif p.state in ("lost", "returned", "orphaned", "failed", "return_planned"):
                self.scheduler_leaves(key)
        elif isinstance(p, ResourceTotalChanged):
            self.at(self.now, self._licenses)
        elif isinstance(p, LeaseChanged):
            self._dirty()
        elif isinstance(p, ProviderDescribed):
            self._described += 1

    def _sways(self, fact: Fact) -> str | None:
        """What a fact calls for: "plan" (it could change what the next round orders or returns),
        "retime" (it can do so only ``idle_time`` from now: then the next moment is worked out anew), or None."""
        p = fact.payload
        if fact.kind in self.quiet or (isinstance(p, InstanceSeen) and p.state in ARRIVING):
            return None
        if isinstance(p, RequestChanged):
            # A request that ends short of its count stops counting its missing machines as in flight.
            ends_short = p.state in ("failed", "timed_out") or (
                p.state == "complete_with_error" and self.p.requests[p.request_id].action == "request")
            # One that completes clears its template's and its provider's cooldowns: need left unplaced
            # while they cooled down may be ordered there now.
            clears = self.short and p.state in ("complete", "complete_with_error") \
                and self.p.requests[p.request_id].action == "request"
            return "plan" if ends_short or clears else None
        if isinstance(p, UsageObserved):
            # More use only keeps borrowed units longer; less use frees them only once the peak
            # leaves the idle window, a moment the next timing finds.
            return "retime" if self._returnable(p.resource) else None
        if isinstance(p, InstanceChanged) and p.state == "idle" and self.cfg.policy.idle_time > 0:
            # A host past its max_lifetime goes back as soon as it is idle: not an idle_time later; with warm
            # capacity, a host come idle may be one more than a scope keeps, and let one kept before go.
            return "plan" if self.settings.warm.rules or self._past_lifetime(f"{fact.provider}/{p.machine_id}") \
                else "retime"
        if (isinstance(p, InstanceChanged) and p.state == "returned") or (
                isinstance(p, GrantChanged) and p.state == "returned"):
            # Room freed at a provider matters only to need that could not be placed.
            return "plan" if self.short else None
        return "plan"

    def _past_lifetime(self, key: str) -> bool:
        """Whether a host has been held for its provider's max_lifetime (the reclaim returns it once idle)."""
        life = self.settings.limits(key.split("/", 1)[0]).max_lifetime
        inst = self.p.instances.get(key)
        if life is None or inst is None:
            return False
        return self.now - (inst.launched_at if inst.launched_at is not None else inst.seen_at) >= life

    def _returnable(self, resource: str) -> bool:
        """Whether borrowed units of a resource could go back now, use permitting (use matters only then)."""
        if self.demand is not None and any(i.count > 0 for i in self.demand.items
                                           if isinstance(i, UnitItem) and i.resource == resource):
            return False
        idle = self.cfg.policy.idle_time
        for g in self.view.grants.values():
            if g.resource == resource and g.state == "granted" and g.granted_at is not None:
                hold = self.clouds[g.provider].desc.min_hold_s
                if self.now - g.granted_at >= max(idle, hold):
                    return True
        return False

    # --- the scheduler's side -------------------------------------------------------------------

    def _step(self, step: Step) -> None:
        for item in step.items:
            self.scheduler.want(item)
        for h in step.hosts:
            self._lose(h.provider, h.name, h.count)
        for name in step.failover:
            self.owners[name].fail_over()
        self._reassign(met_by_supply=False)
        self._licenses()

    def _lose(self, provider: str | None, name: str | None, count: int) -> None:
        if name is not None:
            inst = next((i for i in self.p.instances.values() if i.name == name), None)
            targets = [inst] if inst is not None else []
        else:
            held = self.p.instances_in("running", "joined", "idle", "busy", provider=provider)
            targets = sorted(held, key=lambda i: (-(i.launched_at or i.seen_at), i.key))[:count]
        for inst in targets:
            owner = self.owners[inst.provider]
            for mid in owner.cloud.reclaim([inst.machine_id], self.now):
                self.reclaimed(f"{inst.provider}/{mid}")
                owner.scan_at(self.now)

    def reclaimed(self, key: str) -> None:
        """The provider took a host back: it vanishes from the cluster now; its owner learns at its next scan."""
        self.scheduler_leaves(key)

    def license_in_use(self, resource: str) -> int:
        """Units of ``resource`` the work holds now, as the license server would report them."""
        res = self.p.resources.get(resource)
        return self.scheduler.license_in_use(resource, res.total if res is not None else 0)

    def _join(self, key: str) -> None:
        inst = self.p.instances.get(key)
        if inst is None or inst.state not in ("running", "provisioning") or key in self.scheduler.hosts:
            return
        cloud = self.clouds[inst.provider].machines.get(inst.machine_id)
        if cloud is not None and not cloud.held(self.now):
            return
        self.scheduler.join(Host(key=key, name=inst.name, provider=inst.provider, template=inst.template,
                                 item=inst.item_id, joined_at=self.now, plan=self._planned_load(inst)))
        self.owners[inst.provider].host_event(key, "joined")
        self._reassign(met_by_supply=True)

    def _planned_load(self, inst: InstanceRecord) -> dict[str, int]:
        """The bundles the planner packed onto a host bought for bundles: the n-th host of its request to
        join gets the n-th host's load of the packed order ({} for other hosts)."""
        req = self.p.requests.get(inst.request_id)
        order = self.p.orders.get(req.order_id) if req is not None else None
        if order is None or not order.order.loads:
            return {}
        n = self._joined_of.get(req.id, 0)  # type: ignore[union-attr]
        self._joined_of[req.id] = n + 1  # type: ignore[union-attr]
        for load in order.order.loads:
            if n < load.hosts:
                return dict(load.bundles)
            n -= load.hosts
        return {}

    def scheduler_leaves(self, key: str) -> None:
        if self.scheduler.leave(key) is not None:
            self._reassign(met_by_supply=False)

    def _reassign(self, met_by_supply: bool) -> None:
        changes, self.host_unmet = self.scheduler.assign()
        for host, event in changes:
            self.owners[host.provider].host_event(host.key, event)
        if self.scheduler.packing.allocated:
            self.metrics.packing(self.now, self.scheduler.packing)
        self._push(met_by_supply)

    def _licenses(self) -> None:
        """License totals or wants changed: report use to the license server and push the need."""
        idle_cost = 0.0
        for name, res in self.p.resources.items():
            in_use = self.scheduler.license_in_use(name, res.total)
            owner = self.owners.get(res.provider)
            if owner is not None:
                if in_use != self.told_use.get(name):
                    # The license server's count changed: the owner's next usage poll would see it.
                    self.told_use[name] = in_use
                    owner.use_changed()
                idle = max(0, res.borrowed - max(0, in_use - res.base))
                idle_cost += idle * self.clouds[res.provider].desc.price(name) / 3600.0
        self.metrics.units_idle(self.now, idle_cost)
        self._push(met_by_supply=True)

    def _push(self, met_by_supply: bool) -> None:
        every = self.cfg.scheduler.publish_every
        if every > 0 and self.now < self.published + every:
            if not self.publish_due:
                self.publish_due = True
                self.at(self.published + every, self._publish, met_by_supply)
            return
        self.published = self.now
        totals = {name: res.total for name, res in self.p.resources.items()}
        snap = self.scheduler.demand(self.host_unmet, totals, self.now)
        if snap is None:
            return
        self.metrics.need(self.now, {i.id: (i.kind, i.count) for i in snap.items}, met_by_supply)
        self.demand = snap
        if not self.demand_round:
            self.demand_round = True
            self.at(self.now, self._round, prio=1)

    def _publish(self, met_by_supply: bool) -> None:
        self.publish_due = False
        self._push(met_by_supply)

    def _fits(self, item: HostItem | BundleItem, host: Host) -> bool:
        """Whether ``host`` could do ``item``'s work. The scheduler asks it of every spare host while an item
        lacks some, every minute: the answer is kept per item (its selector) and per template."""
        found = self._fit.get(id(item))
        if found is None or found[0] is not item:
            if len(self._fit) > 1_000:  # items the workload no longer holds
                self._fit.clear()
            found = self._fit[id(item)] = (item, Selector(item), {})
        _, selector, fits = found
        key = (host.provider, host.template)
        ok = fits.get(key)
        if ok is None:
            desc = self.clouds[host.provider].desc  # the simulated provider's own: it never changes
            t = desc.template(host.template) if host.template else None
            ok = fits[key] = t is not None and selector.matches(t, desc.zone)
        return ok

    def _capacity(self, host: Host) -> dict[str, float]:
        """What a host has of each numeric attribute of its template: what bundles take."""
        key = (host.provider, host.template)
        cap = self._capacities.get(key)
        if cap is None:
            t = self.clouds[host.provider].desc.template(host.template) if host.template else None
            attributes = t.attributes if t is not None else {}
            cap = self._capacities[key] = {k: amount(v) for k, v in attributes.items() if amount(v) > 0}
        return cap

    # --- planning ----------------------------------------------------------------------------------

    def _dirty(self) -> None:
        if self.last_plan == -math.inf:
            self._timer(self.now)
        elif not self.every_tick:
            k = max(1, math.ceil((self.now - self.last_plan) / self.plan_every - 1e-9))
            self._timer(self.last_plan + k * self.plan_every)

    def _check(self, at: float) -> None:
        """A moment a retiming fact pointed at: plan if something is due by now, else wait for when it is.

        A round that came after the fact has already timed the next round with it in view,
        and nothing but another retiming fact could have moved that moment since: then there
        is nothing to look at (most checks: demand plans a round every minute or so).
        """
        if self.planned_upto < self.checks.pop(at):
            self._schedule(next_change(self.demand, self.view, self.now - QUANTUM / 2, self.settings,
                                       self.cfg.policy.idle_time, self.decided, self._kept_catalog()))

    def _kept_catalog(self) -> Catalog | None:
        """The rounds' catalog while no provider was added or described since it was checked, else None."""
        fits = self.kept and (len(self.p.providers), self._described) == self._catalog_of
        return self.catalog if fits else None

    def _schedule(self, due: float | None) -> None:
        if due is not None:
            k = max(1, math.ceil((due - self.last_plan) / self.plan_every - 1e-9))
            self._timer(self.last_plan + k * self.plan_every)

    def _timer(self, t: float) -> None:
        t = q(t)
        if self.timer_at is not None and self.timer_at <= t:
            return
        self.timer_at = t
        self.at(t, self._timer_round, t, prio=1)

    def _timer_round(self, t: float) -> None:
        if self.timer_at != t:
            return
        self._round()

    def _round(self) -> None:
        now = self.now
        self.rounds += 1
        self.last_plan = now
        self.planned_upto = self.facts
        self.timer_at = None
        self.demand_round = False
        # ``catalog_for`` compares every provider's description with the catalog's, which a month of
        # rounds paid a hundred times each; only a new provider or a description written can change them.
        seen = (len(self.p.providers), self._described)
        if not self.kept:
            self.catalog = Catalog(self.p.providers)
        elif seen != self._catalog_of:
            self.catalog = catalog_for(self.catalog, self.p.providers)
            self._catalog_of = seen
        assert self.catalog is not None, "made above on the first round"
        proposal = propose(self.demand, self.view, now, self.settings, self.cfg.policy.idle_time, self.catalog)
        approved: list = []
        clamps: list[tuple[str, str]] = []
        if proposal.orders:
            approved, found = review_orders(proposal.orders, self.view, now, self.settings)
            clamps = [(c.limit, c.detail) for c in found]
        self.write_each(outcome(proposal, approved, clamps, self.view.decided), lease=("planner", 1))
        if self.every_tick:
            self._timer(now + self.plan_every)
            return
        self.decided = with_cuts(proposal.decisions, proposal.orders, approved)
        counts = {i.id: i.count for i in self.demand.items} if self.demand else {}
        counts.update(targets_of(self.decided))
        self.short = any(d.in_flight + sum(c.count if c.bundles is None else c.bundles for c in d.chosen)
                         < counts.get(d.item, 0) for d in self.decided)
        self._schedule(next_change(self.demand, self.view, now, self.settings, self.cfg.policy.idle_time,
                                   self.decided, self.catalog if self.kept else None))

    # --- for tests and reports ---------------------------------------------------------------------

    def decisions(self) -> list[tuple[float, Decision]]:
        return [(d.at, d.decision) for d in self.p.decisions]


def run(cfg: SimConfig, trace: Trace, **kw: Any) -> tuple[dict[str, Any], Engine]:
    problems = trace.problems({sp.name: sp.description.kind for sp in cfg.providers})
    if problems:
        raise ValueError("\n".join(problems))
    engine = Engine(cfg, trace, **kw)
    return engine.run(), engine

