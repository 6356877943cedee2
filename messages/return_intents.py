"""The facts of a return's intent, as every owner writes them.

The intent (``request_planned``) and, in the same batch, each host or grant
moved to ``return_planned`` under the new request. A record already in
``return_planned`` (its last return failed) is written again too: it then
names the new request, so the failed one is planned again once, never again
while its successor is under way. The live owner (``actors/provider.py``)
and the simulated one (``sim/owner.py``) both write these.
"""

from __future__ import annotations

from collections.abc import Mapping

from messages.facts import GrantChanged, InstanceChanged, Payload, RequestPlanned
from messages.records import GrantRecord


def return_intent(grants: Mapping[str, GrantRecord], machines: list[str], parts: Mapping[str, int],
                  request_id: str, order_id: str, reason: str) -> list[Payload]:
    """``machines`` (hosts) or ``parts`` (grant id -> units it gives back: all it holds, or part)."""
    if machines:
        return [
            RequestPlanned(action="return", supply="hosts", order_id=order_id, count=len(machines), machines=machines),
            *(InstanceChanged(kind="instance_return_planned", machine_id=m, state="return_planned",
                              request_id=request_id, reason=reason) for m in machines),
        ]
    resource = grants[next(iter(parts))].resource
    return [
        RequestPlanned(action="return", supply="units", order_id=order_id, resource=resource,
                       count=sum(parts.values()), grants=list(parts)),
        *(GrantChanged(kind="grant_return_planned", grant_id=g, resource=grants[g].resource, state="return_planned",
                       request_id=request_id, count=n) for g, n in parts.items()),
    ]
