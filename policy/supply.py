"""Supply in flight for a demand item (docs/scheduler-interface.md), bundles riding on it, and supply held per provider.

The scheduler's count is unmet need beyond what the cluster already has, so
the planner subtracts what is already on its way: orders not yet taken up,
requests not finished, hosts not yet joined, and hosts joined (units
granted) so recently that the scheduler's numbers may not show them yet.

A request whose outcome is unknown (its script timed out and could not be
looked up by token, as with LSF-style scripts) counts as if it were still
open until ``request_timeout`` after it was planned: re-ordering sooner
could provision the same need twice. An order no owner has taken up within
``request_timeout`` never will be (owners refuse stale orders), so it stops
counting then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from messages.records import GrantRecord, InstanceRecord, NodeRecord, OrderRecord, RequestRecord
from messages.states import GRANT, INSTANCE, REQUEST, SERVING

#: Instance states that are coming but not yet usable by the scheduler.
ARRIVING = frozenset({"requested", "provisioning", "running"})


@dataclass(frozen=True)
class SupplyView:
    orders: Mapping[str, OrderRecord]
    requests: Mapping[str, RequestRecord]
    instances: Mapping[str, InstanceRecord]
    grants: Mapping[str, GrantRecord]
    #: A scheduler's named nodes (``policy.nodes``).
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)


def pending(order: OrderRecord, now: float, order_timeout: float) -> bool:
    """A request order no owner has taken up yet, and that one still may."""
    return order.order.action == "request" and not order.request_ids and now - order.at <= order_timeout


def unresolved(req: RequestRecord, now: float, timeout: float) -> bool:
    """A request that may still bring supply: open, or failed with an unknown outcome not yet timed out."""
    if req.state not in REQUEST.terminal:
        return True
    return req.state == "failed" and req.outcome == "timeout" and now - req.created_at <= timeout


def in_flight(view: SupplyView, now: float, join_grace: float, order_timeout: float) -> dict[str, int]:
    """Per demand item id: how much supply is on its way for it."""
    out: dict[str, int] = {}
    seen, flying = _hosts_by_request(view.instances, now, join_grace)

    def add(item: str, n: int) -> None:
        if item and n > 0:
            out[item] = out.get(item, 0) + n

    for order in view.orders.values():
        if pending(order, now, order_timeout):
            add(order.order.item_id, order.order.count)
    for req in view.requests.values():
        if req.action != "request":
            continue
        open_ = unresolved(req, now, order_timeout)
        if req.supply == "hosts":
            unseen = max(0, req.count - seen.get(req.id, 0)) if open_ else 0
            add(req.item_id, flying.get(req.id, 0) + unseen)
        else:
            grant = view.grants.get(req.id)
            if open_:
                add(req.item_id, req.count)
            elif grant is not None and grant.state == "granted" and grant.granted_at is not None:
                if now - grant.granted_at < join_grace:
                    add(req.item_id, grant.count)
    return out


def _hosts_by_request(instances: Mapping[str, InstanceRecord], now: float,
                      join_grace: float) -> tuple[dict[str, int], dict[str, int]]:
    """Per request id: how many of its hosts were seen, and how many are in flight (coming up, or
    joined within ``join_grace``). One pass over the instances: rounds ask it of every host, often."""
    seen: dict[str, int] = {}
    flying: dict[str, int] = {}
    for inst in instances.values():
        rid = inst.request_id
        seen[rid] = seen.get(rid, 0) + 1
        state = inst.history.state
        if state is None or state in ARRIVING or (
                state in SERVING and inst.joined_at is not None and now - inst.joined_at < join_grace):
            flying[rid] = flying.get(rid, 0) + 1
    return seen, flying


def bundles_in_flight(view: SupplyView, now: float, join_grace: float, order_timeout: float) -> dict[str, int]:
    """Per bundle item id: how many of its bundles ride on hosts on their way.

    A packed order says which bundles its hosts carry (``Order.loads``).
    While no owner has taken it up, all of them are in flight; once taken up,
    its request's hosts in flight (coming, joined within ``join_grace``, or
    not seen yet) carry their share: an item's bundles times the hosts in
    flight over the hosts asked, rounded up, since which host carries what
    is the scheduler's to decide once they join. A repeated snapshot
    therefore orders no more hosts for the same bundles.

    The request finds its order by ``order_id``, so the view must keep the
    orders of requests that may still bring hosts.
    """
    out: dict[str, int] = {}

    def add(bundles: dict[str, int], flying: int, asked: int) -> None:
        for item, n in bundles.items():
            share = n if flying >= asked else -(-n * flying // asked)
            if share > 0:
                out[item] = out.get(item, 0) + share

    packed: dict[str, OrderRecord] = {}
    for order in view.orders.values():
        if order.order.loads:
            packed[order.id] = order
            if pending(order, now, order_timeout):
                add(order.order.bundles, 1, 1)
    if not packed:
        return out
    seen, flying = _hosts_by_request(view.instances, now, join_grace)
    for req in view.requests.values():
        ordered = packed.get(req.order_id)
        if ordered is None or req.action != "request" or req.count <= 0:
            continue
        unseen = max(0, req.count - seen.get(req.id, 0)) if unresolved(req, now, order_timeout) else 0
        add(ordered.order.bundles, flying.get(req.id, 0) + unseen, req.count)
    return out


#: (provider, supply kind, template id or resource name)
HeldKey = tuple[str, str, str]


def held(view: SupplyView, now: float, order_timeout: float) -> dict[HeldKey, int]:
    """Hosts and units held or on their way, per provider and template (or resource).

    What capacity, per-provider caps and the budget are measured against:
    instances not yet returned or lost, requested hosts not seen yet, grants
    not returned, and orders not taken up yet.
    """
    out: dict[HeldKey, int] = {}

    def add(provider: str, supply: str, key: str | None, n: int) -> None:
        if n > 0:
            k = (provider, supply, key or "")
            out[k] = out.get(k, 0) + n

    seen: dict[str, int] = {}
    ended = INSTANCE.terminal
    for inst in view.instances.values():  # as add(provider, "hosts", template, 1), inline: every host, often
        if inst.history.state not in ended:  # None, not started yet, is "requested": held
            k = (inst.provider, "hosts", inst.template or "")
            out[k] = out.get(k, 0) + 1
        seen[inst.request_id] = seen.get(inst.request_id, 0) + 1
    for req in view.requests.values():
        if req.action == "request" and req.supply == "hosts" and unresolved(req, now, order_timeout):
            add(req.provider, "hosts", req.template, req.count - seen.get(req.id, 0))
    for grant in view.grants.values():
        if grant.state not in GRANT.terminal:
            add(grant.provider, "units", grant.resource, grant.count if grant.state != "requested" else grant.requested)
    for order in view.orders.values():
        if pending(order, now, order_timeout):
            o = order.order
            add(order.provider, o.supply, o.template or o.resource, o.count)
    return out


#: Instance states of hosts the provider may not have started yet (or not said so).
NOT_RUNNING = frozenset({"requested", "provisioning"})
#: Seconds by which a provider's clock (an instance's launch time) may differ from the daemon's.
SKEW = 60.0


def since_described(view: SupplyView, now: float, order_timeout: float,
                    described_at: Mapping[str, float]) -> dict[HeldKey, int]:
    """Per provider and template: hosts a quota measured at the provider's last ``describe`` (``described_at``,
    by provider) has not counted, less the hosts it counted that have ended since.

    Counted: orders not taken up, requested hosts not seen yet, hosts not started yet, and hosts launched
    after the describe (or so close before it that the clocks cannot tell). Given back: hosts launched before
    it that have ended since (returned or lost), whose vCPUs the quota has back. What counts against a
    quota left (``policy.sizing``); providers not in ``described_at`` are left out.
    """
    out: dict[HeldKey, int] = {}

    def add(provider: str, key: str | None, n: int) -> None:
        if n:
            k = (provider, "hosts", key or "")
            out[k] = out.get(k, 0) + n

    seen: dict[str, int] = {}
    ended = INSTANCE.terminal
    for inst in view.instances.values():
        seen[inst.request_id] = seen.get(inst.request_id, 0) + 1
        at = described_at.get(inst.provider)
        if at is None:
            continue
        state = inst.history.state
        before = inst.launched_at is not None and inst.launched_at < at - SKEW
        if state in ended:
            if before and inst.history[-2] > at:
                add(inst.provider, inst.template, -1)
        elif state is None or state in NOT_RUNNING or not before:
            add(inst.provider, inst.template, 1)
    for req in view.requests.values():
        if (req.provider in described_at and req.action == "request" and req.supply == "hosts"
                and unresolved(req, now, order_timeout)):
            add(req.provider, req.template, max(0, req.count - seen.get(req.id, 0)))
    for order in view.orders.values():
        if order.provider in described_at and pending(order, now, order_timeout) and order.order.supply == "hosts":
            add(order.provider, order.order.template, order.order.count)
    return out


def returning_machines(view: SupplyView) -> dict[str, set[str]]:
    """Per provider: the machines named by return orders no owner has finished with yet."""
    out: dict[str, set[str]] = {}
    for order in view.orders.values():
        o = order.order
        if o.action == "return" and o.machines and under_way(order, view):
            out.setdefault(order.provider, set()).update(o.machines)
    return out


def under_way(order: OrderRecord, view: SupplyView) -> bool:
    """An order no owner has taken up, or one of whose requests is still under way."""
    return not order.request_ids or any(
        view.requests[r].state not in REQUEST.terminal for r in order.request_ids if r in view.requests)
