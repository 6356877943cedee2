"""The facts that begin and end a return.

Its intent (``request_planned``) and, in the same batch, each host or grant
moved to ``return_planned`` under the new request. A record already in
``return_planned`` (its last return failed) is written again too: it then
names the new request, so the failed one is planned again once, never again
while its successor is under way.

A units return may give back all of a grant or part of it
(``GrantRecord.returning`` units). Done, a whole grant is ``returned`` and a
partial one goes back to ``granted`` holding the rest; never completed, a
whole grant becomes an orphan and a partial one stays ``granted`` (its other
units are in use or wanted).
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
            *(InstanceChanged.to("return_planned", m, request_id=request_id, reason=reason) for m in machines),
        ]
    resource = grants[next(iter(parts))].resource
    return [
        RequestPlanned(action="return", supply="units", order_id=order_id, resource=resource,
                       count=sum(parts.values()), grants=list(parts)),
        *(GrantChanged(kind="grant_return_planned", grant_id=g, resource=grants[g].resource, state="return_planned",
                       request_id=request_id, count=n) for g, n in parts.items()),
    ]


def given_back(grant: GrantRecord, request_id: str) -> GrantChanged:
    """The fact of a units return done: the grant is back, or (a partial return) keeps the rest."""
    if grant.partial_return:
        return GrantChanged(kind="grant_part_returned", grant_id=grant.id, resource=grant.resource, state="granted",
                            count=grant.returning, request_id=request_id)
    return GrantChanged(kind="grant_returned", grant_id=grant.id, resource=grant.resource, state="returned",
                        count=grant.count, request_id=request_id)


def return_lost(grant: GrantRecord, request_id: str, why: str) -> GrantChanged:
    """The fact of a units return that never completed: an orphan if whole; a partial one stays granted."""
    if grant.partial_return:
        return GrantChanged(kind="grant_return_timed_out", grant_id=grant.id, resource=grant.resource,
                            state="granted", request_id=request_id, reason=why, count=grant.returning)
    return GrantChanged(kind="grant_orphan_found", grant_id=grant.id, resource=grant.resource, state="orphaned",
                        request_id=request_id, reason=why, count=grant.count)
