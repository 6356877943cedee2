"""A scheduler's named nodes: one host per wanted name, and the hosts of names let go given back.

Slurm's power saving names the nodes it wants up (``ResumeProgram
cloud[1-4]``) and down (``SuspendProgram``); the bridge records each as a
``nodes_*`` fact and the projection keeps one ``NodeRecord`` per name, with
the order, request and host last made for it. A round then:

- orders a host for every wanted name that nothing covers: no host made for
  it that is coming, up or serving, no open request naming it, no order
  naming it that an owner may still take up. Names are grouped by provider
  and template, one order per group, within the same room as every other
  order (capacity, caps, cost and rate limits, cooldowns); a name left out
  for lack of room is ordered in a later round. The order carries the names,
  one per host, so a provider that can name its hosts does;
- gives back the host of every name no longer wanted (suspended, or given
  up on), as soon as it is up, joined or not: the scheduler has stopped
  counting on it.

A host lost after it joined is not replaced under the same resume: the
scheduler ran work on it and still thinks it runs there. A new host slipped
under the same name would hide the loss (the jobs would hang, or be said to
run where nothing runs); the bridge takes the node down instead, so its jobs
are requeued, and the scheduler resumes it again when it wants it. A host
lost before it joined is replaced: the scheduler is still waiting for it.

A wanted name's host is the scheduler's to power down, not the idle
reclaim's (``policy.reclaim`` leaves it alone).
"""

from __future__ import annotations

from collections.abc import Mapping

from messages.facts import Candidate, Chosen, Decision, Order, Rejected
from messages.records import NodeRecord
from messages.states import REQUEST, RETURNABLE, RETURNING
from policy.catalog import Catalog
from policy.sizing import Rooms
from policy.supply import SupplyView, pending

#: States of a host that stands for its name: on its way, up, or serving.
STANDS = frozenset({"requested", "provisioning", "running", "joined", "idle", "busy"})


def item_id(provider: str, template: str | None) -> str:
    """The decision item of one provider's named nodes of one template."""
    return f"nodes/{provider}/{template or '-'}"


def covered(node: NodeRecord, view: SupplyView, now: float, order_timeout: float) -> bool:
    """Whether something already stands for the name: a host, an open request, or an order still pending."""
    inst = view.instances.get(node.instance) if node.instance else None
    if inst is not None and inst.state in STANDS:
        return True
    if inst is not None and inst.state == "lost" and inst.joined_at is not None \
            and (inst.history.since("lost") or 0.0) >= node.since:
        return True  # lost with the scheduler's work on it: the scheduler takes the node down and resumes it anew
    req = view.requests.get(node.request) if node.request else None
    if req is not None and req.state not in REQUEST.terminal:
        return True
    order = view.orders.get(node.order) if node.order else None
    return order is not None and pending(order, now, order_timeout)


def given_up(node: NodeRecord, now: float) -> bool:
    """Whether the scheduler's wait for the node's host has run out (Slurm's ResumeTimeout since the resume).

    It takes the node down then, and a host made now would serve nothing: the name is ordered again only
    when the scheduler resumes it anew (which starts its wait afresh)."""
    return node.join_timeout is not None and now >= node.since + node.join_timeout


def wanted(view: SupplyView, now: float, order_timeout: float) -> dict[tuple[str, str | None], list[str]]:
    """(provider, template) -> the wanted names nothing covers, in name order."""
    out: dict[tuple[str, str | None], list[str]] = {}
    for node in sorted(view.nodes.values(), key=lambda n: n.name):
        if node.wanted and not given_up(node, now) and not covered(node, view, now, order_timeout):
            out.setdefault((node.provider, node.template), []).append(node.name)
    return out


def order_nodes(view: SupplyView, now: float, order_timeout: float, catalog: Catalog,
                rooms: Rooms | None) -> tuple[list[tuple[str, Order]], list[Decision]]:
    """Orders for the wanted names nothing covers, and one decision per (provider, template) with any."""
    orders: list[tuple[str, Order]] = []
    decisions: list[Decision] = []
    groups = wanted(view, now, order_timeout)
    standing: dict[tuple[str, str | None], int] = {}
    for node in view.nodes.values():
        if node.wanted and (node.provider, node.template) in groups and covered(node, view, now, order_timeout):
            standing[(node.provider, node.template)] = standing.get((node.provider, node.template), 0) + 1
    for (provider, template), names in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        item = item_id(provider, template)
        offer = catalog.offer(provider, template) if template else None
        why = ""
        n = 0
        if offer is None:
            why = "not described yet" if provider not in catalog.descriptions else \
                f"no template {template!r} in its description"
        elif rooms is None:
            why = "no room"
        else:
            why = rooms.blocked(offer) or ""
            if not why:
                room, limit = rooms.room(offer, "hosts")
                n = min(len(names), room)
                if n < len(names):
                    why = limit
                if n:
                    rooms.take(offer, "hosts", n)
        chosen = [Chosen(provider=provider, template=template, count=n)] if n else []
        rejected = [Rejected(provider=provider, reason=why)] if why else []
        if n:
            orders.append((provider, Order(action="request", supply="hosts", template=template, count=n,
                                           names=names[:n], item_id=item,
                                           reason=f"named nodes {_listed(names[:n])} wanted")))
        decisions.append(Decision(
            item=item, need=len(names), in_flight=standing.get((provider, template), 0), chosen=chosen,
            rejected=rejected, note=f"{len(names) - n} named nodes wait: {_listed(names[n:])}" if n < len(names)
            else "", candidates=[Candidate(provider=provider, template=template, count=n, why=why)]))
    return orders, decisions


def return_let_go(view: SupplyView, returning: Mapping[str, set[str]]) -> list[tuple[str, Order]]:
    """Returns of the hosts made for names no longer wanted (``returning``: machines already on their way back,
    by provider)."""
    by_provider: dict[str, list[str]] = {}
    for node in view.nodes.values():
        if node.wanted or not node.instance:
            continue
        inst = view.instances.get(node.instance)
        if inst is None or inst.node != node.name or inst.state not in RETURNABLE or inst.state in RETURNING \
                or inst.state in ("failed", "orphaned") or inst.machine_id in returning.get(inst.provider, ()):
            continue  # gone, on its way back, or left to the owner's own returns (failed and orphaned hosts)
        by_provider.setdefault(inst.provider, []).append(inst.machine_id)
    reasons = {node.provider: node.reason for node in view.nodes.values() if not node.wanted}
    return [(provider, Order(action="return", supply="hosts", machines=sorted(machines), count=len(machines),
                             reason=f"named node let go by the scheduler: {reasons.get(provider) or 'suspended'}"))
            for provider, machines in sorted(by_provider.items())]


def _listed(names: list[str], most: int = 8) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more
