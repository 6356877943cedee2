"""The fault wrapper of the liar soak: seeded call faults, hidden machines, returns that return nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemons import wait_until
from tests.support.simprov import SIM, Sim, hosts_config, scripts_module, units_config

LIAR = SIM / "scripts" / "sim-liar"
liar = scripts_module("simprov_liar")


class Liar(Sim):
    """A simulated provider behind the wrapper, its schedule in ``liar.json``."""

    def __init__(self, root: Path, config: Any, schedule: dict[str, Any]) -> None:
        super().__init__(root, config)
        self.schedule_path = root / "liar.json"
        self.schedule_path.write_text(json.dumps({"seed": 1, "timeout": 1.0, **schedule}))

    def argv(self, action: str, doc: Any = None) -> list[str]:
        return [str(LIAR), action, "-f", str(self.input_file({} if doc is None else doc))]

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(LIAR_CONFIG=str(self.schedule_path), **extra)

    def told(self) -> dict[str, Any]:
        """What the wrapper kept of its own doings."""
        return json.loads((self.state_dir / "liar.json").read_text())


def _request(sim: Sim, token: str, count: int = 1) -> subprocess.CompletedProcess[str]:
    return sim.run("request", {"token": token, "template": "sim-small", "count": count})


def test_without_faults_it_answers_as_the_simulator_does(tmp_path):
    sim = Liar(tmp_path, hosts_config(), {})
    rid = sim.request("t-1", count=2)
    assert sim.request("t-1", count=2) == rid, "the simulator's idempotency shows through"
    assert [m["status"] for m in sim.status(rid)[0]["machines"]] == ["running", "running"]
    assert len(sim.call("list")["machines"]) == 2
    assert sim.told()["calls"] == 4 and sim.told()["injected"] == {}


@pytest.mark.parametrize("kind, code, made", [("transient", 75, 0), ("transient_after", 75, 1), ("capacity", 69, 0)])
def test_an_exit_before_the_work_changes_nothing_and_one_after_it_hides_the_answer(tmp_path, kind, code, made):
    sim = Liar(tmp_path, hosts_config(), {"calls": {kind: 1.0}})
    r = _request(sim, "t-1")
    assert r.returncode == code and "injected" in r.stderr
    assert len(sim.dump()["machines"]) == made
    assert sim.told()["injected"] == {kind: 1}


def test_capacity_is_only_refused_to_requests(tmp_path):
    sim = Liar(tmp_path, hosts_config(), {"calls": {"capacity": 1.0}})
    assert sim.run("list").returncode == 0
    assert sim.run("describe").returncode == 0


@pytest.mark.slow  # real processes
def test_a_killed_script_dies_before_inside_or_after_the_work(tmp_path):
    """SIGKILL before the work or inside it (the world's change is never saved) makes nothing; after it,
    the machine exists and no answer came: a repeat of the token finds it."""
    sim = Liar(tmp_path, hosts_config(), {"calls": {"killed": 1.0}})
    made = {}
    for n in range(1, 40):
        before = len(sim.dump()["machines"])
        r = _request(sim, f"t-{n}")
        assert r.returncode == -9 and r.stdout == ""
        fault = liar.call_fault(liar.load(str(sim.schedule_path)), "request", n)
        made.setdefault(fault.at, set()).add(len(sim.dump()["machines"]) - before)
        if len(made) == 3:
            break
    assert made == {"before": {0}, "inside": {0}, "after": {1}}
    assert set(sim.told()["injected"]) == {"killed_before", "killed_inside", "killed_after"}


def test_a_late_answer_comes_after_the_work_is_done(tmp_path):
    sim = Liar(tmp_path, hosts_config(), {"timeout": 10.0, "calls": {"late": 1.0}})
    run = subprocess.Popen(sim.argv("request", {"token": "t-1", "template": "sim-small", "count": 1}), env=sim.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: sim.dump()["machines"], timeout=10, what="the work to be done")
        assert run.poll() is None, "the work is done, and no answer yet: it would come past the timeout"
    finally:
        run.kill()
        run.communicate()


def test_slow_and_late_answers_come_near_and_past_the_timeout():
    cfg = liar.parse({"seed": 4, "timeout": 10, "calls": {"slow": 0.5, "late": 0.5}})
    faults = [liar.call_fault(cfg, "status", n) for n in range(1, 400)]
    slow = [f.sleep for f in faults if f.kind == "slow"]
    late = [f.sleep for f in faults if f.kind == "late"]
    assert slow and late and len(slow) + len(late) == len(faults)
    assert all(5 <= s <= 9 for s in slow) and all(15 <= s <= 25 for s in late)


def test_the_schedule_is_the_seed_s():
    a = liar.parse({"seed": 1, "timeout": 1, "calls": {"transient": 0.2, "killed": 0.1}})
    b = liar.parse({"seed": 2, "timeout": 1, "calls": {"transient": 0.2, "killed": 0.1}})
    draws_a = [liar.call_fault(a, "request", n) for n in range(1, 2001)]
    assert draws_a == [liar.call_fault(a, "request", n) for n in range(1, 2001)]
    assert draws_a != [liar.call_fault(b, "request", n) for n in range(1, 2001)]
    transient = sum(1 for f in draws_a if f is not None and f.kind == "transient")
    assert 300 < transient < 500, "about a fifth of the calls"


def test_list_hides_a_machine_for_its_window_only(tmp_path):
    sim = Liar(tmp_path, hosts_config(), {"hide": {"rate": 1.0, "after": 5, "short": 10, "long": 10}})
    sim.request("t-1")
    [m] = sim.dump()["machines"].values()
    launched = int(m["launch_time"])
    listed = []
    for dt in (4, 6, 14, 16):
        sim.set_now(launched + dt)
        listed.append(len(sim.call("list")["machines"]))
    assert listed == [1, 0, 0, 1]
    assert sim.told()["hidden"] == {m["machineId"]: {"start": launched + 5, "end": launched + 15,
                                                     "first": launched + 6}}
    assert sim.told()["injected"] == {"hide": 1}


def test_hidings_are_shorter_or_longer_as_the_schedule_says():
    cfg = liar.parse({"seed": 3, "timeout": 1, "hide": {"rate": 0.5, "after": {"min": 0, "max": 4},
                                                        "short": {"min": 1, "max": 2}, "long": {"min": 8, "max": 9},
                                                        "long_share": 0.5}})
    windows = [liar.hide_window(cfg, f"i-{n}", 100.0) for n in range(400)]
    hidden = [w for w in windows if w is not None]
    assert 150 < len(hidden) < 250
    lengths = [end - start for start, end in hidden]
    assert all(1 <= x <= 2 or 8 <= x <= 9 for x in lengths)
    assert any(x < 2 for x in lengths) and any(x > 8 for x in lengths)
    assert all(100 <= start <= 104 for start, _ in hidden)


def test_a_lying_return_is_complete_while_the_machine_runs_on_and_the_next_return_tells_the_truth(tmp_path):
    sim = Liar(tmp_path, hosts_config(), {"lie": {"rate": 1.0, "per_thing": 1}})
    sim.request("t-1")
    [m] = sim.call("list")["machines"]
    doc = {"token": "r-1", "machines": [{"name": m["name"], "machineId": m["machineId"]}]}
    lie = sim.call("return", doc)["requestId"]
    assert sim.call("return", doc)["requestId"] == lie, "a repeat of the token gets the same answer"
    [st] = sim.status(lie)
    assert st["status"] == "complete" and [x["status"] for x in st["machines"]] == ["terminated"]
    assert [x["machineId"] for x in sim.call("list")["machines"]] == [m["machineId"]], "it runs on"
    assert sim.told()["lies"]["r-1"]["things"] == [m["machineId"]]
    truth = sim.call("return", {**doc, "token": "r-2"})["requestId"]
    assert truth != lie and sim.status(truth)[0]["status"] == "complete"
    assert sim.call("list")["machines"] == [], "one lie about it at most"


def test_a_lying_units_return_keeps_the_grant_and_a_partial_one_tells_the_truth(tmp_path):
    sim = Liar(tmp_path, units_config(), {"lie": {"rate": 1.0, "per_thing": 1}})
    sim.call("request", {"token": "g-1", "resource": "vcs", "count": 4})
    sim.call("request", {"token": "g-2", "resource": "vcs", "count": 2})
    lie = sim.call("return", {"token": "r-1", "resource": "vcs", "count": 4, "grants": ["g-1"]})["requestId"]
    assert sim.status(lie)[0]["status"] == "complete"
    assert {g["token"]: g["count"] for g in sim.call("list")["grants"]} == {"g-1": 4, "g-2": 2}
    part = sim.call("return", {"token": "r-2", "resource": "vcs", "count": 1, "grants": [{"token": "g-2", "count": 1}]})
    assert not part["requestId"].startswith(liar.LIE_PREFIX)
    assert {g["token"]: g["count"] for g in sim.call("list")["grants"]} == {"g-1": 4, "g-2": 1}


def test_status_answers_lies_and_truths_in_the_order_asked(tmp_path):
    sim = Liar(tmp_path, hosts_config(), {"lie": {"rate": 1.0}})
    real = sim.request("t-1", count=2)
    a, b = sim.call("list")["machines"]
    lie = sim.call("return", {"token": "r-1", "machines": [{"name": a["name"], "machineId": a["machineId"]}]})
    ids = [st["requestId"] for st in sim.status(lie["requestId"], real, "no-such")]
    assert ids == [lie["requestId"], real, "no-such"]


@pytest.mark.parametrize("schedule, problem", [
    ({"seed": 1}, "timeout: must be the daemon's script timeout"),
    ({"seed": 1, "timeout": 1, "calls": {"slow": 0.7, "late": 0.7}}, "add up to 1.4"),
    ({"seed": 1, "timeout": 1, "calls": {"slowly": 0.1}}, "calls: unknown key 'slowly'"),
    ({"seed": 1, "timeout": 1, "hide": {"rate": 2}}, "hide.rate: must be a chance"),
    ({"seed": 1, "timeout": 1, "hide": {"short": {"min": 3, "max": 1}}}, "hide.short"),
])
def test_a_broken_schedule_exits_78_naming_the_field(tmp_path, schedule, problem):
    sim = Liar(tmp_path, hosts_config(), {})
    sim.schedule_path.write_text(json.dumps(schedule))
    r = sim.run("describe")
    assert r.returncode == 78 and problem in r.stderr
