"""Concurrent calls share one state folder: no overbooking, nothing lost."""

from __future__ import annotations

import json
import subprocess

from tests.support.simprov import Sim, hosts_config, live_machines


def _parallel(sim: Sim, docs: list[dict]) -> list[tuple[int, str]]:
    procs = [subprocess.Popen(sim.argv("request", d), env=sim.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for d in docs]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=20)
        out.append((p.returncode, stdout))
    return out


def test_parallel_requests_never_exceed_capacity(tmp_path):
    sim = Sim(tmp_path, hosts_config(templates=[{"id": "sim-small", "max_number": 5}]))
    results = _parallel(sim, [{"token": f"t{i}", "template": "sim-small", "count": 1} for i in range(8)])
    codes = sorted(code for code, _ in results)
    assert codes == [0] * 5 + [69] * 3
    ids = {json.loads(stdout)["requestId"] for code, stdout in results if code == 0}
    assert len(ids) == 5
    machines = live_machines(sim.dump())
    assert len(machines) == 5
    assert {m["request_id"] for m in machines} == ids


def test_parallel_requests_lose_no_machine(tmp_path):
    sim = Sim(tmp_path, hosts_config())
    results = _parallel(sim, [{"token": f"t{i}", "template": "sim-small", "count": 3} for i in range(8)])
    assert [code for code, _ in results] == [0] * 8
    dump = sim.dump()
    assert len(dump["requests"]) == 8
    assert len(dump["machines"]) == 24
    assert len({m["name"] for m in dump["machines"].values()}) == 24
    assert dump["next_machine"] == 25
    assert all(len(r["machines"]) == 3 for r in dump["requests"].values())
