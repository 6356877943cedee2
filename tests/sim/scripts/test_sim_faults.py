"""Injected faults, seeded randomness and hangs."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.simprov import Sim, hosts_config


def test_fault_queue_then_normal(tmp_path):
    sim = Sim(tmp_path, hosts_config(faults=[
        {"action": "request", "exit": 69, "times": 2},
        {"action": "status", "exit": 77},
        {"action": "request", "exit": 75},
    ]))
    doc = {"token": "intent-1", "template": "sim-small", "count": 1}
    assert [sim.run("request", doc).returncode for _ in range(4)] == [69, 69, 75, 0]
    assert len(sim.dump()["machines"]) == 1
    rid = sim.request("intent-1")
    assert sim.run("status", {"requests": [{"requestId": rid}]}).returncode == 77
    assert sim.status(rid)[0]["status"] == "complete"
    assert sim.run("describe").returncode == 0


def test_faulted_call_creates_nothing(tmp_path):
    sim = Sim(tmp_path, hosts_config(faults=[{"action": "request", "exit": 1}]))
    r = sim.run("request", {"token": "intent-1", "template": "sim-small", "count": 3})
    assert r.returncode == 1 and "injected fault" in r.stderr
    dump = sim.dump()
    assert dump["machines"] == {} and dump["tokens"] == {}


@pytest.mark.parametrize("rate, code", [("transient_rate", 75), ("capacity_error_rate", 69), ("fail_rate", 1)])
def test_certain_random_failure_exits_with_its_code(tmp_path, rate, code):
    sim = Sim(tmp_path, hosts_config(**{rate: 1.0}))
    for token in ("a", "b"):
        assert sim.run("request", {"token": token, "template": "sim-small", "count": 1}).returncode == code
    assert sim.dump()["machines"] == {}


def test_random_failures_are_per_attempt_so_retries_get_through(tmp_path):
    sim = Sim(tmp_path, hosts_config(transient_rate=0.5))
    doc = {"token": "intent-1", "template": "sim-small", "count": 1}
    codes = [sim.run("request", doc).returncode for _ in range(8)]
    assert set(codes) == {0, 75}
    assert len(sim.dump()["machines"]) == 1


def _story(sim: Sim, tokens: list[str]) -> dict[str, list[tuple]]:
    for t in tokens:
        sim.request(t, count=3)
    dump = sim.dump()
    by_token = {r["token"]: r["machines"] for r in dump["requests"].values()}
    return {
        t: [(dump["machines"][m]["ready_at"], dump["machines"][m]["doomed"], dump["machines"][m]["reclaim_at"])
            for m in mids]
        for t, mids in by_token.items()
    }


def test_seeded_runs_repeat_and_do_not_depend_on_call_order(tmp_path):
    chaotic = hosts_config(lead_time={"min": 10, "max": 600}, machine_fail_rate=0.4, reclaim_rate=0.5,
                           reclaim_after={"min": 60, "max": 3600})
    tokens = ["t1", "t2", "t3", "t4"]
    a = _story(Sim(tmp_path / "a", chaotic), tokens)
    b = _story(Sim(tmp_path / "b", chaotic), tokens)
    assert a == b
    c = _story(Sim(tmp_path / "c", chaotic), list(reversed(tokens)))
    assert c == a
    outcomes = [x for story in a.values() for x in story]
    assert len({o[0] for o in outcomes}) > 1 and {o[1] for o in outcomes} == {True, False}
    d = _story(Sim(tmp_path / "d", {**chaotic, "seed": 2}), tokens)
    assert d != a


def test_hang_does_the_work_then_times_out(tmp_path):
    """A timed-out call is an unknown outcome: the token lookup finds what it did."""
    sim = Sim(tmp_path, hosts_config(faults=[{"action": "request", "hang": 60}]))
    doc = {"token": "intent-1", "template": "sim-small", "count": 2}
    with pytest.raises(subprocess.TimeoutExpired):
        sim.run("request", doc, timeout=1.0)
    assert len(sim.dump()["machines"]) == 2
    rid = sim.request("intent-1", count=2)
    assert len(sim.status(rid)[0]["machines"]) == 2
    assert len(sim.dump()["machines"]) == 2
