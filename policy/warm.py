"""Warm capacity: hosts kept idle and ready beyond demand, and a floor of hosts never given back.

A rule covers a scope: every hosts provider together (``policy.min_idle``,
``policy.min_hosts``), one provider, or one template of a provider
(``providers[].policy.warm``). While its schedule is open (always, without
one) it asks for:

- ``min_idle``: at least this many hosts of the scope *ready*, joined or
  idle, counting warm hosts already on their way; demand uses them first
  (the scheduler's unmet need is what it cannot place on them), so they are
  hosts beyond demand;
- ``min_hosts``: at least this many hosts of the scope held: coming, up,
  idle or busy, whatever they were bought for.

Rules of one scope open at once add up as their largest ``min_idle`` and
largest ``min_hosts``. The planner orders what a scope lacks after the
demand items have been served, as one more item (``warm/*``,
``warm/PROVIDER``, ``warm/PROVIDER/TEMPLATE``) taking its hosts from the
same room (capacity, caps, cost and rate limits, cooldowns, the budget
review), so demand comes first and a cap refuses a warm host as it would any
other. The return side holds idle hosts back from reclaim while a scope needs
them: it keeps enough idle hosts of each scope for ``min_idle`` ready and
``min_hosts`` held, the youngest first, a host past its ``max_lifetime``
last (the planner does not count such a host, so it orders a successor,
and the old host goes back once the new one is idle). Hosts of a
scheduler's named nodes are the scheduler's (``policy.nodes``): no rule
counts or keeps them; nor one of a provider that is drained or disabled.

Pure: every function reads the facts and ``now``; schedules are read in the
config's time zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo

from config.schedule import Schedule
from messages.facts import Decision, Order
from messages.records import InstanceRecord, ProviderRecord
from policy.limits import UNLIMITED, ProviderLimits
from policy.supply import SupplyView, pending, unresolved

#: The prefix of warm capacity's decision items and of the orders it places.
WARM = "warm"
#: Host states a rule counts: on their way, up, idle or busy.
HOLDING = frozenset({"requested", "provisioning", "running", "joined", "idle", "busy"})
ARRIVING = frozenset({"requested", "provisioning", "running"})
#: Provider statuses whose hosts a rule counts and keeps: a drained or disabled provider's go back.
KEEPING = frozenset({"active", "paused"})


def item_id(provider: str | None, template: str | None) -> str:
    """``warm/*`` (every hosts provider), ``warm/PROVIDER`` or ``warm/PROVIDER/TEMPLATE``."""
    if provider is None:
        return f"{WARM}/*"
    return f"{WARM}/{provider}" + (f"/{template}" if template else "")


def _named(item: str) -> bool:
    """Whether an order's item is a scheduler's named nodes' (``policy.nodes.item_id``)."""
    return item.startswith("nodes/")


def is_warm(item: str) -> bool:
    """Whether a decision's or an order's item is warm capacity's (demand items cannot hold a ``/``)."""
    return item.startswith(WARM + "/")


@dataclass(frozen=True)
class WarmRule:
    #: None: every hosts provider together.
    provider: str | None
    #: None: any template of the provider (or providers).
    template: str | None
    min_idle: int = 0
    min_hosts: int = 0
    #: None: always open.
    schedule: Schedule | None = None


@dataclass(frozen=True)
class Target:
    """What one scope asks for now: the open rules' largest ``min_idle`` and ``min_hosts``."""

    provider: str | None
    template: str | None
    min_idle: int
    min_hosts: int
    #: The rules in words, for decisions and orders: ``min_idle 2 (08:00-20:00 Mon-Fri)``.
    said: str

    @property
    def item(self) -> str:
        return item_id(self.provider, self.template)

    def holds(self, provider: str, template: str | None) -> bool:
        return (self.provider is None or self.provider == provider) and (
            self.template is None or self.template == template)


@dataclass(frozen=True)
class WarmPolicy:
    rules: tuple[WarmRule, ...] = ()
    #: The zone schedules are read in (``policy.timezone``).
    tz: tzinfo = UTC

    def targets(self, now: float) -> list[Target]:
        """Every scope with a rule, most specific first (a template's, a provider's, then all providers'),
        with what its rules open at ``now`` ask for."""
        scopes: dict[tuple[str | None, str | None], list[WarmRule]] = {}
        for r in self.rules:
            scopes.setdefault((r.provider, r.template), []).append(r)
        out = []
        for (provider, template), rules in scopes.items():
            open_ = [r for r in rules if r.schedule is None or r.schedule.open_at(now, self.tz)]
            idle = max((r.min_idle for r in open_), default=0)
            hosts = max((r.min_hosts for r in open_), default=0)
            if idle or hosts:
                said = ", ".join(_rule_said(r) for r in open_ if r.min_idle or r.min_hosts)
            else:
                closed = [str(r.schedule) for r in rules if r.schedule is not None and r not in open_]
                said = "nothing now" + (f" (outside {'; '.join(closed)})" if closed else "")
            out.append(Target(provider, template, idle, hosts, said))
        out.sort(key=lambda t: (t.provider is None, t.template is None, t.provider or "", t.template or ""))
        return out

    def next_edge(self, now: float) -> float | None:
        """The first moment after ``now`` at which a rule's schedule opens or closes."""
        edges = [e for r in self.rules if r.schedule is not None
                 and (e := r.schedule.next_edge(now, self.tz)) is not None]
        return min(edges) if edges else None


def _rule_said(r: WarmRule) -> str:
    parts = ([f"min_idle {r.min_idle}"] if r.min_idle else []) + ([f"min_hosts {r.min_hosts}"] if r.min_hosts else [])
    return " ".join(parts) + (f" ({r.schedule})" if r.schedule is not None else "")


@dataclass
class Count:
    """One scope's hosts, as its rules count them."""

    #: Joined or idle (hosts past their max_lifetime left out: the planner buys their successors).
    ready: int = 0
    #: Coming, up, idle or busy, and ordered or requested but not seen yet (likewise).
    held: int = 0
    #: Of those, warm hosts on their way (ordered for warm capacity, not up yet).
    coming: int = 0
    #: Of the ready hosts, those idle.
    idle_young: int = 0
    #: What the return side reads, past max_lifetime or not: the idle hosts ...
    idle: list[InstanceRecord] = field(default_factory=list)
    #: ... the joined ones (ready, not idle yet), and every held host that is not idle.
    joined: int = 0
    not_idle: int = 0

    def need(self, t: Target) -> int:
        """Hosts to order now for ``t``."""
        return max(0, t.min_idle - self.ready - self.coming, t.min_hosts - self.held)

    def keep(self, t: Target) -> int:
        """Idle hosts the return side must leave: enough young ones for ``min_idle`` ready and ``min_hosts``
        held as the planner counts them, and enough of all (those past max_lifetime standing in while
        their successors come) for both counted with every host."""
        young = min(self.idle_young, max(0, t.min_idle - (self.ready - self.idle_young),
                                         t.min_hosts - (self.held - self.idle_young)))
        every = min(len(self.idle), max(0, t.min_idle - self.joined, t.min_hosts - self.not_idle))
        return max(young, every)

    def note(self, t: Target) -> str:
        """The decision's words: ``kept warm: min_idle 2: 1 ready, 3 held, 1 coming, 1 idle kept from return``."""
        if not (t.min_idle or t.min_hosts):
            return f"kept warm: {t.said}"
        kept = self.keep(t)
        return (f"kept warm: {t.said}: {self.ready} ready, {self.held} held, {self.coming} coming"
                + (f", {kept} idle kept from return" if kept else ""))


def census(targets: Sequence[Target], view: SupplyView, providers: Mapping[str, ProviderRecord], now: float,
           order_timeout: float, limits: Mapping[str, ProviderLimits], returning: Mapping[str, set[str]],
           ordered: Iterable[tuple[str, Order]] = ()) -> list[Count]:
    """Each target's hosts; ``returning``: machines on their way back by provider (counted by no rule);
    ``ordered``: this round's orders so far, held (and coming, if warm) from now on."""
    counts = [Count() for _ in targets]
    if not targets:
        return counts
    keeps = {name for name, rec in providers.items() if rec.status in KEEPING}
    seen: dict[str, int] = {}
    nodes = view.nodes
    for inst in view.instances.values():
        seen[inst.request_id] = seen.get(inst.request_id, 0) + 1
        state = inst.history.state or "requested"
        p = inst.provider
        if state not in HOLDING or p not in keeps or (inst.node and inst.node in nodes) \
                or inst.machine_id in returning.get(p, ()):
            continue
        lim = limits.get(p, UNLIMITED)
        since = inst.launched_at if inst.launched_at is not None else inst.seen_at
        aged = lim.max_lifetime is not None and now - since >= lim.max_lifetime
        warm_coming = state in ARRIVING and is_warm(inst.item_id)
        for t, c in zip(targets, counts):
            if not t.holds(p, inst.template):
                continue
            if state == "idle":
                c.idle.append(inst)
            else:
                c.not_idle += 1
                c.joined += state == "joined"
            if aged:
                continue
            c.held += 1
            c.ready += state in ("joined", "idle")
            c.idle_young += state == "idle"
            c.coming += warm_coming

    def add(provider: str, template: str | None, item: str, n: int) -> None:
        if n <= 0 or provider not in keeps or _named(item):
            return
        for t, c in zip(targets, counts):
            if t.holds(provider, template):
                c.held += n
                c.not_idle += n
                c.coming += n if is_warm(item) else 0

    for req in view.requests.values():
        if req.action == "request" and req.supply == "hosts" and unresolved(req, now, order_timeout):
            add(req.provider, req.template, req.item_id, req.count - seen.get(req.id, 0))
    for order in view.orders.values():
        o = order.order
        if o.supply == "hosts" and pending(order, now, order_timeout):
            add(order.provider, o.template, o.item_id, o.count)
    for provider, o in ordered:
        if o.action == "request" and o.supply == "hosts":
            add(provider, o.template, o.item_id, o.count)
    return counts


def kept(targets: Sequence[Target], counts: Sequence[Count], due: Mapping[str, InstanceRecord],
         limits: Mapping[str, ProviderLimits], now: float) -> set[str]:
    """The keys of the hosts in ``due`` (idle hosts reclaim would give back now) that warm capacity keeps.

    Each scope, most specific first, keeps ``Count.keep`` of its idle hosts: those kept by a scope before
    it count first; then the youngest, due or not, those past their ``max_lifetime`` last. A host not due
    stays this round in any case, so one older than those kept goes back once it is due. Always the
    youngest, not first those that stay anyway: a scheduler that holds idle hosts ready for warm capacity
    (the Slurm bridge's dynamic nodes) holds the youngest, and an idle host it holds must not be the one
    given back while an older one that just went idle is kept.
    """
    chosen: set[str] = set()
    for t, c in zip(targets, counts):
        k = c.keep(t) - sum(1 for i in c.idle if i.key in chosen)
        if k <= 0:
            continue
        candidates = [i for i in c.idle if i.key not in chosen]
        candidates.sort(key=lambda i: (_aged(i, limits, now), -_since(i), i.key))
        chosen.update(i.key for i in candidates[:k])
    return {key for key in chosen if key in due}


def _since(inst: InstanceRecord) -> float:
    return inst.launched_at if inst.launched_at is not None else inst.seen_at


def _aged(inst: InstanceRecord, limits: Mapping[str, ProviderLimits], now: float) -> bool:
    lim = limits.get(inst.provider, UNLIMITED)
    return lim.max_lifetime is not None and now - _since(inst) >= lim.max_lifetime


def targets_of(decisions: Iterable[Decision]) -> dict[str, int]:
    """Per warm decision: the hosts it wanted on their way (its need beyond what was coming, plus that), as a
    demand item's count is read against its decision (``policy.due``, the simulator's timing)."""
    return {d.item: d.need + d.in_flight for d in decisions if is_warm(d.item)}
