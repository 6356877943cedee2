"""Builders for policy tests: provider records, and state fed through a real projection."""

from __future__ import annotations

from messages.demand import DemandSnapshot
from messages.description import Pool, ProviderDescription, Template
from messages.facts import InstanceChanged, InstanceSeen, Order, RequestChanged, RequestPlanned, make_fact
from messages.records import ProviderRecord
from policy.supply import SupplyView
from state.projection import Projection

T0 = 1_700_000_000.0


def hosts(name: str, priority: int = 0, price: float = 1.0, max_number: int = 10, ncpus: int = 8,
          templates: list[Template] | None = None, **kw) -> ProviderRecord:
    return ProviderRecord(name=name, owner="a", description=ProviderDescription(
        name=name, kind="hosts", priority=priority, cost_per_hour=price,
        templates=templates or [Template(id=f"{name}-t", max_number=max_number,
                                         attributes={"ncpus": ncpus, "type": "X86_64"})],
        **kw))


def units(name: str, capacity: int = 10, price: float = 1.0, **kw) -> ProviderRecord:
    return ProviderRecord(name=name, owner="a", description=ProviderDescription(
        name=name, kind="units", cost_per_hour=price, pools=[Pool(resource="vcs", capacity=capacity)], **kw))


def view(p: Projection) -> SupplyView:
    return SupplyView(orders=p.orders, requests=p.requests, instances=p.instances, grants=p.grants, nodes=p.nodes)


def demand(*items, seq: int = 1) -> DemandSnapshot:
    return DemandSnapshot(seq=seq, items=list(items))


def feed(p: Projection, provider: str, *payloads, now: float = T0, ids: list[str] | None = None) -> None:
    """Apply payloads as committed facts of ``provider`` at ``now``."""
    for i, payload in enumerate(payloads):
        p.apply(make_fact(payload, provider=provider, now=now, fact_id=ids[i] if ids else None)
                .model_copy(update={"seq": p.seq + 1}))


def failed_request(p: Projection, provider: str, template: str, rid: str, at: float, outcome: str = "capacity",
                   count: int = 1, item: str = "d", state: str = "failed") -> None:
    """An order taken up as a request that then failed (or timed out) at ``at``."""
    feed(p, provider, Order(action="request", supply="hosts", item_id=item, template=template, count=count),
         now=at - 1, ids=[f"o-{rid}"])
    feed(p, provider, RequestPlanned(action="request", supply="hosts", order_id=f"o-{rid}", item_id=item,
                                     template=template, count=count), now=at - 1, ids=[rid])
    kind = "request_failed" if state == "failed" else "request_timed_out"
    feed(p, provider, RequestChanged(kind=kind, request_id=rid, state=state, outcome=outcome), now=at)


def completed_request(p: Projection, provider: str, template: str, rid: str, at: float) -> None:
    feed(p, provider, RequestPlanned(action="request", supply="hosts", template=template, count=1),
         now=at - 1, ids=[rid])
    feed(p, provider, RequestChanged(kind="request_submitted", request_id=rid, state="submitted",
                                     provider_request_id=f"x-{rid}"), now=at - 1)
    feed(p, provider, RequestChanged(kind="request_completed", request_id=rid, state="complete"), now=at)


def idle_host(p: Projection, provider: str, machine: str, template: str, launched: float, idle_at: float,
              rid: str | None = None) -> None:
    """A host launched at ``launched``, joined, and idle since ``idle_at``."""
    rid = rid or f"r-{machine}"
    feed(p, provider, RequestPlanned(action="request", supply="hosts", template=template, count=1),
         now=launched, ids=[rid])
    feed(p, provider, InstanceSeen(machine_id=machine, name=f"n-{machine}", request_id=rid, state="running",
                                   launched_at=launched, template=template), now=launched)
    feed(p, provider, InstanceChanged(kind="instance_joined", machine_id=machine, state="joined"), now=launched)
    feed(p, provider, InstanceChanged(kind="instance_idle", machine_id=machine, state="idle"), now=idle_at)
