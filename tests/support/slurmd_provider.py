"""A v2 provider whose machines are real ``slurmd -b -N NAME`` processes on this host, for the Slurm drills.

A "host" made for node ``cloud3`` is a ``slurmd`` registering as ``cloud3``
(slurm.conf gives each node its own ``Port=``), started in a session of its
own so it outlives the call that made it, as a machine outlives the API
call. Returning it kills the process (a machine powered off); killing it
behind the daemon's back is a machine lost, which ``reclaims`` reports. Only
the standard library: the daemon runs it with the contract's minimal
environment. Settings come from the provider's env_file:

- ``SLURMD_STATE``: the folder of its state (``state.json``) and the slurmds' logs;
- ``SLURM_CONF``: the slurm.conf the slurmds read; ``SLURMD``: the slurmd binary;
- ``SLURMD_DELIVER``: ``never`` to accept requests and never start anything
  (a provider that never delivers); ``records`` for machines that run no
  slurmd at all (up until returned: many hosts on one small machine);
  default ``yes``;
- ``SLURMD_MAX``: the template's ``max_number`` (default 8);
- ``SLURMD_DELAY``: seconds a machine takes to boot (default 0): its slurmd is
  started by the first call made once they have passed, so a host comes of
  a request only while a daemon keeps asking about it;
- ``SLURMD_DYNAMIC``: a dynamic node's ``--conf`` (``CPUs=16 RealMemory=16000
  Feature=dyn``): machines are named by the provider (``dyn-1`` ...), their
  slurmd registers with ``-Z`` under that name, and the template's ``ncpus``
  and ``mem`` are the CPUs and RealMemory it gives;
- ``SLURMD_FUTURE``: ``yes`` to start such a machine's slurmd as ``-F`` (a future node of slurm.conf's
  ``dyn-K``, with a port of its own) instead of ``-Z``: several then fit this one host, where a ``-Z`` node
  listens on ``SlurmdPort`` and only one does.
- ``SLURMD_PREFIX``: the dynamic machines' names before their number
  (default ``dyn-``), and ``SLURMD_PRICE`` the template's cost per hour
  (default 0.1): two providers of one drill sell hosts under names and
  prices of their own;
- ``SLURMD_PORT``: a file that providers of one drill share. A dynamic
  slurmd listens on slurm.conf's one ``SlurmdPort``, so one runs at a time
  on this machine: a dynamic machine boots only once no other slurmd
  recorded in the file still runs (it is made, and comes up later, as a
  machine that boots slowly).

Calls are idempotent by token: a repeated request answers the first one's id
and starts nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

TEMPLATE = "node"


def state_dir() -> Path:
    return Path(os.environ["SLURMD_STATE"])


@contextlib.contextmanager
def locked() -> Iterator[dict[str, Any]]:
    """The provider's state, read and written under an exclusive lock (calls may run at once)."""
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = folder / "state.json"
        state = json.loads(path.read_text()) if path.exists() else {"requests": {}, "machines": {}, "tokens": {}}
        yield state
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(path)


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in ("Z", "X")


def dynamic() -> dict[str, str]:
    """The dynamic node's ``--conf`` as fields; empty for power-saving nodes."""
    return dict(field.split("=", 1) for field in os.environ.get("SLURMD_DYNAMIC", "").split())


@contextlib.contextmanager
def port() -> Iterator[dict[str, Any] | None]:
    """The shared port file's record (``{"pid": ...}`` of the dynamic slurmd that holds the port), read and
    written under its lock; None without ``SLURMD_PORT``."""
    path = os.environ.get("SLURMD_PORT")
    if not path or not dynamic():
        yield None
        return
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        yield held
        Path(path).write_text(json.dumps(held))


def start_slurmd(name: str) -> int:
    log = open(state_dir() / f"slurmd-{name}.log", "ab")
    conf = os.environ.get("SLURMD_DYNAMIC", "")
    mode = ("-F",) if conf and os.environ.get("SLURMD_FUTURE") == "yes" else ("-Z", "--conf", conf) if conf else ()
    proc = subprocess.Popen([os.environ.get("SLURMD", "slurmd"), "-D", "-b", "-N", name,
                             "-f", os.environ["SLURM_CONF"], *mode],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    return proc.pid


def up(m: dict[str, Any]) -> bool:
    """Whether the machine runs: its slurmd lives (or, a record of a machine, it was never returned)."""
    return not m["returned"] if m.get("record") else alive(m.get("pid"))


def machine_out(mid: str, m: dict[str, Any]) -> dict[str, Any]:
    status = "running" if up(m) and not m.get("returned") else "terminated"
    return {"machineId": mid, "name": m["name"], "result": "succeed" if status == "running" else "fail",
            "status": status, "privateIpAddress": "127.0.0.1", "launchtime": int(m["launched"]),
            "templateId": TEMPLATE}


def describe(_doc: dict[str, Any]) -> dict[str, Any]:
    conf = dynamic()
    shape = {"ncpus": int(conf["CPUs"]), "mem": int(conf["RealMemory"])} if conf else {"ncpus": 2}
    return {"priority": 10, "cost_per_hour": float(os.environ.get("SLURMD_PRICE", "0.1")), "lead_time_s": 1,
            "templates": [{"id": TEMPLATE, "max_number": int(os.environ.get("SLURMD_MAX", "8")),
                           "attributes": {"type": "X86_64", **shape}}]}


def request(doc: dict[str, Any]) -> dict[str, Any]:
    token = doc["token"]
    names = doc.get("names") or []
    if dynamic() and names:
        raise SystemExit(f"request: names {names} given to a provider of dynamic nodes, which names its own")
    if not dynamic() and (len(names) != doc["count"] or len(set(names)) != len(names)):
        raise SystemExit(f"request: names {names} are not one per host of count {doc['count']}")
    with locked() as state:
        if token in state["tokens"]:
            return {"requestId": state["tokens"][token], "message": "repeated token"}
        if dynamic():
            prefix = os.environ.get("SLURMD_PREFIX", "dyn-")
            names = [f"{prefix}{len(state['machines']) + i + 1}" for i in range(doc["count"])]
        rid = f"r-{len(state['requests']) + 1}"
        state["tokens"][token] = rid
        mids = []
        now = time.time()
        for name in names:
            mid = f"m-{name}-{len(state['machines']) + 1}"
            state["machines"][mid] = {"name": name, "pid": None, "launched": now, "request": rid,
                                      "tags": doc.get("tags", {}), "returned": False,
                                      "boot_at": now + float(os.environ.get("SLURMD_DELAY", "0"))}
            mids.append(mid)
        state["requests"][rid] = {"action": "request", "machines": mids}
        boot(state)
    return {"requestId": rid, "message": f"{len(mids)} machines booting"}


def boot(state: dict[str, Any]) -> None:
    """Start the slurmd of every machine whose boot time has come (never, for a provider that never delivers)."""
    deliver = os.environ.get("SLURMD_DELIVER", "yes")
    if deliver == "never":
        return
    now = time.time()
    with port() as held:
        for m in state["machines"].values():
            if m["pid"] is None and not m["returned"] and not m.get("record") and m.get("boot_at", 0) <= now:
                if deliver == "records":
                    m["record"] = True
                elif held is None:
                    m["pid"] = start_slurmd(m["name"])
                elif not alive(held.get("pid")):
                    m["pid"] = held["pid"] = start_slurmd(m["name"])


def ret(doc: dict[str, Any]) -> dict[str, Any]:
    token = doc["token"]
    with locked() as state:
        if token in state["tokens"]:
            return {"requestId": state["tokens"][token]}
        rid = f"ret-{len(state['requests']) + 1}"
        state["tokens"][token] = rid
        mids = []
        for m in doc["machines"]:
            mid = m["machineId"]
            held = state["machines"].get(mid)
            if held is None:
                continue
            if alive(held.get("pid")):
                os.kill(held["pid"], signal.SIGKILL)
            held["returned"] = True
            mids.append(mid)
        state["requests"][rid] = {"action": "return", "machines": mids}
    return {"requestId": rid}


def status(doc: dict[str, Any]) -> dict[str, Any]:
    out = []
    with locked() as state:
        boot(state)
        for r in doc["requests"]:
            rid = r["requestId"]
            req = state["requests"].get(rid)
            if req is None:
                out.append({"requestId": rid, "status": "complete_with_error", "message": "no such request"})
                continue
            machines = [machine_out(mid, state["machines"][mid]) for mid in req["machines"]]
            if req["action"] == "return":
                # A machine whose slurmd is gone is given back: its return succeeded.
                done = all(not up(state["machines"][mid]) for mid in req["machines"])
                for m in machines:
                    m["result"] = "succeed" if m["status"] == "terminated" else "executing"
                out.append({"requestId": rid, "status": "complete" if done else "running", "machines": machines})
            else:
                shown = [m for m in machines if up(state["machines"][m["machineId"]])]
                done = len(shown) == len(machines)
                out.append({"requestId": rid, "status": "complete" if done else "running", "machines": shown})
    return {"requests": out}


def listed(_doc: dict[str, Any]) -> dict[str, Any]:
    with locked() as state:
        boot(state)
        return {"machines": [machine_out(mid, m) for mid, m in state["machines"].items()
                             if not m["returned"] and up(m)], "grants": []}


def reclaims(doc: dict[str, Any]) -> dict[str, Any]:
    """Machines the daemon holds whose slurmd is gone though never returned: lost, as a machine that died."""
    with locked() as state:
        lost = [m for m in doc.get("machines", [])
                if (held := state["machines"].get(m["machineId"])) is not None and held.get("pid")
                and not held["returned"] and not up(held)]
    return {"requests": [{"machine": m["name"], "machineId": m["machineId"]} for m in lost]}


ACTIONS = {"describe": describe, "request": request, "return": ret, "status": status, "list": listed,
           "reclaims": reclaims}


def main(argv: list[str]) -> int:
    action, _, path = argv[1], argv[2], argv[3]
    doc = json.loads(Path(path).read_text())
    print(json.dumps(ACTIONS[action](doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
