"""Resident memory of a daemon serving 1,000 providers whose log holds 100,000 instances.

The daemon is a real ``provisioner run`` process (REST API included) on an
SQLite controller filled beforehand: per provider one completed request and
its machines, joined. Its providers share one small shell script that answers
as a provider holding exactly those machines (a thousand Python simulators
starting at once would measure the machine, not the daemon). The figure is
the process's VmRSS once it is ready (it holds every lease, and every
provider's actor has caught up, described its provider and run its first
orphan search and reclaims check against it) and its memory has settled.

The time to ready is judged against its floor: the replay of the same log
alone, into one projection, with no daemon (the best of two, right before
the daemon starts).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bench.floors import Measured
from messages.facts import InstanceChanged, InstanceSeen, RequestChanged, RequestPlanned, make_fact
from persistence.controller import open_controller
from persistence.replay import replay
from tests.support.daemons import end_process
from tests.support.drills import free_port

SCRIPT = """#!/bin/sh
# A provider that holds exactly what the bench's log says it holds.
echo "$PROVIDER_NAME $1" >> "{folder}/calls.log"
case "$1" in
  describe) exec cat "{folder}/describe.json" ;;
  list) exec cat "{folder}/list-$PROVIDER_NAME.json" ;;
  reclaims) echo '{{"requests": []}}' ;;
  *) echo "$1 is not part of this bench" >&2; exit 75 ;;
esac
"""
DESCRIPTION = {"priority": 1, "cost_per_hour": 0.5,
               "templates": [{"id": "t", "max_number": 500, "attributes": {"type": "X86_64", "ncpus": 8}}]}
#: Seconds the daemon may take to become ready before the bench gives up.
READY_LIMIT = 900.0


def daemon_rss(tmp: Path, smoke: bool) -> tuple[float, Measured]:
    """MiB resident once ready, and the seconds from start to ready with the replay's seconds as its floor."""
    n_providers, per_provider = (10, 100) if smoke else (1_000, 100)
    providers = [f"p{i:04d}" for i in range(n_providers)]
    url = f"sqlite:///{tmp / 'rss.db'}"
    _fill(url, tmp, providers, per_provider)
    config = _config(tmp, url, providers)
    floor = min(_replay_seconds(url) for _ in range(1 if smoke else 2))
    with open(tmp / "daemon.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "provisioner.cli", "--config", str(config), "run"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    try:
        _wait_ready(proc, url, tmp / "calls.log", len(providers))
        ready = time.monotonic() - started
        return _settled_rss(proc.pid, window=4 if smoke else 8), Measured(ready, floor=floor)
    finally:
        end_process(proc, grace=30)


def _replay_seconds(url: str) -> float:
    c = open_controller(url)
    try:
        started = time.perf_counter()
        p = replay(c)
        elapsed = time.perf_counter() - started
    finally:
        c.close()
    if not p.instances:
        raise RuntimeError("rss bench: the log replayed into no instances")
    return elapsed


def _fill(url: str, tmp: Path, providers: list[str], per_provider: int) -> None:
    (tmp / "describe.json").write_text(json.dumps(DESCRIPTION))
    c = open_controller(url)
    try:
        for name in providers:
            rid = f"{name}-r"
            facts = [make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=per_provider),
                               provider=name, fact_id=rid),
                     make_fact(RequestChanged(kind="request_submitted", request_id=rid, state="submitted",
                                              provider_request_id=f"{name}-pr"), provider=name),
                     make_fact(RequestChanged(kind="request_completed", request_id=rid, state="complete"),
                               provider=name)]
            machines = []
            for m in range(per_provider):
                mid, host = f"{name}-m{m}", f"{name}-h{m}"
                facts.append(make_fact(InstanceSeen(machine_id=mid, name=host, request_id=rid, template="t",
                                                    state="running"), provider=name))
                facts.append(make_fact(InstanceChanged(kind="instance_joined", machine_id=mid, state="joined"),
                                       provider=name))
                machines.append({"machineId": mid, "name": host, "status": "running", "templateId": "t"})
            c.append(facts)
            (tmp / f"list-{name}.json").write_text(json.dumps({"machines": machines, "grants": []}))
    finally:
        c.close()


def _config(tmp: Path, url: str, providers: list[str]) -> Path:
    script = tmp / "provider"
    script.write_text(SCRIPT.format(folder=tmp))
    script.chmod(0o755)
    cfg = {
        "instance": {"id": "rss", "serves": providers, "planner": True},
        "controller": {"url": url},
        "api": {"listen": f"127.0.0.1:{free_port()}"},
        "providers": [{"name": name, "kind": "hosts", "script": {"style": "v2", "path": str(script)}}
                      for name in providers],
        "home": str(tmp / "home"),
    }
    path = tmp / "rss.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _wait_ready(proc: subprocess.Popen, url: str, calls: Path, n_providers: int) -> None:
    """Until every lease is held and every provider's actor has caught up and scanned its provider once.

    Its first reconcile describes the provider; its first scan (paced across providers) lists what
    the provider holds and asks what it takes back.
    """
    c = open_controller(url)
    deadline = time.monotonic() + READY_LIMIT
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"rss bench: the daemon exited with {proc.returncode}")
            held = sum(1 for lease in c.leases.all() if lease.holder == "rss")
            described = len(_callers(calls, "describe"))
            scanned = min(len(_callers(calls, "list")), len(_callers(calls, "reclaims")))
            if held == n_providers + 1 and described == n_providers and scanned == n_providers:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"rss bench: not ready after {READY_LIMIT:.0f}s: {held} of {n_providers + 1}"
                                   f" leases held, {described} of {n_providers} providers described, {scanned} scanned,"
                                   f" {vm_rss_mib(proc.pid):.0f} MiB resident")
            time.sleep(0.5)
    finally:
        c.close()


def _callers(calls: Path, action: str) -> set[str]:
    if not calls.exists():
        return set()
    return {row[0] for row in (line.split() for line in calls.read_text().splitlines())
            if len(row) == 2 and row[1] == action}


def vm_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _settled_rss(pid: int, window: int = 8, period: float = 0.25) -> float:
    """VmRSS once it has moved less than 1% over ``window`` samples, or after half a minute."""
    samples = [vm_rss_mib(pid)]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(period)
        samples.append(vm_rss_mib(pid))
        recent = samples[-window:]
        if len(recent) == window and max(recent) - min(recent) < 0.01 * max(recent):
            break
    return samples[-1]

