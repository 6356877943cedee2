"""Supply in flight for a demand item (DESIGN §6).

The scheduler's count is unmet need beyond what the cluster already has, so
the planner subtracts what is already on its way: orders not yet taken up,
requests not finished, hosts not yet joined, and hosts joined (units
granted) so recently that the scheduler's numbers may not show them yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from messages.records import GrantRecord, InstanceRecord, OrderRecord, RequestRecord
from messages.states import REQUEST

#: Instance states that are coming but not yet usable by the scheduler.
ARRIVING = frozenset({"requested", "provisioning", "running"})
#: States a joined host passes through while it serves the cluster.
SERVING = frozenset({"joined", "idle", "busy"})


@dataclass(frozen=True)
class SupplyView:
    orders: Mapping[str, OrderRecord]
    requests: Mapping[str, RequestRecord]
    instances: Mapping[str, InstanceRecord]
    grants: Mapping[str, GrantRecord]


def in_flight(view: SupplyView, now: float, join_grace: float, order_timeout: float) -> dict[str, int]:
    """Per demand item id: how much supply is on its way for it."""
    out: dict[str, int] = {}
    by_request: dict[str, list[InstanceRecord]] = {}
    for inst in view.instances.values():
        by_request.setdefault(inst.request_id, []).append(inst)

    def add(item: str, n: int) -> None:
        if item and n > 0:
            out[item] = out.get(item, 0) + n

    for order in view.orders.values():
        o = order.order
        if o.action != "request":
            continue
        if not order.request_ids and now - order.at < order_timeout:
            add(o.item_id, o.count)
    for req in view.requests.values():
        if req.action != "request":
            continue
        open_ = req.state not in REQUEST.terminal
        if req.supply == "hosts":
            seen = by_request.get(req.id, [])
            coming = sum(1 for i in seen if i.state in ARRIVING)
            recent = sum(
                1
                for i in seen
                if i.state in SERVING and i.joined_at is not None and now - i.joined_at < join_grace
            )
            unseen = max(0, req.count - len(seen)) if open_ else 0
            add(req.item_id, coming + recent + unseen)
        else:
            grant = view.grants.get(req.id)
            if open_:
                add(req.item_id, req.count)
            elif grant is not None and grant.state == "granted" and grant.granted_at is not None:
                if now - grant.granted_at < join_grace:
                    add(req.item_id, grant.count)
    return out
