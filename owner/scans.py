"""The orphan search and the reclaims check: what the provider holds, compared with the facts.

v2 providers answer ``list``; LSF-style ones cannot, so every request they
ever accepted is asked for its machines instead. What the facts do not know
becomes an orphan (given back or reported, per ``policy.orphans``); what the
facts hold and the provider no longer lists, or takes back, is lost.

Absence and strangeness are judged over several looks, kept in
``Sightings``: a machine of a request whose answer is not recorded yet is
unknown for a moment, and a cloud's list may miss a machine once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, Payload
from messages.records import InstanceRecord
from messages.scripts import Holdings, Machine, Reclaims, ScriptResult, StatusReport
from messages.states import HELD, INSTANCE
from owner.calls import Call, CheckReclaims, List, ScanStatus
from owner.effects import Effects, Notes, note, write
from owner.settings import OwnerSettings
from persistence.projection import Projection

#: Lists in a row that must miss a machine the facts hold before it is declared lost.
MISSES_TO_LOSE = 2


@dataclass(frozen=True)
class Sightings:
    """What earlier looks saw, kept by the driver between scans (memory only: a new owner looks afresh,
    which only delays a verdict)."""

    #: machine id -> when the orphan search first found it unknown to the facts
    unknown_since: dict[str, float] = field(default_factory=dict)
    #: machine id -> lists in a row that did not show a machine we hold
    missing: dict[str, int] = field(default_factory=dict)


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
           seen: Sightings) -> tuple[Effects, Sightings]:
    """A ``list`` answer: unknown machines and grants become orphans, machines no longer listed are lost."""
    if not result.ok or not isinstance(result.output, Holdings):
        return note("warning", f"provider {s.name}: orphan search failed: {result.reason}"), seen
    held = result.output
    payloads, unknown = _unknown_machines(p, s, held.machines, now, seen.unknown_since)
    listed_ids = {m.machine_id for m in held.machines}
    mine = p.instances_in(*sorted(HELD), provider=s.name)
    ours = {i.machine_id for i in mine}
    missing = {k: n for k, n in seen.missing.items() if k not in listed_ids and k in ours}
    for inst in mine:
        if inst.machine_id in listed_ids or inst.seen_at >= started:
            continue  # listed, or recorded after the list was taken
        missing[inst.machine_id] = missing.get(inst.machine_id, 0) + 1
        if missing[inst.machine_id] >= MISSES_TO_LOSE:
            payloads.append(InstanceChanged(kind="instance_lost", machine_id=inst.machine_id, state="lost",
                                            reason="no longer held by the provider"))
            del missing[inst.machine_id]
    for g in held.grants:
        key = g.token or g.request_id
        grant = p.grants.get(key)
        if grant is None:
            orphan_id = f"orphan-{key}" if key else s.new_id("orphan")
            if orphan_id not in p.grants:
                payloads.append(GrantChanged(kind="grant_orphan_found", grant_id=orphan_id, resource=g.resource,
                                             state="orphaned", count=g.count,
                                             reason="held by the provider, unknown to the facts"))
        elif grant.state == "failed":
            payloads.append(GrantChanged(kind="grant_orphan_found", grant_id=grant.id, resource=grant.resource,
                                         state="orphaned", count=g.count,
                                         reason="recorded as failed, yet the provider still holds it"))
        elif grant.state == "granted" and g.count < grant.count and grant.history.changes[-1].at < started:
            # A partial return that timed out went back after all: the units stop counting and costing.
            payloads.append(GrantChanged(kind="grant_part_returned", grant_id=grant.id, resource=grant.resource,
                                         state="granted", count=grant.count - g.count,
                                         reason="the provider holds fewer units than recorded"))
    return write(Notes("orphans"), payloads), Sightings(unknown, missing)


def scanned(p: Projection, s: OwnerSettings, result: ScriptResult, now: float,
            seen: Sightings) -> tuple[Effects, Sightings]:
    """The orphan search by ``status`` (no ``list``): machines of our requests that no fact knows."""
    if not result.ok or not isinstance(result.output, StatusReport):
        return note("warning", f"provider {s.name}: orphan search by status failed: {result.reason}"), seen
    machines = [m for st in result.output.requests for m in st.machines if m.result != "fail"]
    payloads, unknown = _unknown_machines(p, s, machines, now, seen.unknown_since)
    return write(Notes("orphans"), payloads), Sightings(unknown, seen.missing)


def reclaimed(p: Projection, s: OwnerSettings, result: ScriptResult) -> Effects:
    """Hosts the provider takes back (spot reclaims, machines it lost) are lost to us."""
    if not result.ok or not isinstance(result.output, Reclaims):
        return note("warning", f"provider {s.name}: reclaims check failed: {result.reason}")
    payloads: list[Payload] = []
    by_name: dict[str, InstanceRecord] | None = None
    for r in result.output.machines:
        inst = p.instances.get(f"{s.name}/{r.machine_id}") if r.machine_id else None
        if inst is None and r.name:
            by_name = p.live_by_name(s.name) if by_name is None else by_name
            inst = by_name.get(r.name)
        if inst is not None and inst.state not in INSTANCE.terminal and INSTANCE.allowed(inst.state, "lost"):
            payloads.append(InstanceChanged(kind="instance_lost", machine_id=inst.machine_id, state="lost",
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
                out.append(InstanceChanged(kind="instance_orphan_found", machine_id=m.machine_id, state="orphaned",
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
