"""Drills: a real daemon whose provider is ``sim-provider serve`` (persistent mode), broken on purpose.

Killed mid-call, hung, flooded with lines it cannot read, answering late and
out of order: each time the daemon must restart the process, lose no request
and make none twice, and go on serving. Every drill is bounded in time.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from messages.demand import DemandSnapshot, HostItem
from providers.persistent import Status
from tests.support.daemons import HOSTS_SIM, Running, make_config, sim_call, sim_provider, wait_until

pytestmark = pytest.mark.slow

PERSISTENT = {"mode": "persistent", "ping_every": "0.5s", "restart_backoff_max": "1s", "start_timeout": "10s"}


def start(tmp_path: Path, start_daemon: Any, faults: list[dict[str, Any]] | None = None,
          **script: Any) -> Running:
    sim = dict(HOSTS_SIM, faults=faults or [])
    run = start_daemon(make_config(tmp_path, [sim_provider(tmp_path, "hosts", sim, **{**PERSISTENT, **script})]))
    run.wait_state(lambda s: s.providers.get("hosts") and s.providers["hosts"].description, "hosts described")
    return run


def process(run: Running) -> Status:
    """The provider's process as the daemon's metrics see it."""
    return run.daemon.metrics.processes.status["hosts"]()


def running_hosts(run: Running, n: int, what: str, timeout: float = 30.0) -> Any:
    return run.wait_state(lambda s: sum(1 for i in s.instances.values() if i.state == "running") >= n, what,
                          timeout)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in ("Z", "X")


def dump(tmp_path: Path) -> Any:
    return sim_call(tmp_path / "hosts", "admin", None, "dump")


def test_killed_mid_request_the_token_is_repeated_and_nothing_is_requested_twice(tmp_path, start_daemon) -> None:
    # The request does its work, then hangs: the process is killed while the call is in flight.
    run = start(tmp_path, start_daemon, faults=[{"action": "request", "hang": 30}])
    run.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    wait_until(lambda: dump(tmp_path)["requests"], timeout=20, what="the request made at the provider")
    first = process(run)
    os.kill(first.pid, signal.SIGKILL)

    p = running_hosts(run, 1, "the host running after the restart")
    state = dump(tmp_path)
    assert len(state["requests"]) == 1 and len(state["machines"]) == 1, "one request, one host: no double request"
    (token,) = [r["token"] for r in state["requests"].values()]
    assert state["calls"][f"request:{token}"] == 2, "the same token asked again after the unknown outcome"
    (req,) = [r for r in p.requests.values() if r.action == "request"]
    assert req.id == token and req.attempts >= 1
    assert "before answering (outcome unknown)" in " ".join(
        f.payload.reason for f in run.controller.read() if f.kind == "request_status")
    assert process(run).restarts == 1 and not alive(first.pid)


def test_hung_the_process_is_killed_and_restarted_and_the_daemon_serves_on(tmp_path, start_daemon) -> None:
    run = start(tmp_path, start_daemon)
    run.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    running_hosts(run, 1, "the first host running")
    hung = process(run).pid
    os.kill(hung, signal.SIGSTOP)  # reads nothing, answers nothing: not even pings
    stopped_at = time.monotonic()
    wait_until(lambda: process(run).restarts == 1 and process(run).phase == "ready", timeout=15,
               what="the hung process replaced")
    assert time.monotonic() - stopped_at < 5, "two missed pings (0.5 s apart) and it goes"
    assert not alive(hung)
    run.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1), HostItem(id="d2", count=1)]))
    running_hosts(run, 2, "a second host, through the new process")
    assert process(run).degraded == ""
    metrics = run.daemon.metrics.exposition().decode()
    assert 'provisioner_provider_restarts_total{provider="hosts"} 1.0' in metrics
    assert 'provisioner_provider_process_up{provider="hosts"} 1.0' in metrics


def test_flooded_with_garbage_and_huge_lines_it_is_restarted_and_degraded_then_well(tmp_path,
                                                                                   start_daemon) -> None:
    faults = [{"action": "status", "print": "garbage", "times": 2}, {"action": "status", "print": "huge"}]
    run = start(tmp_path, start_daemon, faults=faults)
    c = run.controller
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    running_hosts(run, 1, "the host running once the floods are over", timeout=60)
    assert process(run).restarts >= 3
    # The host can run before the owner's next health check records that the provider serves again.
    p = run.wait_state(lambda s: s.providers["hosts"].degraded == "" and any(
        f.kind == "provider_recovered" for f in c.read()), "the recovery recorded", 30)
    kinds = [f.kind for f in c.read() if f.kind.startswith("provider_") and f.kind != "provider_described"]
    assert kinds[:2] == ["provider_degraded", "provider_recovered"], kinds
    degraded = next(f for f in c.read() if f.kind == "provider_degraded")
    assert degraded.payload.reason.startswith("keeps dying: 3 failures in a row")
    assert "longer than the output limit" in degraded.payload.reason or "not JSON" in degraded.payload.reason
    assert p.providers["hosts"].degraded == ""
    assert len(dump(tmp_path)["requests"]) == 1


def test_late_and_out_of_order_answers(tmp_path, start_daemon, caplog) -> None:
    caplog.set_level(logging.INFO, logger="providers.persistent.runner")
    # The first status poll hangs past its 1 s deadline; the calls after it are answered meanwhile.
    run = start(tmp_path, start_daemon, faults=[{"action": "status", "hang": 3}], timeouts={"status": "1s"})
    run.controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1)]))
    running_hosts(run, 1, "the host running")
    wait_until(lambda: "(status) ignored" in caplog.text, timeout=10, what="the late answer logged")
    assert process(run).restarts == 0, "a slow call is no reason to restart the process"
    pid = process(run).pid
    run.stop()
    assert not alive(pid), "the daemon's stop kills the process"


def test_a_lost_lease_kills_the_process_and_none_starts_again(tmp_path, start_daemon) -> None:
    run = start(tmp_path, start_daemon)
    c = run.controller
    pid = process(run).pid
    assert pid is not None and alive(pid)
    old = c.leases.get("provider:hosts")
    assert c.leases.release(old)  # another holder takes the lease, as after this daemon was paused past its TTL
    assert c.leases.acquire("provider:hosts", "intruder", ttl=120) is not None
    lost_after = c.last_seq()
    wait_until(lambda: any(f.kind == "lease_lost" for f in c.read(after=lost_after)), timeout=15,
               what="the daemon to notice the lost lease")
    wait_until(lambda: not alive(pid), timeout=5, what="the provider's process gone")
    # The kill comes first; the runner's loop then ends its calls and says it stopped.
    wait_until(lambda: process(run).phase == "stopped", timeout=10, what="the runner stopped")
    assert process(run).pid is None
