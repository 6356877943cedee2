"""``provisioner-persist WRAPPED``: one-shot v2 executables served through the persistent protocol.

The adapter runs for real, behind the daemon's own ``PersistentRunner``, so
what is checked is what the owner would get.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.persistent import PersistentRunner
from tests.support.simprov import SCRIPT as SIM_SCRIPT
from tests.support.simprov import hosts_config

ADAPTER = Path(sys.executable).parent / "provisioner-persist"

#: A one-shot v2 script: each run notes its environment and pid, then does what its input's requestId says.
ONE_SHOT = r"""#!/bin/sh
echo "$$ $PROVISIONER_ACTION ${PROVISIONER_TOKEN:-none} $PROVISIONER_DEADLINE $SECRET" >> "$RUNS"
case "$1" in
  describe) echo 'progress: asking'; echo '{"templates": [{"id": "t", "max_number": 2}]}' ;;
  request) echo "{\"requestId\": \"r-$PROVISIONER_TOKEN\"}" ;;
  status)
    case "$(cat "$3")" in
      *sleep*) sleep 30 ;;
      *transient*) echo "throttled by the API" >&2; exit 75 ;;
      *garbage*) echo "not json at all" ;;
      *answered*) printf '{\n  "requestId": null,\n  "message": "AWS credentials validation failed"\n}\n'; exit 1 ;;
      *) printf '{"requests": [{"requestId": "r1", "status": "complete", "machines": []}]}\n' ;;
    esac ;;
  *) echo "no such action $1" >&2; exit 64 ;;
esac
"""


@pytest.fixture
def adapted(tmp_path: Path, results: Any, tools: Any) -> Iterator[Callable[..., PersistentRunner]]:
    made: list[PersistentRunner] = []

    def make(wrapped: Path | None = None, env: str = "", **script: Any) -> PersistentRunner:
        if wrapped is None:
            wrapped = tmp_path / "oneshot"
            wrapped.write_text(ONE_SHOT)
            wrapped.chmod(0o755)
        wrapper = tmp_path / f"provider{len(made)}"
        wrapper.write_text(f'#!/bin/sh\nexec {ADAPTER} {wrapped} "$@"\n')
        wrapper.chmod(0o755)
        env_file = tmp_path / "provider.env"
        env_file.write_text(f"RUNS={tmp_path / 'runs'}\nSECRET=hunter22\n{env}")
        env_file.chmod(0o600)
        cfg = tools.provider(wrapper, env_file=env_file, mode="persistent", ping_every="0.5s",
                             start_timeout="10s", **script)
        made.append(PersistentRunner(cfg, tmp_path / "work", results, backoff_base=5.0))
        return made[-1]

    yield make
    for runner in made:
        runner.stop(wait=3.0)


def runs(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "runs"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def test_each_call_is_one_run_with_the_environment_a_one_shot_run_gets(adapted, results, tmp_path) -> None:
    runner = adapted()
    runner.submit("describe", {})
    runner.submit("request", {"template": "t", "count": 1}, token="req-1")
    by_action = {r.action: r for r in results.wait(2, timeout=15)}
    assert by_action["describe"].output.templates[0].id == "t", "progress lines before the answer are fine"
    assert by_action["request"].output.provider_request_id == "r-req-1"
    seen = {row[1]: row for row in runs(tmp_path)}
    assert seen["request"][2] == "req-1" and seen["describe"][2] == "none"
    assert abs(int(seen["request"][3]) - (time.time() + 60)) < 10, "the call's deadline"
    assert seen["request"][4] == "hunter22", "the env_file reaches the wrapped runs"


def test_exits_and_bad_output_come_back_as_they_would_from_one_shot_runs(adapted, results) -> None:
    runner = adapted()
    runner.submit("status", {"requests": [{"requestId": "transient"}]}, tag="t")
    runner.submit("status", {"requests": [{"requestId": "garbage"}]}, tag="g")
    runner.submit("reclaims", {"machines": [{"name": "h1"}]}, tag="u")
    runner.submit("status", {"requests": [{"requestId": "answered"}]}, tag="a")
    by_tag = {tag: r for r, tag, _ in results.calls} if results.wait(4, timeout=15) else {}
    assert (by_tag["t"].outcome, by_tag["t"].reason) == ("transient", "p1 status: exit 75 (transient): throttled "
                                                                       "by the API")
    assert by_tag["g"].outcome == "bad_output"
    assert "stdout is not JSON" in by_tag["g"].reason
    assert (by_tag["u"].outcome, by_tag["u"].reason) == ("failed", "p1 reclaims: exit 64: no such action reclaims")
    assert (by_tag["a"].outcome, by_tag["a"].reason) == ("failed", "p1 status: exit 1: AWS credentials validation "
                                                                       "failed"), "the answer's message, not its }"


def test_a_run_past_its_deadline_is_killed_and_gives_no_answer(adapted, results, tmp_path, tools,
                                                               caplog) -> None:
    caplog.set_level(logging.INFO, logger="providers.persistent.runner")
    runner = adapted(timeouts={"status": "1s"})
    runner.submit("status", {"requests": [{"requestId": "sleep"}]})
    (r,) = results.wait(1, timeout=15)
    assert (r.outcome, r.reason) == ("timeout", "p1 status: timed out after 1s (outcome unknown)")
    pid = int(runs(tmp_path)[0][0])
    assert tools.settle(lambda: not tools.alive(pid), within=5), "the run was killed at its deadline"
    assert tools.settle(lambda: "status killed at its deadline" in caplog.text, within=5)
    assert "late answer" not in caplog.text and "unknown call" not in caplog.text
    runner.submit("status", {"requests": [{"requestId": "r1"}]})
    assert results.wait(2, timeout=15)[1].ok, "the adapter serves on"


def test_stopping_the_provider_kills_the_runs_in_flight(adapted, results, tmp_path, tools) -> None:
    runner = adapted()
    runner.submit("status", {"requests": [{"requestId": "sleep"}]})
    deadline = time.monotonic() + 10
    while not runs(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int(runs(tmp_path)[0][0])
    runner.stop()
    assert tools.settle(lambda: not tools.alive(pid), within=3)
    assert results.wait(1)[0].outcome == "timeout"


def test_a_wrapped_program_that_is_not_there_is_a_configuration_problem(adapted, results, tmp_path) -> None:
    runner = adapted(wrapped=tmp_path / "missing")
    runner.submit("describe", {})
    (r,) = results.wait(1, timeout=15)
    assert r.outcome == "config"
    assert "exited with code 78 before its hello" in r.reason and "not an executable file" in r.reason


def test_the_simulated_provider_one_shot_behind_the_adapter(adapted, results, tmp_path) -> None:
    (tmp_path / "sim.json").write_text(json.dumps(hosts_config()))
    env = f"SIM_CONFIG={tmp_path / 'sim.json'}\nSIM_STATE_DIR={tmp_path / 'state'}\n"
    runner = adapted(wrapped=SIM_SCRIPT, env=env)
    for _ in range(2):
        runner.submit("request", {"template": "sim-small", "count": 1}, token="req-7")
    first, second = results.wait(2, timeout=20)
    assert first.ok and second.ok
    assert first.output.provider_request_id == second.output.provider_request_id, "a repeated token: one request"
