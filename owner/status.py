"""The facts a status answer adds: for one request, its machines or grant, then the request itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, Payload, RequestChanged
from messages.records import GrantRecord, InstanceRecord, RequestRecord
from messages.scripts import Status
from messages.states import INSTANCE, REQUEST, InstanceState
from owner.returns import given_back

#: A machine's result in a status answer, as an instance state.
RESULT_STATE: dict[str, InstanceState] = {"executing": "provisioning", "succeed": "running", "fail": "failed"}


def status_facts(provider: str, instances: Mapping[str, InstanceRecord], grants: Mapping[str, GrantRecord],
                 req: RequestRecord, status: Status, message: str, machines: Sequence[Any],
                 granted: int | None) -> list[Payload]:
    """What one request's status says: its machines or grant, then the request itself.

    ``machines`` carry ``machine_id``, ``name``, ``template``, ``result`` and
    ``launched_at`` (and may carry ``private_ip`` and ``message``).
    """
    out: list[Payload] = []
    if req.action == "request" and req.supply == "hosts":
        out += _machines(provider, instances, req, machines)
    elif req.action == "return" and req.supply == "hosts":
        out += _returned_machines(provider, instances, req, status, message, machines)
    elif req.action == "request" and status != "running":
        g = grants.get(req.id)
        if g is not None and g.state == "requested":
            if granted:
                out.append(GrantChanged(kind="grant_granted", grant_id=g.id, resource=g.resource,
                                        state="granted", count=granted, request_id=req.id))
            else:
                out.append(GrantChanged(kind="grant_failed", grant_id=g.id, resource=g.resource,
                                        state="failed", request_id=req.id, reason=message))
    elif req.action == "return" and status == "complete":
        out += [given_back(grants[g], req.id) for g in req.grants if g in grants and grants[g].state == "returning"]
    elif req.action == "return" and status == "complete_with_error":
        # As for hosts: what did not go back is planned again (under a new token); a grant that
        # did go back after all is found so by its next return or by ``list``.
        out += [GrantChanged(kind="grant_return_planned", grant_id=g, resource=gr.resource, state="return_planned",
                             count=gr.returning, request_id=req.id, reason=message or "return failed")
                for g in req.grants if (gr := grants.get(g)) is not None and gr.state == "returning"]
    if req.state in REQUEST.terminal:
        return out
    if status == "running" and req.state == "submitted":
        out.append(RequestChanged(kind="request_status", request_id=req.id, state="running", reason=message))
    elif status != "running":
        out.append(RequestChanged(kind="request_completed", request_id=req.id, state=status, reason=message))
    return out


def _machines(provider: str, instances: Mapping[str, InstanceRecord], req: RequestRecord,
              machines: Sequence[Any]) -> list[Payload]:
    out: list[Payload] = []
    nodes = _nodes(provider, instances, req, machines) if req.names else {}
    for m in machines:
        state = RESULT_STATE[m.result]
        inst = instances.get(f"{provider}/{m.machine_id}")
        if inst is None:
            out.append(InstanceSeen(machine_id=m.machine_id, name=m.name or m.machine_id, request_id=req.id,
                                    template=m.template or req.template, state=state, launched_at=m.launched_at,
                                    private_ip=getattr(m, "private_ip", None), node=nodes.get(m.machine_id)))
        elif inst.state != state and INSTANCE.allowed(inst.state, state) and inst.state in (
                "requested", "provisioning"):
            out.append(InstanceChanged.to(state, m.machine_id,
                                          request_id=req.id, reason=getattr(m, "message", "")))
    return out


def _nodes(provider: str, instances: Mapping[str, InstanceRecord], req: RequestRecord,
           machines: Sequence[Any]) -> dict[str, str]:
    """Which of a named request's names each machine seen for the first time stands for.

    A machine the provider named after one of the names stands for it; the others take the names left, in
    the request's order (a provider that cannot name its hosts, such as an LSF plugin). The names machines
    already seen stand for are taken.
    """
    taken = {inst.node for m in machines if (inst := instances.get(f"{provider}/{m.machine_id}")) is not None
             and inst.node}
    new = [m for m in machines if f"{provider}/{m.machine_id}" not in instances]
    out: dict[str, str] = {}
    for m in new:
        if m.name in req.names and m.name not in taken:
            out[m.machine_id] = m.name
            taken.add(m.name)
    left = iter(n for n in req.names if n not in taken)
    for m in new:
        if m.machine_id not in out:
            name = next(left, None)
            if name is None:
                break
            out[m.machine_id] = name
    return out


def _returned_machines(provider: str, instances: Mapping[str, InstanceRecord], req: RequestRecord, status: str,
                       message: str, machines: Sequence[Any]) -> list[Payload]:
    out: list[Payload] = []
    results = {m.machine_id: m for m in machines}
    for machine_id in req.machines:
        inst = instances.get(f"{provider}/{machine_id}")
        if inst is None or inst.state != "returning":
            continue
        m = results.get(machine_id)
        if (m is not None and m.result == "succeed") or (m is None and status == "complete"):
            out.append(InstanceChanged.to("returned", machine_id,
                                          request_id=req.id))
        elif (m is not None and m.result == "fail") or status == "complete_with_error":
            out.append(InstanceChanged.to("return_planned", machine_id,
                                          request_id=req.id,
                                          reason=(getattr(m, "message", "") if m else message) or "return failed"))
    return out
