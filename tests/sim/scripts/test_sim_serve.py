"""``sim-provider serve``: the simulator as a persistent provider, and its ``print`` faults in both modes."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from tests.support.simprov import SCRIPT, Sim, hosts_config


class Served:
    """A ``sim-provider serve`` process, spoken to line by line as the daemon would."""

    def __init__(self, sim: Sim) -> None:
        self.proc = subprocess.Popen([str(SCRIPT), "serve"], env=sim.env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.n = 0
        self.hello = self.read()

    def send(self, action: str, doc: Any = None) -> str:
        self.n += 1
        call_id = f"c-{self.n}"
        line = {"id": call_id, "action": action, "deadline": time.time() + 10}
        if doc is not None:
            line["input"] = doc
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        return call_id

    def read(self) -> Any:
        return json.loads(self.proc.stdout.readline())

    def raw(self) -> bytes:
        return self.proc.stdout.readline()

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code


@pytest.fixture
def served():
    started: list[Served] = []

    def start(sim: Sim) -> Served:
        started.append(Served(sim))
        return started[-1]

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def test_hello_then_the_same_answers_as_one_shot_calls(tmp_path, served):
    sim = Sim(tmp_path, hosts_config())
    s = served(sim)
    assert s.hello == {"hello": {"protocol": 1, "actions": ["describe", "request", "status", "return", "list",
                                                            "reclaims", "usage"]}}
    ping = s.send("ping")
    assert s.read() == {"id": ping, "exit": 0, "output": {}}
    ask = s.send("request", {"token": "intent-1", "template": "sim-small", "count": 2})
    first = s.read()
    assert first["id"] == ask and first["exit"] == 0
    again = s.send("request", {"token": "intent-1", "template": "sim-small", "count": 2})
    assert s.read() == {"id": again, "exit": 0, "output": first["output"]}, "a repeated token is the same call"
    assert sim.request("intent-1", count=2) == first["output"]["requestId"], "one state for both modes"
    s.send("status", {"requests": [{"requestId": first["output"]["requestId"]}]})
    assert s.read()["output"]["requests"][0]["status"] == "complete"
    assert len(sim.dump()["requests"]) == 1
    assert s.close() == 0


def test_refusals_are_answers_with_the_exit_a_one_shot_run_would_give(tmp_path, served):
    sim = Sim(tmp_path, hosts_config(faults=[{"action": "request", "exit": 69}]))
    s = served(sim)
    call = s.send("request", {"token": "intent-1", "template": "sim-small", "count": 1})
    answer = s.read()
    assert (answer["id"], answer["exit"]) == (call, 69) and "injected fault" in answer["message"]
    s.send("request", {"token": "intent-2", "template": "nope", "count": 1})
    assert s.read()["exit"] == 65
    sim.write_config({"kind": "hosts"})  # read per call, as in one-shot mode
    s.send("describe", {})
    broken = s.read()
    assert broken["exit"] == 78 and "templates" in broken["message"]


def test_a_hanging_call_does_not_hold_up_the_others(tmp_path, served):
    sim = Sim(tmp_path, hosts_config(faults=[{"action": "request", "hang": 1.0}]))
    s = served(sim)
    slow = s.send("request", {"token": "intent-1", "template": "sim-small", "count": 1})
    time.sleep(0.2)
    fast = s.send("status", {"requests": [{"requestId": "req-sim-000001"}]})
    ping = s.send("ping")
    assert {s.read()["id"], s.read()["id"]} == {fast, ping}
    assert s.read()["id"] == slow, "answered after its hang, late"


def test_print_faults_write_what_the_daemon_cannot_read(tmp_path, served):
    sim = Sim(tmp_path, hosts_config(faults=[{"action": "status", "print": "garbage"},
                                             {"action": "status", "print": "huge"}]))
    s = served(sim)
    s.send("status", {"requests": [{"requestId": "r"}]})
    assert s.raw() == b"sim-provider: this line is not JSON\n"
    s.send("status", {"requests": [{"requestId": "r"}]})
    assert len(s.raw()) > 17 * 1024 * 1024


def test_print_faults_in_one_shot_mode(tmp_path):
    sim = Sim(tmp_path, hosts_config(faults=[{"action": "status", "print": "garbage"},
                                             {"action": "status", "print": "huge"}]))
    doc = {"requests": [{"requestId": "r"}]}
    garbage = sim.run("status", doc)
    assert (garbage.returncode, garbage.stdout) == (0, "sim-provider: this is not JSON\n")
    huge = sim.run("status", doc)
    assert huge.returncode == 0 and len(huge.stdout) > 17 * 1024 * 1024
    assert sim.run("status", doc).stdout.startswith("{")


@pytest.mark.parametrize("fault, message", [
    ({"action": "status", "print": "confetti"}, "faults[0].print: must be one of garbage, huge, found 'confetti'"),
    ({"action": "status", "print": "huge", "exit": 1}, "faults[0].exit: give exactly one of 'exit' (a code), "
                                                      "'hang' (seconds) or 'print' (garbage or huge)"),
])
def test_a_print_fault_is_checked(tmp_path, fault, message):
    sim = Sim(tmp_path, hosts_config(faults=[fault]))
    r = sim.run("describe")
    assert r.returncode == 78 and message in r.stderr
