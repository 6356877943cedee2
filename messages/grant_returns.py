"""The facts that end a units return, whole or partial, as every owner writes them.

A return may give back all of a grant or part of it (``GrantRecord.returning``
units). Done, a whole grant is ``returned`` and a partial one goes back to
``granted`` holding the rest; never completed, a whole grant becomes an
orphan and a partial one stays ``granted`` (its other units are in use or
wanted). The live owner (``actors/provider.py``) and the simulated one
(``sim/owner.py``) write these same facts.
"""

from __future__ import annotations

from messages.facts import GrantChanged
from messages.records import GrantRecord


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
