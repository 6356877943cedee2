"""Simulated unit grants: countable resources (license tokens) lent from fixed pools.

A grant holds units from the moment it is requested (they are reserved at the
pool) and is usable after the lead time; a return gives units back after the
return time. Returns can take part of a grant, so ``count`` is what a grant
holds now and ``returning`` what is already on its way back.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from simprov_chance import chance
from simprov_config import SimConfig

LIVE = ("pending", "granted")

Grant = Dict[str, Any]
State = Dict[str, Any]


def held(state: State, resource: Optional[str] = None) -> int:
    return sum(
        g["count"]
        for g in state["grants"].values()
        if g["state"] in LIVE and (resource is None or g["resource"] == resource)
    )


def room(cfg: SimConfig, state: State, resource: str) -> int:
    """How many more units of a resource the pool (and the provider's capacity) can lend."""
    p = cfg.pool(resource)
    free = (p.capacity if p else 0) - held(state, resource)
    if cfg.capacity is not None:
        free = min(free, cfg.capacity - held(state))
    return max(free, 0)


def grant(cfg: SimConfig, state: State, req: Dict[str, Any], now: float, key: str) -> None:
    """Lend what fits of the request; the shortfall is reported by status, not retried."""
    fits = min(req["count"], room(cfg, state, req["what"]))
    state["grants"][req["id"]] = {
        "id": req["id"],
        "token": req["token"],
        "resource": req["what"],
        "requested": req["count"],
        "granted": fits,
        "count": fits,
        "returning": 0,
        "state": "pending",
        "ready_at": now + cfg.lead_time.pick(chance(cfg.seed, key, "lead_time")),
        "tags": req["tags"],
        "seq": req["seq"],
        "created": now,
        "ended_at": None,
    }


def advance(state: State, now: float) -> None:
    for g in state["grants"].values():
        if g["state"] == "pending" and now >= g["ready_at"]:
            g["state"] = "granted"
    for req in state["requests"].values():
        if req["kind"] == "return" and "takes" in req and not req["applied"] and now >= req["done_at"]:
            for grant_id, n in req["takes"]:
                g = state["grants"][grant_id]
                g["count"] -= n
                g["returning"] -= n
                if g["count"] == 0:
                    g["state"] = "returned"
                    g["ended_at"] = req["done_at"]
            req["applied"] = True


def grant_status(state: State, req: Dict[str, Any], now: float) -> Dict[str, Any]:
    g = state["grants"][req["id"]]
    out = {"requestId": req["id"], "machines": []}
    if g["state"] == "pending":
        wait = max(0.0, g["ready_at"] - now)
        return {**out, "status": "running", "message": f"granting, ready in {wait:.0f}s", "granted": 0}
    if g["granted"] < g["requested"]:
        message = f"granted {g['granted']} of {g['requested']}: pool {g['resource']} is full"
        return {**out, "status": "complete_with_error", "message": message, "granted": g["count"]}
    return {**out, "status": "complete", "message": "", "granted": g["count"]}


Named = Optional[List[Tuple[str, Optional[int]]]]


def _candidates(state: State, resource: str, named: Named) -> List[Tuple[Grant, Optional[int]]]:
    """The grants a return takes from: those named (by request id or token), else the newest first."""
    if named is None:
        live = [g for g in state["grants"].values() if g["resource"] == resource and g["state"] in LIVE]
        return [(g, None) for g in sorted(live, key=lambda g: g["seq"], reverse=True)]
    out = []
    for ref, limit in named:
        grant_id = ref if ref in state["grants"] else state["tokens"].get("request:" + ref)
        g = state["grants"].get(grant_id) if grant_id else None
        if g is not None and g["resource"] == resource and g["state"] in LIVE:
            out.append((g, limit))
    return out


def start_return(cfg: SimConfig, state: State, req: Dict[str, Any], named: Named, now: float) -> None:
    """Set aside units to give back; with no count, all of the named grants (or each one's given count)."""
    remaining = req["count"]
    takes = []
    for g, limit in _candidates(state, req["what"], named):
        n = g["count"] - g["returning"]
        if limit is not None:
            n = min(n, limit)
        if remaining is not None:
            n = min(n, remaining)
            remaining -= n
        if n > 0:
            g["returning"] += n
            takes.append([g["id"], n])
    if req["count"] is None:
        req["count"] = sum(n for _, n in takes)
    # Ground truth for whoever checks a daemon: what the license server had checked out when the
    # units were set aside, and how many units of the resource stay lent once they are gone.
    req.update(in_use=state["in_use"].get(req["what"], 0),
               staying=sum(g["count"] - g["returning"] for g in state["grants"].values()
                           if g["resource"] == req["what"] and g["state"] in LIVE))
    req.update(takes=takes, applied=False,
               done_at=now + cfg.return_time.pick(chance(cfg.seed, req["id"], "return_time")))
    advance(state, now)


def return_status(req: Dict[str, Any]) -> Dict[str, Any]:
    out = {"requestId": req["id"], "machines": []}
    taken = sum(n for _, n in req["takes"])
    if not req["applied"]:
        return {**out, "status": "running", "message": f"returning {taken} units"}
    if taken == 0 or taken < req["count"]:
        message = f"returned {taken} of {req['count'] or 'the named'} units: no more held"
        return {**out, "status": "complete_with_error", "message": message}
    return {**out, "status": "complete", "message": f"returned {taken} units"}


def holdings(state: State, tags: Dict[str, str]) -> List[Dict[str, Any]]:
    return [
        {"token": g["token"] or "", "request_id": g["id"], "resource": g["resource"], "count": g["count"]}
        for g in state["grants"].values()
        if g["state"] in LIVE and g["count"] > 0 and all(g["tags"].get(k) == v for k, v in tags.items())
    ]


def usage(cfg: SimConfig, state: State, resource: str) -> Dict[str, Any]:
    """What the license server would say: tokens checked out by jobs, out of its total."""
    return {"resource": resource, "in_use": state["in_use"].get(resource, 0), "total": cfg.pool(resource).capacity}
