"""What an owner gives back again on its own: failed returns, machines that failed to start, orphans.

The live owner (``actors/provider.py``) and the simulated one (``sim/owner.py``)
both ask this, so the simulator returns exactly what the daemon would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from messages.records import GrantRecord, InstanceRecord, RequestRecord
from messages.states import REQUEST

AGAIN = "its last return failed: return again"
ORPHANS = "orphans: return"
#: A machine that failed to start may still be held, and billed, until it is given back.
FAILED = "failed to start: give it back"
#: Returns planned for one host or grant before its owner stops trying and reports it: a provider
#: that never gives it back (it does not know the id, or refuses) must not be asked for ever.
MAX_RETURNS = 5


def given_up(returns: int) -> bool:
    """True when a record's returns have failed so often that only an operator may try again."""
    return returns >= MAX_RETURNS


def pause_after(returns: int, pause: float, cap: float) -> float:
    """How long after the last failed return the next is planned: doubling with each, up to ``cap``."""
    return min(cap, pause * 2 ** max(0, returns - 1))


def settled(requests: Mapping[str, RequestRecord], request_id: str, now: float, pause: float) -> bool:
    """True when the request behind a record ended without settling it, a pause ago (or never existed).

    Any end counts: failed, timed out, or complete with an error that left the record behind.
    """
    req = requests.get(request_id)
    if req is None:
        return True
    if req.state not in REQUEST.terminal:
        return False
    return now - (req.history.since(req.state) or 0.0) >= pause


def returns_due(
    instances: Iterable[InstanceRecord],
    grants: Iterable[GrantRecord],
    requests: Mapping[str, RequestRecord],
    now: float,
    pause: float,
    orphans_go: bool,
    cap: float = float("inf"),
) -> tuple[dict[str, list[str]], dict[tuple[str, str], dict[str, int]]]:
    """Machines by reason, and grants by (resource, reason) with the units each gives back.

    ``instances`` and ``grants`` are one provider's records still in motion. A record whose
    returns keep failing is planned again after a pause that doubles with each (up to ``cap``),
    and no more once it has ``MAX_RETURNS`` of them (see ``given_up``).
    """
    machines: dict[str, list[str]] = {}
    for inst in instances:
        if given_up(inst.returns):
            continue
        if inst.state == "return_planned" and settled(requests, inst.return_request_id, now,
                                                      pause_after(inst.returns, pause, cap)):
            machines.setdefault(AGAIN, []).append(inst.machine_id)
        elif inst.state == "failed" and settled(requests, inst.request_id, now, pause):
            machines.setdefault(FAILED, []).append(inst.machine_id)
        elif inst.state == "orphaned" and orphans_go:
            machines.setdefault(ORPHANS, []).append(inst.machine_id)
    parts: dict[tuple[str, str], dict[str, int]] = {}
    for g in sorted(grants, key=lambda g: g.id):
        if given_up(g.returns):
            continue
        if g.state == "return_planned" and settled(requests, g.return_request_id, now,
                                                   pause_after(g.returns, pause, cap)):
            parts.setdefault((g.resource, AGAIN), {})[g.id] = g.returning or g.count
        elif g.state == "orphaned" and orphans_go and g.count:
            parts.setdefault((g.resource, ORPHANS), {})[g.id] = g.count
    return {reason: sorted(ids) for reason, ids in machines.items()}, parts
