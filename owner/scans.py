"""The orphan search and the reclaims check: what the provider holds, compared with the facts.

v2 providers answer ``list``; LSF-style ones cannot, so every request they
ever accepted is asked for its machines instead. What the facts do not know
becomes an orphan (given back or reported, per ``policy.orphans``); what the
facts hold and the provider no longer lists, or takes back, is lost.

Absence and strangeness are judged over several looks, kept in
``Sightings``: a machine of a request whose answer is not recorded yet is
unknown for a moment, and a cloud's list may miss a machine for a while, so
one is declared lost only after several lists over ``policy.lost_after``.
The ends a provider reported are not taken on trust either: a machine
declared lost that is listed again is adopted back (the scheduler uses it)
or treated as an orphan, and a machine still listed ``policy.return_grace``
after its return completed is an orphan again, returned under a new token.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable
from dataclasses import dataclass, field

from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, Payload
from messages.records import InstanceRecord
from messages.scripts import HeldGrant, Holdings, Machine, Reclaims, ScriptResult, StatusReport
from messages.states import HELD, INSTANCE, RETURNING
from owner.calls import Call, CheckReclaims, List, ScanStatus
from owner.effects import Effects, Notes, note, write
from owner.settings import OwnerSettings
from owner.units import with_totals
from state.projection import Projection

#: Orphan searches and reclaim checks run this many status polls apart (in live and simulated runs alike).
SCAN_EVERY_POLLS = 12

#: Lists in a row that must miss a machine the facts hold before it is declared lost (and
#: ``policy.lost_after`` must have passed since the first of them).
MISSES_TO_LOSE = 2


@dataclass(frozen=True)
class Sightings:
    """What earlier looks saw, kept by the driver between scans (memory only: a new owner looks afresh,
    which only delays a verdict)."""

    #: machine id -> when the orphan search first found it unknown to the facts
    unknown_since: dict[str, float] = field(default_factory=dict)
    #: machine id -> (when a list first missed a machine we hold, lists in a row that missed it)
    missing: dict[str, tuple[float, int]] = field(default_factory=dict)


def scan(p: Projection, s: OwnerSettings, now: float, busy: Collection[object]) -> Effects:
    """The calls of one scan: the orphan search, and the reclaims check of the hosts we hold."""
    calls: list[Call] = []
    if s.can("list"):
        if List not in busy:
            calls.append(Call(List(now), "list", {"tags": s.tags}))
    elif ScanStatus not in busy:
        ids = {r.provider_request_id: r.id for r in p.requests_by(s.name)
               if r.action == "request" and r.provider_request_id}
        if ids:
            calls.append(Call(ScanStatus(ids), "status", {"requests": [{"requestId": pid} for pid in ids]}))
    if s.kind == "hosts" and s.can("reclaims") and CheckReclaims not in busy:
        held = [{"name": i.name, "machineId": i.machine_id} for i in p.instances_in(*sorted(HELD), provider=s.name)]
        if held:
            calls.append(Call(CheckReclaims(), "reclaims", {"machines": held}))
    return Effects(calls=tuple(calls))


def listed(p: Projection, s: OwnerSettings, started: float, result: ScriptResult, now: float,
           seen: Sightings, in_cluster: Container[str] = (),
           busy: Collection[object] = ()) -> tuple[Effects, Sightings]:
    """A ``list`` answer, held against the facts.

    Unknown machines and grants become orphans; machines missing long enough are lost; a lost
    machine listed again is adopted back when the scheduler's view lists its name (``in_cluster``),
    else it is an orphan; a machine or grant still listed ``return_grace`` after its return
    completed is an orphan again. ``started``: when the list was taken (records younger than it
    are not judged by it).
    """
    if not result.ok or not isinstance(result.output, Holdings):
        return note("warning", f"provider {s.name}: orphan search failed: {result.reason}", repeats="list"), seen
    held = result.output
    payloads, unknown = _unknown_machines(p, s, held.machines, now, seen.unknown_since)
    payloads += _listed_again(p, s, held.machines, now, in_cluster)
    listed_ids = {m.machine_id for m in held.machines}
    mine = p.instances_in(*sorted(HELD), provider=s.name)
    ours = {i.machine_id for i in mine}
    missing = {k: v for k, v in seen.missing.items() if k not in listed_ids and k in ours}
    for inst in mine:
        if inst.machine_id in listed_ids or inst.seen_at >= started:
            continue  # listed, or recorded after the list was taken
        first, misses = missing.get(inst.machine_id, (started, 0))
        missing[inst.machine_id] = (first, misses + 1)
        if misses + 1 >= MISSES_TO_LOSE and now - first >= s.policy.lost_after:
            payloads.append(InstanceChanged.to("lost", inst.machine_id,
                                               reason=f"no longer listed by the provider since {misses + 1} lists over "
                                                      f"{now - first:.0f}s"))
            del missing[inst.machine_id]
    for g in held.grants:
        payloads += _listed_grant(p, s, g, started, now)
    return write(Notes("orphans"), with_totals(p, s, payloads, busy)), Sightings(unknown, missing)


def _listed_again(p: Projection, s: OwnerSettings, machines: Iterable[Machine], now: float,
                  in_cluster: Container[str]) -> list[Payload]:
    """Machines the facts say are gone that the provider still lists."""
    out: list[Payload] = []
    for m in machines:
        inst = p.instances.get(f"{s.name}/{m.machine_id}")
        if inst is None or m.result == "fail":
            continue
        if inst.state == "lost":
            if inst.host in in_cluster:
                out.append(InstanceChanged.to("joined", m.machine_id,
                                              reason="listed again by the provider, and in the scheduler's view: "
                                                     "adopted back"))
            else:
                out.append(InstanceChanged.to("orphaned", m.machine_id,
                                              reason="listed again by the provider after it was declared lost"))
        elif inst.state == "returned" and now - (inst.ended_at or now) >= s.policy.return_grace:
            out.append(InstanceChanged.to(
                "orphaned", m.machine_id,
                reason=f"still listed by the provider {now - (inst.ended_at or now):.0f}s after its return "
                       f"{inst.return_request_id} completed: the provider and the facts disagree"))
    return out


def _listed_grant(p: Projection, s: OwnerSettings, g: HeldGrant, started: float, now: float) -> list[Payload]:
    """One grant the provider holds for us, against the facts."""
    # Named as the provider knows it: a return must name it so, or the provider cannot tell which.
    key = g.token or g.request_id
    grant = p.grants.get(key) if key else None
    if grant is None:
        return [GrantChanged(kind="grant_orphan_found", grant_id=key or s.new_id("orphan"), resource=g.resource,
                             state="orphaned", count=g.count, reason="held by the provider, unknown to the facts")]
    if grant.state == "failed":
        return [GrantChanged(kind="grant_orphan_found", grant_id=grant.id, resource=grant.resource,
                             state="orphaned", count=g.count,
                             reason="recorded as failed, yet the provider still holds it")]
    if grant.state == "returned" and g.count and now - (grant.ended_at or now) >= s.policy.return_grace:
        return [GrantChanged(kind="grant_orphan_found", grant_id=grant.id, resource=grant.resource,
                             state="orphaned", count=g.count,
                             reason=f"still held by the provider {now - (grant.ended_at or now):.0f}s after its "
                                    "return completed: the provider and the facts disagree")]
    if grant.state == "granted" and g.count < grant.count and grant.history.changes[-1].at < started:
        # A partial return that timed out went back after all: the units stop counting and costing.
        return [GrantChanged(kind="grant_part_returned", grant_id=grant.id, resource=grant.resource,
                             state="granted", count=grant.count - g.count,
                             reason="the provider holds fewer units than recorded")]
    return []


def scanned(p: Projection, s: OwnerSettings, result: ScriptResult, now: float,
            seen: Sightings) -> tuple[Effects, Sightings]:
    """The orphan search by ``status`` (no ``list``): machines of our requests that no fact knows."""
    if not result.ok or not isinstance(result.output, StatusReport):
        return note("warning", f"provider {s.name}: orphan search by status failed: {result.reason}",
                    repeats="status"), seen
    machines = [m for st in result.output.requests for m in st.machines if m.result != "fail"]
    payloads, unknown = _unknown_machines(p, s, machines, now, seen.unknown_since)
    return write(Notes("orphans"), payloads), Sightings(unknown, seen.missing)


def reclaimed(p: Projection, s: OwnerSettings, result: ScriptResult) -> Effects:
    """Hosts the provider takes back (spot reclaims, machines it lost) are lost to us."""
    if not result.ok or not isinstance(result.output, Reclaims):
        return note("warning", f"provider {s.name}: reclaims check failed: {result.reason}", repeats="reclaims")
    payloads: list[Payload] = []
    by_name: dict[str, InstanceRecord] | None = None
    for r in result.output.machines:
        inst = p.instances.get(f"{s.name}/{r.machine_id}") if r.machine_id else None
        if inst is None and r.name:
            # Named as the provider knows it (not by a node name the scheduler gave it).
            if by_name is None:
                by_name = {(i := p.instances[k]).name: i for k in p.part(s.name).live_instances}
            inst = by_name.get(r.name)
        # A host we are giving back is the return's to settle: the provider taking it is no loss.
        if inst is not None and inst.state not in INSTANCE.terminal and inst.state not in RETURNING \
                and INSTANCE.allowed(inst.state, "lost"):
            payloads.append(InstanceChanged.to("lost", inst.machine_id,
                                               reason="taken back by the provider"))
    return write(Notes("reclaims"), payloads)


def _unknown_machines(p: Projection, s: OwnerSettings, machines: Iterable[Machine], now: float,
                      unknown_since: dict[str, float]) -> tuple[list[Payload], dict[str, float]]:
    """Machines the provider holds for us that no fact knows, once they stay unknown long enough.

    A machine of a request whose answer is not recorded yet is unknown for a
    moment; it becomes an orphan only when no request of ours is unresolved,
    or when it has stayed unknown for request_timeout.
    """
    unresolved = any(r.action == "request" for r in p.open(s.name).requests)
    out: list[Payload] = []
    since = dict(unknown_since)
    listed = set()
    for m in machines:
        listed.add(m.machine_id)
        inst = p.instances.get(f"{s.name}/{m.machine_id}")
        if inst is not None:
            if inst.state == "failed" and m.result != "fail":
                out.append(InstanceChanged.to("orphaned", m.machine_id,
                                              reason="recorded as failed, yet the provider still holds it"))
            continue
        first = since.setdefault(m.machine_id, now)
        if unresolved and now - first < s.policy.request_timeout:
            continue
        out.append(InstanceSeen(machine_id=m.machine_id, name=m.name or m.machine_id, template=m.template,
                                state="orphaned", launched_at=m.launched_at, private_ip=m.private_ip,
                                reason="held by the provider, unknown to the facts"))
    since = {k: t for k, t in since.items() if k in listed and f"{s.name}/{k}" not in p.instances}
    return out, since
