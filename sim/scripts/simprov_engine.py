"""What each v2 action does to the simulator's state.

Order inside a call: bring machines and grants up to now, then misfortune
(the injected fault queue, then seeded random failures), then idempotency,
capacity and the effect. Every refusal is raised before anything is created,
so a refused call changes nothing but fault and call counters.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import simprov_hosts as hosts
import simprov_units as units
from simprov_calls import Call, bad
from simprov_chance import chance
from simprov_config import FaultConf, SimConfig
from simprov_exit import CAPACITY, FAILED, TRANSIENT, SimExit

State = Dict[str, Any]


class Answer(NamedTuple):
    output: Dict[str, Any]
    #: Seconds to wait after the state is saved and before answering (a simulated hang).
    hang: float = 0.0
    #: What to print instead of the answer (a ``print`` fault): garbage or huge.
    printed: Optional[str] = None


def _next_fault(cfg: SimConfig, state: State, action: str) -> Optional[FaultConf]:
    used = state["faults_used"]
    for i, fault in enumerate(cfg.faults):
        if fault.action == action and used.get(str(i), 0) < fault.times:
            used[str(i)] = used.get(str(i), 0) + 1
            return fault
    return None


def _misfortune(cfg: SimConfig, state: State, call: Call) -> Tuple[float, Optional[str]]:
    """Raise the call's injected or random failure, if any; return how long it should hang, and what it
    should print instead of its answer."""
    who = call.token or "-"
    attempt = state["calls"].get(f"{call.action}:{who}", 0) + 1
    state["calls"][f"{call.action}:{who}"] = attempt
    hang = 0.0
    printed = None
    fault = _next_fault(cfg, state, call.action)
    if fault is not None:
        if fault.exit is not None:
            raise SimExit(fault.exit, f"injected fault: {call.action} exits {fault.exit}")
        hang = fault.hang or 0.0
        printed = fault.print
    u = chance(cfg.seed, call.action, who, attempt, "outcome")
    odds = [(cfg.fail_rate, FAILED, "simulated failure"),
            (cfg.transient_rate, TRANSIENT, "simulated transient error; retry later")]
    if call.action == "request":
        odds.append((cfg.capacity_error_rate, CAPACITY, "capacity unavailable (simulated shortage)"))
    for rate, code, message in odds:
        if u < rate:
            raise SimExit(code, message)
        u -= rate
    if chance(cfg.seed, call.action, who, attempt, "hang") < cfg.hang_rate:
        hang = max(hang, cfg.hang_seconds)
    return hang, printed


def _describe(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        "kind": cfg.kind,
        "priority": cfg.priority,
        "cost_per_hour": cfg.cost_per_hour,
        "lead_time_s": cfg.lead_time.mean,
        "min_request": cfg.min_request,
        "step": cfg.step,
        "min_hold_s": cfg.min_hold,
        "attributes": cfg.attributes,
        "templates": [
            {k: v for k, v in (("id", t.id), ("max_number", t.max_number), ("attributes", t.attributes),
                               ("priority", t.priority), ("cost_per_hour", t.cost_per_hour), ("zone", t.zone))
             if v is not None}
            for t in cfg.templates
        ],
        "pools": [
            {k: v for k, v in (("resource", p.resource), ("capacity", p.capacity),
                               ("cost_per_unit_hour", p.cost_per_unit_hour)) if v is not None}
            for p in cfg.pools
        ],
    }
    for key in ("capacity", "region", "zone"):
        if getattr(cfg, key) is not None:
            out[key] = getattr(cfg, key)
    return out


def _params(call: Call) -> Dict[str, Any]:
    """What a token stands for; a repeat of the token must ask for the same thing."""
    return {
        "what": call.what,
        "count": call.count,
        "machines": sorted(m["machineId"] or m["name"] for m in call.machines or []),
        "grants": [[ref, limit] for ref, limit in call.grants] if call.grants is not None else None,
        **({"names": list(call.names)} if call.names else {}),
    }


def _known(state: State, call: Call) -> Optional[str]:
    if call.token is None:
        return None
    rid = state["tokens"].get(f"{call.action}:{call.token}")
    if rid is not None and state["requests"][rid]["params"] != _params(call):
        raise bad(call.action, "token", f"{call.token!r} was used for a different {call.action} ({rid}); "
                                        "a token names one call")
    return rid


def _new_request(cfg: SimConfig, state: State, call: Call, now: float) -> Dict[str, Any]:
    n = state["next_request"]
    state["next_request"] = n + 1
    prefix = "req" if call.action == "request" else "ret"
    req = {
        "id": f"{prefix}-{cfg.name_prefix}-{n:06d}",
        "seq": n,
        "kind": call.action,
        "supply": cfg.kind,
        "token": call.token,
        "what": call.what,
        "count": call.count,
        "tags": call.tags or {},
        "created": now,
        "machines": [],
        "names": list(call.names),
        "params": _params(call),
    }
    state["requests"][req["id"]] = req
    if call.token is not None:
        state["tokens"][f"{call.action}:{call.token}"] = req["id"]
    return req


def _request(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    known = _known(state, call)
    if known is not None:
        return {"requestId": known}
    if cfg.kind == "hosts":
        t = cfg.template(call.what)
        if t is None:
            offered = ", ".join(x.id for x in cfg.templates)
            raise bad("request", "template", f"{call.what!r} is not offered (templates: {offered})")
        if hosts.room(cfg, state, t.id) == 0:
            raise SimExit(CAPACITY, f"capacity unavailable: template {t.id} has no room "
                                    f"({hosts.live_count(state, t.id)} of {t.max_number} hosts held)")
    else:
        p = cfg.pool(call.what)
        if p is None:
            offered = ", ".join(x.resource for x in cfg.pools)
            raise bad("request", "resource", f"{call.what!r} is not lent here (pools: {offered})")
        if units.room(cfg, state, p.resource) == 0:
            raise SimExit(CAPACITY, f"capacity unavailable: pool {p.resource} has no free units "
                                    f"({units.held(state, p.resource)} of {p.capacity} lent)")
    req = _new_request(cfg, state, call, now)
    key = call.token or req["id"]
    if cfg.kind == "hosts":
        hosts.launch(cfg, state, req, now, key)
    else:
        units.grant(cfg, state, req, now, key)
    return {"requestId": req["id"]}


def _return(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    known = _known(state, call)
    if known is not None:
        return {"requestId": known}
    if cfg.kind == "units" and cfg.pool(call.what) is None:
        raise bad("return", "resource", f"{call.what!r} is not lent here")
    req = _new_request(cfg, state, call, now)
    if cfg.kind == "hosts":
        hosts.start_return(cfg, state, req, call.machines or [], now)
    else:
        units.start_return(cfg, state, req, call.grants, now)
    return {"requestId": req["id"]}


def _status(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    out = []
    for rid in call.request_ids:
        req = state["requests"].get(rid)
        if req is None:
            out.append({"requestId": rid, "status": "complete_with_error", "message": "unknown request",
                        "machines": []})
        elif req["supply"] == "hosts":
            out.append((hosts.request_status if req["kind"] == "request" else hosts.return_status)(state, req, now))
        elif req["kind"] == "request":
            out.append(units.grant_status(state, req, now))
        else:
            out.append(units.return_status(req))
    return {"requests": out}


def _list(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    return {"machines": hosts.holdings(state, now, call.tags or {}), "grants": units.holdings(state, call.tags or {})}


def _reclaims(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    return {"requests": hosts.reclaimed(state, call.machines, report_unlisted=call.lsf)}


def _usage(cfg: SimConfig, state: State, now: float, call: Call) -> Dict[str, Any]:
    return units.usage(cfg, state, call.what)


_HANDLERS: Dict[str, Callable[[SimConfig, State, float, Call], Dict[str, Any]]] = {
    "describe": _describe,
    "request": _request,
    "status": _status,
    "return": _return,
    "list": _list,
    "reclaims": _reclaims,
    "usage": _usage,
}


def advance(state: State, now: float) -> None:
    hosts.advance(state, now)
    units.advance(state, now)


def perform(cfg: SimConfig, state: State, now: float, call: Call) -> Answer:
    advance(state, now)
    hang, printed = _misfortune(cfg, state, call)
    return Answer(_HANDLERS[call.action](cfg, state, now, call), hang, printed)
