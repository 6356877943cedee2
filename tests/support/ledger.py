"""The liar soak's ledger: the provider's ground truth against the facts, in three figures.

Ground truth is what the simulated providers keep in their state files
(every machine and grant they ever made, when, under which token, when it
ended, and what the license server had checked out when units were set aside
for a return) and what the fault wrapper kept of its own lies (``liar.json``:
the windows in which ``list`` hid each machine, the returns it answered
without returning anything). The facts are the controller's log, replayed.

**Leaked instance-seconds beyond the graces.** A machine leaks while it is
alive at the provider (pending or running: it costs) and the facts do not
hold it: no fact knows it yet, or its record says ``lost``, ``returned`` or
``failed``. Each such spell is allowed, from its start:

- ``policy.request_timeout`` when no fact knows the machine (or knows it
  failed): a request whose answer was lost is looked up with its token, and
  an unknown machine becomes an orphan only once no request of ours is
  unresolved, or after ``request_timeout``;
- ``policy.return_grace`` when its return completed: a return that ended
  nothing is believed that long;
- nothing more when it was declared ``lost``, but all the time the provider's
  ``list`` hid it (the owner cannot see what it is not shown; how long it
  waits before calling a machine lost is ``policy.lost_after``, before the
  spell begins);

and then ``act_within``, the time an owner needs to see and write what it
may know: its orphan searches run every ``12 × poll_every``, a search may
fail or be answered late (past the script timeout), and the daemon may be
down for a restart. Whatever the spell lasts beyond that is leaked. A spell
ends when a fact holds the machine again (adopted back, or an orphan to be
given back) or when the machine ends at the provider.

**Double creations.** A need is asked for once: the owner turns an order into
one intent whose id is the token of every call that carries it out, so the
provider makes supply under each token once (repeats of it are the same
call) and each order comes to one token. Counted: every creation beyond the
first under one token, beyond the first among an order's tokens, under a
token no intent in the facts has, and every machine or unit beyond what the
intent asked for.

**Units returned while in use.** When a return sets units aside at the
license server, the units it takes that the server had checked out beyond
those that stay lent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from state.projection import Projection

#: Instance states in which the facts hold a machine: on its way, serving, being given back, or an
#: orphan to give back or report. Any other state (or no record) says it is gone.
HOLDS = frozenset({"requested", "provisioning", "running", "joined", "idle", "busy", "return_planned",
                   "returning", "orphaned"})
#: Simulated machine states that cost.
ALIVE = ("pending", "running")


@dataclass(frozen=True)
class Graces:
    lost_after: float
    return_grace: float
    request_timeout: float
    #: Seconds an owner may take to see and act on what it can know (see the module's text).
    act_within: float

    def allowed(self, kind: str) -> float:
        """The grace of a spell by what the facts said when it began."""
        return {"unknown": self.request_timeout, "failed": self.request_timeout,
                "returned": self.return_grace}.get(kind, 0.0)


@dataclass(frozen=True)
class Spell:
    """A time a machine was alive at the provider while the facts did not hold it."""

    provider: str
    machine_id: str
    #: What the facts said when it began: unknown, lost, returned or failed.
    kind: str
    start: float
    end: float
    #: Until when it was allowed (its grace, any hiding, and act_within).
    allowed_until: float

    @property
    def leaked(self) -> float:
        return max(0.0, self.end - self.allowed_until)


@dataclass
class Ledger:
    spells: list[Spell] = field(default_factory=list)
    doubles: list[str] = field(default_factory=list)
    #: (provider, return request id, units taken while in use)
    in_use_returns: list[tuple[str, str, int]] = field(default_factory=list)
    #: What the providers still hold, and what the facts still hold, when the ledger was drawn.
    held_at_end: list[str] = field(default_factory=list)

    @property
    def leaked_seconds(self) -> float:
        return sum(s.leaked for s in self.spells)

    @property
    def double_creations(self) -> int:
        return len(self.doubles)

    @property
    def units_returned_in_use(self) -> int:
        return sum(n for _, _, n in self.in_use_returns)

    def leaks(self) -> list[Spell]:
        return [s for s in self.spells if s.leaked > 0]

    def explain(self) -> str:
        lines = [f"leaked {s.leaked:.1f}s: {s.provider}/{s.machine_id} {s.kind} from {s.start:.1f} to "
                 f"{s.end:.1f}, allowed until {s.allowed_until:.1f}" for s in self.leaks()]
        lines += [f"double creation: {d}" for d in self.doubles]
        lines += [f"units returned in use: {n} by {p} return {r}" for p, r, n in self.in_use_returns]
        lines += [f"held at the end: {h}" for h in self.held_at_end]
        return "\n".join(lines)


def _facts_timeline(p: Projection, provider: str, machine_id: str) -> list[tuple[float, str]]:
    inst = p.instances.get(f"{provider}/{machine_id}")
    return [] if inst is None else [(c.at, c.state) for c in inst.history.changes]


def machine_spells(provider: str, machine: Mapping[str, Any], timeline: list[tuple[float, str]],
                   hidden: Mapping[str, Any] | None, graces: Graces, end: float) -> list[Spell]:
    """The spells of one machine: alive at the provider, not held by the facts."""
    born = float(machine["launch_time"])
    died = end if machine["state"] in ALIVE else float(machine["ended_at"] if machine["ended_at"] is not None
                                                       else born)
    # (from, state) pieces of the facts' story; "unknown" before its first fact.
    pieces = [(float("-inf"), "unknown"), *timeline]
    # The pieces within the machine's life, one after the other.
    lived = [(max(at, born), state) for i, (at, state) in enumerate(pieces)
             if max(at, born) < min(pieces[i + 1][0] if i + 1 < len(pieces) else float("inf"), died)]
    out: list[Spell] = []
    current: tuple[float, str] | None = None  # (start, kind) of the spell under way
    for lo, state in lived:
        if state in HOLDS:
            if current is not None:
                out.append(_spell(provider, machine["machineId"], current, lo, hidden, graces))
                current = None
        elif current is None:
            current = (lo, state)
    if current is not None:
        out.append(_spell(provider, machine["machineId"], current, died, hidden, graces))
    return out


def _spell(provider: str, machine_id: str, begun: tuple[float, str], end: float, hidden: Mapping[str, Any] | None,
           graces: Graces) -> Spell:
    start, kind = begun
    allowed = start + graces.allowed(kind)
    if hidden is not None and hidden["start"] < end:
        allowed = max(allowed, float(hidden["end"]))  # the provider hid it: nothing to see until then
    return Spell(provider, machine_id, kind, start, end, allowed + graces.act_within)


def draw(p: Projection, sims: Mapping[str, Mapping[str, Any]], liars: Mapping[str, Mapping[str, Any]],
         graces: Graces, end: float) -> Ledger:
    """The ledger of providers ``sims`` (name -> the simulator's state) and their wrappers ``liars``."""
    ledger = Ledger()
    for provider, sim in sorted(sims.items()):
        hidden = (liars.get(provider) or {}).get("hidden", {})
        for mid, m in sorted(sim["machines"].items()):
            ledger.spells += machine_spells(provider, m, _facts_timeline(p, provider, mid), hidden.get(mid),
                                            graces, end)
            if m["state"] in ALIVE:
                ledger.held_at_end.append(f"{provider}: machine {mid} still {m['state']}")
        for gid, g in sorted(sim["grants"].items()):
            if g["state"] in ("pending", "granted") and g["count"] > 0:
                ledger.held_at_end.append(f"{provider}: grant {gid} still lends {g['count']} units")
        ledger.doubles += _doubles(p, provider, sim)
        ledger.in_use_returns += _in_use(provider, sim)
    ledger.held_at_end += _facts_holding(p)
    return ledger


def _created(sim: Mapping[str, Any], req: Mapping[str, Any]) -> int:
    """Machines (that did not fail at once for want of capacity) or units a request made."""
    if req["supply"] == "hosts":
        return sum(1 for mid in req["machines"]
                   if sim["machines"][mid]["message"] != "insufficient capacity for this template")
    g = sim["grants"].get(req["id"])
    return g["granted"] if g else 0


def _doubles(p: Projection, provider: str, sim: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    per_token: dict[str, list[str]] = {}
    per_order: dict[str, set[str]] = {}
    for rid, req in sorted(sim["requests"].items()):
        if req["kind"] != "request" or not _created(sim, req):
            continue
        token = req["token"] or ""
        per_token.setdefault(token, []).append(rid)
        intent = p.requests.get(token)
        if intent is None or intent.provider != provider or intent.action != "request":
            out.append(f"{provider}: {rid} made under token {token!r}, which no intent of the facts has")
            continue
        per_order.setdefault(intent.order_id, set()).add(token)
        made = _created(sim, req)
        if made > intent.count:
            out += [f"{provider}: {rid} made {made} for intent {token} of {intent.count}"] * (made - intent.count)
    for token, rids in per_token.items():
        out += [f"{provider}: token {token!r} made supply {len(rids)} times ({', '.join(rids)})"] * (len(rids) - 1)
    for order, tokens in per_order.items():
        out += [f"{provider}: order {order} made supply under {len(tokens)} tokens ({', '.join(sorted(tokens))})"] \
            * (len(tokens) - 1)
    return out


def _in_use(provider: str, sim: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    out = []
    for rid, req in sorted(sim["requests"].items()):
        if req["kind"] != "return" or req["supply"] != "units" or "in_use" not in req:
            continue
        taken = sum(n for _, n in req["takes"])
        over = min(taken, max(0, req["in_use"] - req["staying"]))
        if over:
            out.append((provider, rid, over))
    return out


def _facts_holding(p: Projection) -> list[str]:
    out = [f"facts: instance {i.key} still {i.state}" for i in p.instances.values()
           if i.state not in ("returned", "lost", "failed")]
    out += [f"facts: grant {g.id} still {g.state}" for g in p.grants.values() if g.state not in ("returned", "failed")]
    return out
