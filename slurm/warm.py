"""Warm capacity on dynamic nodes: which idle nodes the bridge holds ready, undrained, for the warm rules.

A dynamic node that idles counts as busy in the scheduler's view until it
is drained (``slurm.drain_after``): Slurm may start work on it any moment,
so only a drained node may go back. For a warm host that is wrong twice:
the daemon counts a host *ready* only when it is joined or idle, so a warm
host listed busy makes it order more warm hosts; and a drained node takes
no work, so the burst it was kept for waits for new hosts after all.

So, of each warm scope's idle dynamic nodes (undrained, or drained by the
bridge for idling), the bridge *holds* as many as its rules keep (``policy.warm``): enough for ``min_idle`` ready,
and for ``min_hosts`` held counting the scope's other hosts, the youngest
first, a host past its provider's ``max_lifetime`` never (the daemon orders
its successor), as the daemon's return side keeps them. A held node is
listed idle (the daemon counts it ready, and keeps it from return) and is
not drained. A rule's hold ends ``lookahead`` before its schedule closes,
so a node it held goes through the drain before the daemon's rule lets it
go. A held node the bridge had drained is resumed (``scontrol update
state=resume``): the daemon keeps the youngest idle hosts, drained or not,
so the bridge holds the same ones. The other idle nodes idle as before:
busy, then drained.

Pure: the rules, the facts and ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from config.models import Config
from messages.records import InstanceRecord
from policy.settings import warm_policy
from policy.supply import pending, unresolved
from policy.warm import WarmPolicy
from state.projection import Projection

#: Host states a rule counts as the scope's hosts (coming, up, idle or busy).
HOLDING = frozenset({"requested", "provisioning", "running", "joined", "idle", "busy"})


@dataclass(frozen=True)
class WarmHold:
    policy: WarmPolicy = field(default_factory=WarmPolicy)
    #: provider -> its ``max_lifetime`` (seconds), where it has one
    lifetimes: Mapping[str, float] = field(default_factory=dict)
    #: How long before a rule's schedule closes its hold ends.
    lookahead: float = 0.0
    #: How long a request order no owner took up counts as coming (``policy.request_timeout``).
    order_timeout: float = 900.0

    @classmethod
    def of(cls, cfg: Config) -> WarmHold:
        """The config's warm rules; a hold ends two sync rounds before a schedule closes."""
        lifetimes = {p.name: p.policy.max_lifetime for p in cfg.providers if p.policy.max_lifetime is not None}
        lookahead = 2 * cfg.slurm.sync_every if cfg.slurm is not None else 0.0
        return cls(warm_policy(cfg.policy, cfg.providers), lifetimes, lookahead, cfg.policy.request_timeout)

    def held(self, idle: Iterable[InstanceRecord], p: Projection, now: float) -> set[str]:
        """The names of the hosts of ``idle`` (those of idle dynamic nodes, undrained or drained for idling) to
        hold ready. A scope's other hosts count toward its ``min_hosts`` as the daemon counts them: coming, up,
        idle or busy, and those of its open requests and pending orders not seen yet."""
        idle = [i for i in idle if not self._aged(i, now)]
        if not idle or not self.policy.rules:
            return set()
        candidates = {i.host for i in idle}
        others: list[tuple[str, str | None, int]] = []
        seen: dict[str, int] = {}
        for inst in p.instances.values():
            seen[inst.request_id] = seen.get(inst.request_id, 0) + 1
            if inst.state in HOLDING and not inst.node and inst.host not in candidates and not self._aged(inst, now):
                others.append((inst.provider, inst.template, 1))
        for req in p.requests.values():
            if req.action == "request" and req.supply == "hosts" and not req.names \
                    and unresolved(req, now, self.order_timeout):
                others.append((req.provider, req.template, req.count - seen.get(req.id, 0)))
        for order in p.orders.values():
            o = order.order
            if o.supply == "hosts" and not o.names and pending(order, now, self.order_timeout):
                others.append((order.provider, o.template, o.count))
        hold: set[str] = set()
        for t, later in zip(self.policy.targets(now), self.policy.targets(now + self.lookahead)):
            min_idle, min_hosts = min(t.min_idle, later.min_idle), min(t.min_hosts, later.min_hosts)
            mine = [i for i in idle if t.holds(i.provider, i.template)]
            rest = sum(max(0, n) for provider, template, n in others if t.holds(provider, template))
            k = min(len(mine), max(min_idle, min_hosts - rest)) - sum(1 for i in mine if i.host in hold)
            if k <= 0:
                continue
            free = sorted((i for i in mine if i.host not in hold), key=lambda i: (-_since(i), i.key))
            hold.update(i.host for i in free[:k])
        return hold

    def _aged(self, inst: InstanceRecord, now: float) -> bool:
        lifetime = self.lifetimes.get(inst.provider)
        return lifetime is not None and now - _since(inst) >= lifetime


def _since(inst: InstanceRecord) -> float:
    return inst.launched_at if inst.launched_at is not None else inst.seen_at
