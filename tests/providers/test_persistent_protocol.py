"""Protocol v1 against a fake provider that misbehaves on cue (tests/support/persistent_fake.py).

Real processes, with settings in tenths of seconds so each test takes about one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from providers.persistent import PersistentRunner

FAKE = Path(__file__).resolve().parents[1] / "support" / "persistent_fake.py"


class Fake(SimpleNamespace):
    runner: PersistentRunner
    log: Path

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in rows if kind is None or r["event"] == kind]

    def status(self, *request_ids: str, tag: object = None) -> None:
        self.runner.submit("status", {"requests": [{"requestId": r} for r in request_ids]}, tag=tag)


@pytest.fixture
def fake(tmp_path: Path, results: Any, tools: Any) -> Iterator[Callable[..., Fake]]:
    made: list[PersistentRunner] = []

    def make(plan: dict[str, Any] | None = None, *, backoff_base: float = 0.05, line_limit: int | None = None,
             **script: Any) -> Fake:
        folder = tmp_path / f"fake{len(made)}"
        folder.mkdir()
        program = folder / "provider"
        program.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
        program.chmod(0o755)
        (folder / "plan.json").write_text(json.dumps(plan or {}))
        env = folder / "provider.env"
        env.write_text(f"FAKE_PLAN={folder / 'plan.json'}\nFAKE_LOG={folder / 'log'}\nSECRET=hunter22\n")
        env.chmod(0o600)
        settings = {"mode": "persistent", "ping_every": "0.2s", "start_timeout": "2s",
                    "restart_backoff_max": "0.3s", "timeout": "5s", **script}
        cfg = tools.provider(program, env_file=env, **settings)
        extra = {"line_limit": line_limit} if line_limit else {}
        runner = PersistentRunner(cfg, folder / "work", results, kill_grace=0.2, backoff_base=backoff_base, **extra)
        made.append(runner)
        return Fake(runner=runner, log=folder / "log")

    yield make
    for runner in made:
        runner.stop(wait=3.0)


def wait_for(check: Callable[[], Any], within: float = 5.0, what: str = "condition") -> Any:
    until = time.monotonic() + within
    while time.monotonic() < until:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"no {what} within {within}s")


# --- starting ---------------------------------------------------------------------------------


def test_calls_are_answered_as_one_shot_runs_would_be(fake, results) -> None:
    f = fake()
    f.runner.submit("describe", {}, tag="d")
    f.status("r-1", tag="s")
    first, second = sorted(results.wait(2), key=lambda r: r.action)
    assert (first.action, first.outcome, first.output.templates[0].id) == ("describe", "ok", "t")
    assert (second.outcome, second.output.requests[0].request_id, second.exit_code) == ("ok", "r-1", 0)
    assert {tag for _, tag, _ in results.calls} == {"d", "s"}
    call = f.events("call")[1]
    assert call["input"] == {"requests": [{"requestId": "r-1"}]}
    assert time.time() + 3 < call["deadline"] <= time.time() + 5


def test_the_process_gets_the_minimal_environment_and_the_env_file(fake, results, monkeypatch) -> None:
    monkeypatch.setenv("PROVISIONER_API_TOKEN", "not-for-providers")
    f = fake()
    f.status("r-1")
    results.wait(1)
    env = f.events("start")[0]["env"]
    assert env["PROVIDER_NAME"] == "p1" and env["PROVIDER_KIND"] == "hosts"
    assert env["PROVISIONER_ACTION"] == "serve" and "PROVISIONER_DEADLINE" not in env
    assert env["SECRET"] == "hunter22" and env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert "PROVISIONER_API_TOKEN" not in env


def test_no_hello_within_start_timeout_is_a_provider_that_cannot_start(fake, results) -> None:
    f = fake({"hello": "none"}, start_timeout="0.3s", restart_backoff_max="5s", backoff_base=5.0)
    started = time.monotonic()
    f.status("r-1")
    (r,) = results.wait(1)
    assert 0.25 < time.monotonic() - started < 2.0
    assert r.outcome == "transient"
    assert r.reason == "p1 status: provider degraded: cannot start: the provider process did not say hello " \
                       "within 0.3s"
    assert f.runner.health().startswith("cannot start: the provider process did not say hello within 0.3s")
    f.status("r-2")  # degraded and down: fails at once, as exit 75 would
    assert results.wait(2)[1].outcome == "transient"
    assert f.runner.status().phase == "down"


@pytest.mark.parametrize("plan, why", [
    ({"hello": "garbage"}, "wrote a first line that is not JSON: hello there"),
    ({"hello": "protocol2"}, "speaks protocol 2; the daemon speaks 1"),
    ({"hello": "exit1"}, "exited with code 1 before its hello (cannot read my settings)"),
])
def test_a_bad_start_is_named(fake, results, plan, why) -> None:
    f = fake(plan, restart_backoff_max="5s", backoff_base=5.0)
    f.status("r-1")
    (r,) = results.wait(1)
    assert r.outcome == "transient"
    assert why in f.runner.health()


def test_exit_78_before_hello_fails_calls_as_configuration(fake, results) -> None:
    f = fake({"hello": "exit78"}, restart_backoff_max="5s", backoff_base=5.0)
    f.status("r-1")
    (r,) = results.wait(1)
    assert r.outcome == "config"
    assert "exited with code 78 before its hello (cannot read my settings)" in r.reason


# --- calls -------------------------------------------------------------------------------------


def test_answers_come_in_any_order(fake, results) -> None:
    f = fake()
    f.status("sleep=0.5", tag="slow")
    f.status("r-fast", tag="fast")
    results.wait(2)
    assert [tag for _, tag, _ in results.calls] == ["fast", "slow"]
    assert [r.output.requests[0].request_id for r, _, _ in results.calls] == ["r-fast", "sleep=0.5"]


def test_at_most_max_concurrent_calls_are_outstanding_the_rest_wait_in_order(fake, results) -> None:
    f = fake(max_concurrent=2)
    for n in range(6):
        f.status("sleep=0.15", f"n{n}", tag=n)
    results.wait(6, timeout=10)
    calls = f.events("call")
    assert max(c["inflight"] for c in calls) == 2
    # sent in the order submitted
    assert [c["input"]["requests"][1]["requestId"] for c in calls] == [f"n{n}" for n in range(6)]
    assert {tag for _, tag, _ in results.calls} == set(range(6))


def test_a_call_past_its_deadline_times_out_and_its_late_answer_is_logged_and_ignored(fake, results,
                                                                                    caplog) -> None:
    caplog.set_level(logging.INFO, logger="providers.persistent.runner")
    f = fake(timeouts={"status": "0.3s"})
    started = time.monotonic()
    f.status("sleep=0.7", tag="late")
    (r,) = results.wait(1)
    assert time.monotonic() - started > 0.25, "the call was given its time"
    assert "late answer" not in caplog.text, "the timeout came before the answer (slept 0.7 s)"
    assert (r.outcome, r.reason) == ("timeout", "p1 status: timed out after 0.3s (outcome unknown)")
    wait_for(lambda: "late answer to c-1 (status) ignored" in caplog.text, what="the late answer logged")
    f.status("r-2", tag="next")
    assert results.wait(2)[1].ok
    assert len(results.calls) == 2  # the late answer delivered nothing
    assert len(f.events("start")) == 1  # a slow call is no reason to restart


def test_exit_codes_mean_what_they_mean_for_one_shot_scripts(fake, results) -> None:
    f = fake()
    for code in (75, 69, 77, 78, 3):
        f.status(f"fail={code}", tag=code)
    by_code = {tag: r for r, tag, _ in results.calls} if results.wait(5) else {}
    assert {c: r.outcome for c, r in by_code.items()} == {75: "transient", 69: "capacity", 77: "credentials",
                                                         78: "config", 3: "failed"}
    assert by_code[75].reason == "p1 status: exit 75 (transient): told to fail"
    assert by_code[3].exit_code == 3


def test_bad_output_names_the_field_and_the_provider_serves_on(fake, results) -> None:
    f = fake()
    f.status("bad")
    f.status("r-2")
    bad, good = sorted(results.wait(2), key=lambda r: r.ok)
    assert bad.outcome == "bad_output"
    assert bad.reason.startswith("p1 status: bad output: requests[0].status: Input should be 'running'")
    assert good.ok and len(f.events("start")) == 1


def test_an_action_the_hello_does_not_list_fails_without_being_sent(fake, results) -> None:
    f = fake({"actions": ["status"]})
    f.runner.submit("usage", {"resource": "vcs"})
    (r,) = results.wait(1)
    assert (r.outcome, r.reason) == ("failed", "p1 usage: the provider does not serve usage (its hello lists status)")
    assert not f.events("call")


def test_nothing_is_sent_once_the_lease_is_no_longer_held(fake, results) -> None:
    f = fake()
    f.status("r-1")
    results.wait(1)
    f.runner.may_act = lambda: False
    f.status("r-2")
    r = results.wait(2)[1]
    assert (r.outcome, r.reason) == ("not_started", "p1 status: not started: the provider's lease is no longer held")
    assert len(f.events("call")) == 1


def test_env_file_values_are_scrubbed_from_reasons_and_the_log(fake, results, caplog) -> None:
    caplog.set_level(logging.INFO, logger="providers.persistent.runner")
    f = fake()
    f.status("secret")
    (r,) = results.wait(1)
    assert r.reason == "p1 status: exit 75 (transient): throttled for ***"
    wait_for(lambda: "using *** now" in caplog.text, what="the stderr line logged")
    assert "hunter22" not in caplog.text


def test_an_answer_keeps_its_secrets_out_and_its_identifiers_exact_as_a_one_shot_run(fake, results) -> None:
    f = fake()
    f.status("chatty")
    (r,) = results.wait(1)
    assert r.ok, r.reason
    [req] = r.output.requests
    assert (req.message, req.machines[0].name) == ("waiting, key ***", "h-1")
    f.status("leaky")
    r = results.wait(2)[1]
    assert r.outcome == "bad_output"
    assert r.reason.startswith("p1 status: bad output: requests[0].machines[0].name: holds the value of SECRET")
    assert "hunter22" not in r.model_dump_json()


def test_an_answer_to_no_call_is_logged_and_ignored(fake, results, caplog) -> None:
    f = fake()
    f.status("unknown")
    assert results.wait(1)[0].ok
    assert "answer to an unknown call c-nobody ignored" in caplog.text


# --- supervision --------------------------------------------------------------------------------


def test_two_missed_pings_kill_the_process_and_it_is_restarted(fake, results) -> None:
    f = fake({"pings": "ignore"}, ping_every="0.2s")
    started = time.monotonic()
    f.status("hang", tag="lost")
    (r,) = results.wait(1)
    assert 0.35 < time.monotonic() - started < 1.5
    assert r.outcome == "timeout"
    assert r.reason == "p1 status: the provider process missed 2 pings (0.2s apart) before answering (outcome unknown)"
    wait_for(lambda: len(f.events("start")) == 2, what="a restart")


def test_a_hung_process_is_killed_even_when_stopped(fake, results) -> None:
    f = fake(ping_every="0.2s")
    f.status("stop")  # SIGSTOP: it reads nothing and answers nothing
    (r,) = results.wait(1)
    assert "missed 2 pings" in r.reason
    wait_for(lambda: f.runner.status().phase == "ready" and len(f.events("start")) == 2, what="a restart")
    f.status("r-2")
    assert results.wait(2)[1].ok


@pytest.mark.parametrize("word, why", [
    ("garbage", "wrote a line that is not JSON: this is not json"),
    ("huge=5000", "wrote a line longer than the output limit (1000 bytes)"),
    ("exit=3", "exited with code 3"),
    ("close", "closed its stdout"),
])
def test_a_misbehaving_process_is_killed_and_restarted_and_queued_calls_are_sent_to_the_next(
        fake, results, word, why) -> None:
    f = fake(max_concurrent=1, line_limit=1000)
    f.status(word, tag="in flight")
    f.status("r-queued", tag="queued")
    results.wait(2)
    lost, queued = (dict((tag, r) for r, tag, _ in results.calls)[t] for t in ("in flight", "queued"))
    assert lost.outcome == "timeout"
    assert lost.reason.startswith(f"p1 status: the provider process {why} before answering (outcome unknown)")
    assert queued.ok and queued.output.requests[0].request_id == "r-queued"
    assert len(f.events("start")) == 2
    assert f.runner.status().restarts == 1 and f.runner.health() == ""


def test_a_line_past_the_16_mib_output_limit_kills_the_process(fake, results) -> None:
    f = fake()
    f.status(f"huge={16 * 1024 * 1024 + 10}")
    (r,) = results.wait(1, timeout=15)
    assert "wrote a line longer than the output limit (16777216 bytes)" in r.reason


def test_a_process_that_keeps_dying_is_degraded_until_one_serves_again(fake, results) -> None:
    f = fake(max_concurrent=1)
    for n in range(3):
        f.status("exit=3", tag=n)
        results.wait(n + 1)
        if n < 2:
            assert f.runner.health() == ""
            wait_for(lambda: f.runner.status().phase == "ready", what="a restart")
    assert f.runner.health() == ("keeps dying: 3 failures in a row, the last: the process exited with code 3")
    if f.runner.status().phase == "down":
        f.status("r-refused")  # down and degraded: fails at once, as exit 75 would
        assert results.wait(4)[3].reason == ("p1 status: provider degraded: keeps dying: 3 failures in a row, "
                                             "the last: the process exited with code 3")
    wait_for(lambda: f.runner.status().phase == "ready", what="a restart")
    n = len(results.calls)
    f.status("r-ok")  # a new process is up: calls are served again, and it is well once it answers
    assert results.wait(n + 1)[n].ok
    assert f.runner.health() == ""


def test_restart_backoff_doubles_and_is_capped(fake, results, caplog) -> None:
    """The waits the runner announces double from the base up to the cap, and no start comes sooner (a loaded
    machine only makes the gaps longer, so the gaps are checked against the waits from below only)."""
    caplog.set_level(logging.INFO, logger="providers.persistent.runner")
    f = fake({"hello": "exit1"}, backoff_base=0.05, restart_backoff_max="0.3s")
    f.status("r-1")
    results.wait(1)
    wait_for(lambda: len(f.events("start")) >= 7, within=30, what="seven starts")
    waits = [float(m) for m in re.findall(r"trying again in ([0-9.]+)s", caplog.text)]
    assert waits[:6] == [0.05, 0.1, 0.2, 0.3, 0.3, 0.3]
    times = [e["t"] for e in f.events("start")]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(gap >= wait for gap, wait in zip(gaps[:6], waits)), (gaps, waits)
    assert f.runner.status().failures >= 6


def test_a_changed_env_file_restarts_the_process_once_its_calls_end(fake, results, tmp_path) -> None:
    f = fake(ping_every="0.1s")
    f.status("sleep=0.5", tag="in flight")
    wait_for(lambda: f.events("call"), what="the call sent")
    env = f.log.parent / "provider.env"
    env.write_text(env.read_text().replace("hunter22", "rotated-secret"))
    (r,) = results.wait(1)
    assert r.ok  # answered by the process it was sent to
    wait_for(lambda: len(f.events("start")) == 2, what="a restart")
    assert f.events("start")[1]["env"]["SECRET"] == "rotated-secret"
    assert f.runner.status().failures == 0


def test_stop_kills_the_group_first_and_ends_every_call(fake, results, tools) -> None:
    f = fake({"child": True}, max_concurrent=1)
    f.status("hang", tag="in flight")
    f.status("r-2", tag="queued")
    wait_for(lambda: f.events("child") and f.events("call"), what="the call sent")
    leader, child = f.events("start")[0]["pid"], f.events("child")[0]["pid"]
    assert set(tools.group_members(leader)) == {leader, child}
    f.runner.stop()
    assert tools.settle(lambda: not tools.group_members(leader))
    ends = {tag: r for r, tag, _ in results.calls}
    assert ends["in flight"].outcome == "timeout"
    assert ends["in flight"].reason == "p1 status: stopped by the daemon before it finished (outcome unknown)"
    assert ends["queued"].outcome == "not_started"
    f.status("r-3", tag="after")
    assert results.wait(3)[2].outcome == "not_started"
    assert f.runner.status().phase == "stopped"


def test_a_runner_never_asked_anything_starts_nothing(fake) -> None:
    f = fake()
    time.sleep(0.2)
    assert not f.events("start")
    f.runner.stop()


def test_a_process_killed_from_outside_is_restarted(fake, results, caplog) -> None:
    f = fake()
    f.status("r-1")
    results.wait(1)
    os.kill(f.runner.status().pid, signal.SIGKILL)
    wait_for(lambda: len(f.events("start")) == 2 and f.runner.status().phase == "ready", what="a restart")
    assert "persistent provider was killed by signal 9; restarting in" in caplog.text
    f.status("r-2")
    assert results.wait(2)[1].ok
