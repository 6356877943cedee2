"""Simulated hosts: machines that start after a lead time, may fail or be reclaimed, and end when returned.

A machine's future is decided when it is created (when it will be up, whether
it fails, when a spot reclaim takes it) from the seed and the request's token,
and ``advance`` makes it happen once the clock passes those moments, so a
call at any time sees the same story.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from simprov_chance import chance
from simprov_config import SimConfig

#: States that occupy capacity and cost money.
LIVE = ("pending", "running")

Machine = Dict[str, Any]
State = Dict[str, Any]


def live_count(state: State, template: Optional[str] = None) -> int:
    return sum(
        1
        for m in state["machines"].values()
        if m["state"] in LIVE and (template is None or m["template"] == template)
    )


def room(cfg: SimConfig, state: State, template_id: str) -> int:
    """How many more hosts of a template fit under its max_number and the provider's capacity."""
    t = cfg.template(template_id)
    free = (t.max_number if t else 0) - live_count(state, template_id)
    if cfg.capacity is not None:
        free = min(free, cfg.capacity - live_count(state))
    return max(free, 0)


def _private_ip(n: int) -> str:
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def launch(cfg: SimConfig, state: State, request: Dict[str, Any], now: float, key: str) -> None:
    """Create the request's machines: what fits starts, the shortfall fails at once."""
    fits = min(request["count"], room(cfg, state, request["what"]))
    for i in range(request["count"]):
        n = state["next_machine"]
        state["next_machine"] = n + 1
        ready = now + cfg.lead_time.pick(chance(cfg.seed, key, i, "lead_time"))
        reclaim_at = None
        if chance(cfg.seed, key, i, "reclaim") < cfg.reclaim_rate:
            reclaim_at = ready + cfg.reclaim_after.pick(chance(cfg.seed, key, i, "reclaim_after"))
        m: Machine = {
            "machineId": f"i-{cfg.name_prefix}-{n:06d}",
            # A request for named hosts (a scheduler's nodes) names each of its machines.
            "name": request["names"][i] if request.get("names") else f"{cfg.name_prefix}-{n}",
            "template": request["what"],
            "request_id": request["id"],
            "tags": request["tags"],
            "state": "pending",
            "launch_time": now,
            "ready_at": ready,
            "doomed": chance(cfg.seed, key, i, "machine_fail") < cfg.machine_fail_rate,
            "reclaim_at": reclaim_at,
            "terminate_at": None,
            "return_id": None,
            "ended_at": None,
            "private_ip": _private_ip(n),
            "reported": False,
            "message": "",
        }
        if i >= fits:
            m.update(state="failed", ready_at=now, ended_at=now, reclaim_at=None,
                     message="insufficient capacity for this template")
        state["machines"][m["machineId"]] = m
        request["machines"].append(m["machineId"])


def _advance_machine(m: Machine, now: float) -> None:
    if m["state"] == "pending":
        end = m["terminate_at"]
        if end is not None and end <= now and end < m["ready_at"]:
            m.update(state="terminated", ended_at=end)
            return
        if now < m["ready_at"]:
            return
        if m["doomed"]:
            m.update(state="failed", ended_at=m["ready_at"], message="instance failed to start")
            return
        m["state"] = "running"
    if m["state"] == "running":
        due = [
            (at, outcome)
            for at, outcome in ((m["terminate_at"], "terminated"), (m["reclaim_at"], "reclaimed"))
            if at is not None and at <= now
        ]
        if due:
            at, outcome = min(due)
            m.update(state=outcome, ended_at=at)
            if outcome == "reclaimed":
                m["message"] = "reclaimed by the provider"


def advance(state: State, now: float) -> None:
    for m in state["machines"].values():
        _advance_machine(m, now)


def reclaim(state: State, m: Machine, now: float) -> None:
    m.update(state="reclaimed", ended_at=now, message="reclaimed by the provider")


def find(state: State, machine_id: str, name: str) -> Optional[Machine]:
    if machine_id and machine_id in state["machines"]:
        return state["machines"][machine_id]
    if name:
        return next((m for m in state["machines"].values() if m["name"] == name), None)
    return None


def view(m: Machine, now: float) -> Dict[str, Any]:
    """The machine as getRequestStatus shows it."""
    st = m["state"]
    if st == "pending":
        result, status = "executing", "pending"
        message = f"launching, up in {max(0.0, m['ready_at'] - now):.0f}s"
    elif st == "failed":
        result, status, message = "fail", "failed", m["message"]
    else:
        result, message = "succeed", m["message"]
        status = "shutting-down" if st == "running" and m["terminate_at"] is not None else st
    return {
        "machineId": m["machineId"],
        "name": m["name"],
        "result": result,
        "status": status,
        "privateIpAddress": m["private_ip"],
        "publicIpAddress": "",
        "launchtime": int(m["launch_time"]),
        "message": message,
    }


def _summary(views: List[Dict[str, Any]], what: str) -> Dict[str, Any]:
    results = [v["result"] for v in views]
    if "executing" in results:
        return {"status": "running", "message": f"{results.count('executing')} of {len(views)} machines {what}"}
    failed = results.count("fail")
    if failed:
        return {"status": "complete_with_error", "message": f"{failed} of {len(views)} machines failed"}
    return {"status": "complete", "message": ""}


def request_status(state: State, req: Dict[str, Any], now: float) -> Dict[str, Any]:
    machines = [state["machines"][mid] for mid in req["machines"]]
    views = [view(m, now) for m in machines]
    for m, v in zip(machines, views):
        if v["result"] == "succeed":
            m["reported"] = True
    return {"requestId": req["id"], **_summary(views, "launching"), "machines": views}


def start_return(cfg: SimConfig, state: State, req: Dict[str, Any], given: List[Dict[str, str]], now: float) -> None:
    """Mark the given machines for termination; unknown ones are kept to be reported as failed."""
    entries = []
    for i, item in enumerate(given):
        m = find(state, item.get("machineId", ""), item.get("name", ""))
        if m is None:
            entries.append({"machineId": item.get("machineId", ""), "name": item.get("name", ""), "known": False})
            continue
        if m["state"] in LIVE and m["terminate_at"] is None:
            m["terminate_at"] = now + cfg.return_time.pick(chance(cfg.seed, req["id"], i, "return_time"))
            m["return_id"] = req["id"]
            _advance_machine(m, now)
        entries.append({"machineId": m["machineId"], "name": m["name"], "known": True})
    req["entries"] = entries


def return_status(state: State, req: Dict[str, Any], now: float) -> Dict[str, Any]:
    views = []
    for e in req["entries"]:
        if not e["known"]:
            views.append({
                "machineId": e["machineId"], "name": e["name"], "result": "fail", "status": "unknown",
                "privateIpAddress": "", "publicIpAddress": "", "launchtime": 0, "message": "unknown machine",
            })
            continue
        m = state["machines"][e["machineId"]]
        v = view(m, now)
        if m["state"] in LIVE:
            v.update(result="executing", status="shutting-down")
        else:
            v.update(result="succeed", status="terminated", message="" if m["state"] == "terminated" else m["state"])
        views.append(v)
    return {"requestId": req["id"], **_summary(views, "terminating"), "machines": views}


def holdings(state: State, now: float, tags: Dict[str, str]) -> List[Dict[str, Any]]:
    """Every machine that still exists (and costs) and carries the given tags."""
    held = []
    for m in state["machines"].values():
        if m["state"] in LIVE and all(m["tags"].get(k) == v for k, v in tags.items()):
            held.append({**view(m, now), "template": m["template"]})
    return held


def reclaimed(state: State, given: Optional[List[Dict[str, str]]], report_unlisted: bool) -> List[Dict[str, Any]]:
    """Machines the provider took back or never had, among those given.

    With ``report_unlisted`` (LSF mode), also running machines the caller
    already saw succeed but did not list: like real plugins, the provider
    wants back what its caller has lost track of.
    """
    if given is None:
        gone = [m for m in state["machines"].values() if m["state"] == "reclaimed"]
        return [{"machine": m["name"], "machineId": m["machineId"], "gracePeriod": 0} for m in gone]
    out = []
    listed = set()
    for item in given:
        m = find(state, item.get("machineId", ""), item.get("name", ""))
        if m is None:
            out.append({"machine": item.get("name", ""), "machineId": item.get("machineId", ""), "gracePeriod": 0})
            continue
        listed.add(m["machineId"])
        if m["state"] == "reclaimed":
            out.append({"machine": m["name"], "machineId": m["machineId"], "gracePeriod": 0})
    if report_unlisted:
        for m in state["machines"].values():
            if m["state"] == "running" and m["reported"] and m["terminate_at"] is None and m["machineId"] not in listed:
                out.append({"machine": m["name"], "machineId": m["machineId"], "gracePeriod": 0})
    return out
