"""The script runner against real scripts: outcomes, limits, process groups, environment."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from messages.scripts import Accepted

#: The repository, where a Python process finds the daemon's packages.
ROOT = Path(__file__).resolve().parents[2]
OK_JSON = """echo '{"requestId": "r-1", "message": "fine"}'"""


def test_ok_run_returns_parsed_output_and_tag_on_a_runner_thread(script, make_runner, results, inputs, tools):
    path = script(
        f"""#!/bin/sh
[ "$1" = request ] && [ "$2" = -f ] || exit 3
stat -c %a "$3" >&2
cat "$3" >&2
echo >&2
echo "token=$PROVISIONER_TOKEN" >&2
{OK_JSON}
"""
    )
    runner = make_runner(path)
    runner.submit("request", {"template": "T1", "count": 2}, token="tok-1", tag=("order", 7))
    [result] = results.wait(1)
    _, tag, thread = results.calls[0]
    assert result.outcome == "ok", result.reason
    assert result.output == Accepted(provider_request_id="r-1", message="fine")
    assert (result.exit_code, result.token, result.reason) == (0, "tok-1", "")
    assert tag == ("order", 7)
    assert thread != threading.current_thread().name
    mode, doc, token_line = result.stderr_tail.splitlines()
    assert mode == "600"
    assert json.loads(doc) == {"token": "tok-1", "template": "T1", "count": 2, "tags": {}}
    assert token_line == "token=tok-1"
    assert tools.left(inputs) == []


def test_garbage_stdout_is_bad_output(script, make_runner, results):
    runner = make_runner(script("#!/bin/sh\necho 'this is not json'\n"))
    runner.submit("status", {"requests": [{"requestId": "r-1"}]})
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert result.reason.startswith("p1 status: bad output: stdout is not JSON")


def test_wrong_shape_names_the_field(script, make_runner, results):
    runner = make_runner(script("""#!/bin/sh\necho '{"requests": [{"requestId": "r", "status": "weird"}]}'\n"""))
    runner.submit("status", {"requests": [{"requestId": "r"}]})
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert "p1 status: bad output: requests[0].status:" in result.reason
    assert "'weird'" in result.reason


def test_log_lines_before_the_json_are_tolerated(script, make_runner, results):
    runner = make_runner(script(f"#!/bin/sh\necho 'starting up'\necho 'calling the API'\n{OK_JSON}\n"))
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert result.output.provider_request_id == "r-1"


def test_output_longer_than_one_read_arrives_whole(script, make_runner, results):
    # Several pipe reads' worth of log lines on stdout before the JSON, written in small pieces, and a
    # stderr tail long enough to take more than one read too: a short read ends a stream only at its end.
    path = script(f"""#!/bin/sh
i=0
while [ $i -lt 3000 ]; do echo "log line $i of the call, padded to be long enough to count"; i=$((i+1)); done
head -c 150000 /dev/zero | tr '\\0' 'e' >&2
echo >&2
echo 'the last words' >&2
{OK_JSON}
""")
    runner = make_runner(path)
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert result.output.provider_request_id == "r-1"
    assert result.stderr_tail.endswith("e" * 1000 + "\nthe last words\n")


def test_non_utf8_stdout_is_bad_output(script, make_runner, results):
    runner = make_runner(script("#!/bin/sh\nprintf '\\377\\376{}'\n"))
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert "stdout is not UTF-8 (byte 0xff at offset 0)" in result.reason


def test_huge_stdout_is_cut_off_and_the_group_killed(script, make_runner, results, tmp_path, tools):
    path = script(
        f"""#!/bin/sh
echo $$ > {tmp_path}/pgid
head -c 100000000 /dev/zero | tr '\\0' 'x'
echo '{{}}'
"""
    )
    runner = make_runner(path, timeout=8)
    started = time.monotonic()
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "bad_output"
    assert result.reason == "p1 describe: stdout exceeds 16 MiB"
    assert time.monotonic() - started < 6
    pgid = int((tmp_path / "pgid").read_text())
    assert tools.settle(lambda: not tools.group_members(pgid))


@pytest.mark.parametrize("trap", ["", "trap '' TERM"])
def test_timeout_kills_the_group(script, make_runner, results, tmp_path, tools, trap):
    path = script(
        f"""#!/bin/sh
{trap}
echo $$ > {tmp_path}/pgid
sleep 30 &
echo "still working" >&2
sleep 30
"""
    )
    runner = make_runner(path, timeout=0.5)
    started = time.monotonic()
    runner.submit("request", {"template": "T1", "count": 1}, token="t-9")
    [result] = results.wait(1)
    elapsed = time.monotonic() - started
    assert result.outcome == "timeout"
    assert result.exit_code is None
    assert result.reason == "p1 request: timed out after 0.5s (outcome unknown): still working"
    assert result.token == "t-9"
    assert 0.5 <= elapsed < 3
    pgid = int((tmp_path / "pgid").read_text())
    assert tools.settle(lambda: not tools.group_members(pgid))


def test_per_action_timeout_overrides_the_default(script, make_runner, results):
    path = script("#!/bin/sh\nsleep 1\necho '{\"requests\": []}'\n")
    runner = make_runner(path, timeout=5, timeouts={"status": 0.3})
    runner.submit("status", {"requests": [{"requestId": "r"}]}, tag="status")
    runner.submit("reclaims", {"machines": [{"name": "h1"}]}, tag="reclaims")
    results.wait(2)
    outcomes = {tag: r.outcome for r, tag, _ in results.calls}
    assert outcomes == {"status": "timeout", "reclaims": "ok"}


@pytest.mark.parametrize(
    ("code", "outcome", "label"),
    [
        (75, "transient", " (transient)"),
        (69, "capacity", " (capacity unavailable)"),
        (77, "credentials", " (credentials or permission)"),
        (78, "config", " (configuration)"),
        (1, "failed", ""),
    ],
)
def test_exit_codes_map_to_outcomes(script, make_runner, results, code, outcome, label):
    path = script(f"#!/bin/sh\necho 'details first' >&2\necho 'InsufficientInstanceCapacity' >&2\n\nexit {code}\n")
    runner = make_runner(path)
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == outcome
    assert result.exit_code == code
    assert result.output is None
    assert result.reason == f"p1 request: exit {code}{label}: InsufficientInstanceCapacity"


def test_failure_message_on_stdout_is_used_when_stderr_is_silent(script, make_runner, results):
    runner = make_runner(script("#!/bin/sh\necho 'quota exceeded'\nexit 2\n"))
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.reason == "p1 describe: exit 2: quota exceeded"


@pytest.mark.parametrize("log", ["", "echo 'loading the plugin' >&2\n"], ids=["silent stderr", "a log line on stderr"])
def test_a_failed_runs_json_answer_gives_its_message_over_several_lines(script, make_runner, results, tmp_path, log):
    """IBM's awsv2 plugin prints its answer over several lines: the reason is its message, not ``}``
    nor a log line (scrubbed of the env file's secrets like the rest)."""
    env_file = tmp_path / "p1.env"
    env_file.write_text('API_KEY="s3cr3t-value-42"\n')
    answer = '{\n  "requestId": null,\n  "message": "AWS credentials validation failed for $API_KEY"\n}'
    runner = make_runner(script(f"#!/bin/sh\n{log}cat <<END\n{answer}\nEND\nexit 1\n"),
                         env_file=env_file)
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == "failed"
    assert result.reason == "p1 request: exit 1: AWS credentials validation failed for ***"


def test_a_failed_runs_reason_skips_stderr_lines_of_mere_punctuation(script, make_runner, results):
    """No JSON answer: the last stderr line that says something, not a closing brace of a dump."""
    path = script("#!/bin/sh\necho 'Traceback: no module named boto3' >&2\necho '  }' >&2\necho ')' >&2\n"
                  "echo '{\"requestId\": null' \nexit 1\n")
    runner = make_runner(path)
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.reason == "p1 describe: exit 1: Traceback: no module named boto3"


def test_long_stderr_keeps_only_a_bounded_tail(script, make_runner, results):
    long_line = "x" * 500
    path = script(f"#!/bin/sh\nhead -c 1000000 /dev/zero | tr '\\0' 'e' >&2\necho >&2\necho {long_line} >&2\nexit 1\n")
    runner = make_runner(path)
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert len(result.stderr_tail) <= 64 * 1024
    assert result.stderr_tail.endswith("x" * 500 + "\n")
    assert result.reason == "p1 describe: exit 1: " + "x" * 297 + "..."


def test_killed_by_signal_is_a_failure(script, make_runner, results):
    runner = make_runner(script("#!/bin/sh\nkill -KILL $$\n"))
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "failed"
    assert result.exit_code == -signal.SIGKILL
    assert result.reason == "p1 describe: killed by signal SIGKILL"


def test_grandchild_with_its_own_output_is_killed(script, make_runner, results, tmp_path, tools):
    path = script(
        f"""#!/bin/sh
sleep 100 >/dev/null 2>&1 &
echo $! > {tmp_path}/child
echo $$ > {tmp_path}/pgid
{OK_JSON}
"""
    )
    runner = make_runner(path)
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    child = int((tmp_path / "child").read_text())
    assert tools.settle(lambda: not tools.alive(child))
    assert not tools.group_members(int((tmp_path / "pgid").read_text()))


def test_grandchild_holding_stdout_does_not_hold_the_run(script, make_runner, results, tmp_path, tools):
    path = script(f"#!/bin/sh\necho $$ > {tmp_path}/pgid\nsleep 100 &\n{OK_JSON}\n")
    # A long grace: the run must end because the group is killed at exit, not because draining gave up.
    runner = make_runner(path, timeout=8, grace=4)
    started = time.monotonic()
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert time.monotonic() - started < 2
    pgid = int((tmp_path / "pgid").read_text())
    assert tools.settle(lambda: not tools.group_members(pgid))


def test_escaped_grandchild_holding_stdout_costs_at_most_the_grace(script, make_runner, results, tmp_path, tools):
    path = script(f"#!/bin/sh\nsetsid sleep 100 &\necho $! > {tmp_path}/child\n{OK_JSON}\n")
    runner = make_runner(path, timeout=5, grace=0.3)
    started = time.monotonic()
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    try:
        [result] = results.wait(1)
        assert result.outcome == "ok", result.reason
        assert time.monotonic() - started < 2
    finally:
        os.kill(int((tmp_path / "child").read_text()), signal.SIGKILL)


def test_env_file_secrets_are_scrubbed(script, make_runner, results, tmp_path):
    env_file = tmp_path / "p1.env"
    env_file.write_text('# credentials\nexport API_KEY="s3cr3t-value-42"\nREGION=eu\n')
    path = script("#!/bin/sh\necho \"login with $API_KEY failed in $REGION\" >&2\nexit 77\n")
    runner = make_runner(path, env_file=env_file)
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "credentials"
    assert result.reason == "p1 describe: exit 77 (credentials or permission): login with *** failed in eu"
    assert "s3cr3t" not in result.stderr_tail
    assert "***" in result.stderr_tail


def test_bad_env_file_line_is_a_config_result_naming_the_line(script, make_runner, results, tmp_path):
    env_file = tmp_path / "p1.env"
    env_file.write_text("A=1\nthis line has hunter2 in it\n")
    marker = tmp_path / "ran"
    runner = make_runner(script(f"#!/bin/sh\ntouch {marker}\n"), env_file=env_file)
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "config"
    assert result.reason == f"p1 describe: {env_file}:2: expected KEY=VALUE"
    assert "hunter2" not in result.reason
    assert not marker.exists()


ENV_DUMP = """#!/usr/bin/env python3
import json, os, sys
print(json.dumps(dict(os.environ)), file=sys.stderr)
print('{"requestId": "r"}')
"""


def test_only_the_allowed_environment_reaches_the_script(script, make_runner, results, tmp_path, monkeypatch):
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("HOME", "/home/daemon")
    monkeypatch.setenv("CONTROLLER_SECRET", "do-not-pass")
    env_file = tmp_path / "p1.env"
    env_file.write_text("CLOUD_KEY='a b'\n")  # short: not scrubbed from the dump
    runner = make_runner(script(ENV_DUMP), env_file=env_file, timeout=30)
    before = time.time()
    runner.submit("return", {"machines": [{"name": "h1", "machineId": "i-1"}]}, token="tok-r")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    env = json.loads(result.stderr_tail)
    deadline = int(env.pop("PROVISIONER_DEADLINE"))
    assert before + 30 - 2 <= deadline <= time.time() + 30
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/daemon",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "CLOUD_KEY": "a b",
        "PROVIDER_NAME": "p1",
        "PROVIDER_KIND": "hosts",
        "PROVISIONER_ACTION": "return",
        "PROVISIONER_TOKEN": "tok-r",
    }


def test_lsf_style_gets_the_pro_and_hf_families(script, make_runner, results, tmp_path, monkeypatch):
    monkeypatch.delenv("TZ", raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    folder = script(ENV_DUMP, name="getAvailableTemplates").parent
    conf = tmp_path / "conf"
    runner = make_runner(folder, style="lsf", conf_dir=str(conf), script_options="-v", home=tmp_path / "home")
    runner.submit("describe", {})
    [result] = results.wait(1)
    env = json.loads(result.stderr_tail)
    work = tmp_path / "work"
    expected = {
        "HOME": str(tmp_path / "home"),
        "PRO_CONF_DIR": str(conf),
        "PRO_DATA_DIR": str(work),
        "PRO_LSF_LOGDIR": str(work / "log"),
        "PRO_LSF_TOP": str(conf),
        "SCRIPT_OPTIONS": "-v",
        "HF_PROVIDER_NAME": "p1",
        "HF_PROVIDER_CONFDIR": str(conf),
        "HF_PROVIDER_WORKDIR": str(work),
        "HF_PROVIDER_LOGDIR": str(work / "log"),
        "HF_TOP": str(conf),
        "HF_CONFDIR": str(conf),
        "HF_WORKDIR": str(work),
        "HF_LOGDIR": str(work / "log"),
    }
    assert {k: env.get(k) for k in expected} == expected
    assert env["HF_VERSION"]
    assert "TZ" not in env and "PROVISIONER_TOKEN" not in env
    assert (work / "log").is_dir()


def test_concurrency_is_capped_and_fifo(script, make_runner, results, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    path = script(
        f"""#!/usr/bin/env python3
import json, os, sys, time
token = os.environ["PROVISIONER_TOKEN"]
start = time.time()
time.sleep(0.3)
with open("{marks}/" + token, "w") as f:
    json.dump([start, time.time()], f)
print('{{"requestId": "r"}}')
"""
    )
    runner = make_runner(path, max_concurrent=2)
    for i in range(4):
        runner.submit("request", {"template": "T1", "count": 1}, token=f"t{i}")
    assert [r.outcome for r in results.wait(4)] == ["ok"] * 4
    spans = {p.name: json.loads(p.read_text()) for p in marks.iterdir()}
    events = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2
    assert max(spans["t0"][0], spans["t1"][0]) < min(spans["t2"][0], spans["t3"][0])


def test_stop_kills_running_scripts_and_answers_every_submit(script, make_runner, results, tmp_path, tools):
    pids = tmp_path / "pids"
    pids.mkdir()
    path = script(f"#!/bin/sh\necho $$ > {pids}/$PROVISIONER_TOKEN\nsleep 30\n")
    runner = make_runner(path, max_concurrent=2, timeout=30)
    for i in range(4):
        runner.submit("request", {"template": "T1", "count": 1}, token=f"t{i}", tag=i)
    assert tools.settle(lambda: len([p for p in pids.iterdir() if p.read_text().strip()]) == 2)
    started = time.monotonic()
    runner.stop(wait=3.0)
    assert time.monotonic() - started < 2
    runner.submit("describe", {}, tag="late")
    results.wait(5)
    by_tag = {tag: r for r, tag, _ in results.calls}
    assert sorted(by_tag, key=str) == [0, 1, 2, 3, "late"]
    assert {by_tag[i].outcome for i in (0, 1)} == {"timeout"}
    assert all("stopped by the daemon" in by_tag[i].reason for i in (0, 1))
    assert {(by_tag[i].outcome, by_tag[i].reason) for i in (2, 3, "late")} == {
        ("not_started", f"p1 {by_tag[i].action}: runner stopped") for i in (2, 3, "late")
    }
    assert all(thread != threading.current_thread().name for _, _, thread in results.calls)
    for pidfile in pids.iterdir():
        pgid = int(pidfile.read_text())
        assert tools.settle(lambda: not tools.group_members(pgid))


def test_stop_without_kill_lets_running_scripts_finish(script, make_runner, results, tmp_path, tools):
    started = tmp_path / "started"
    runner = make_runner(script(f"#!/bin/sh\ntouch {started}\nsleep 0.3\n{OK_JSON}\n"), max_concurrent=1)
    runner.submit("request", {"template": "T1", "count": 1}, token="a", tag="running")
    runner.submit("request", {"template": "T1", "count": 1}, token="b", tag="queued")
    assert tools.settle(started.exists)
    runner.stop(kill=False, wait=3.0)
    results.wait(2)
    by_tag = {tag: r for r, tag, _ in results.calls}
    assert by_tag["running"].outcome == "ok"
    assert (by_tag["queued"].outcome, by_tag["queued"].reason) == ("not_started", "p1 request: runner stopped")


def test_stop_from_inside_a_callback(script, tmp_path, tools):
    from providers.runner import ScriptRunner

    done = threading.Event()
    runner: ScriptRunner

    def on_result(result, tag):
        runner.stop(wait=1.0)
        done.set()

    runner = ScriptRunner(tools.provider(script(f"#!/bin/sh\n{OK_JSON}\n")), tmp_path / "w", on_result)
    runner.submit("request", {"template": "T1", "count": 1}, token="a")
    assert done.wait(5)


def test_scripts_start_without_fork(script, make_runner, results, monkeypatch):
    def no_fork(*args, **kwargs):
        raise AssertionError("fork used")

    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setattr(subprocess, "Popen", no_fork)
    runner = make_runner(script(f"#!/bin/sh\n{OK_JSON}\n"))
    runner.submit("request", {"template": "T1", "count": 1}, token="t")
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason


@pytest.mark.parametrize(
    ("mode", "reason"),
    [(None, "script not found: {path}"), (0o644, "script is not executable: {path}")],
)
def test_unstartable_script_is_a_spawn_error(script, make_runner, results, tmp_path, mode, reason):
    path = tmp_path / "scripts" / "provider"
    if mode is not None:
        script("#!/bin/sh\n", mode=mode)
    runner = make_runner(path)
    runner.submit("describe", {}, tag="d")
    [result] = results.wait(1)
    assert result.outcome == "spawn_error"
    assert result.reason == "p1 describe: " + reason.format(path=path)


def test_a_script_that_went_away_or_lost_its_execute_bit_since_the_last_run_says_so(
    script, make_runner, results, tmp_path
):
    path = script("#!/bin/sh\necho '{}'\n")
    runner = make_runner(path)
    runner.submit("describe", {})
    results.wait(1)
    path.chmod(0o644)
    runner.submit("describe", {})
    results.wait(2)
    path.unlink()
    runner.submit("describe", {})
    first, second, third = results.wait(3)
    assert first.outcome == "ok", first.reason
    assert (second.outcome, second.reason) == ("spawn_error", f"p1 describe: script is not executable: {path}")
    assert (third.outcome, third.reason) == ("spawn_error", f"p1 describe: script not found: {path}")


@pytest.mark.parametrize("stdin", [False, True])
def test_a_started_program_holds_its_pipes_only_as_stdin_stdout_and_stderr(stdin):
    import sys

    from providers.spawning import spawn

    show = ("import os, json; fds = [f'/proc/self/fd/{fd}' for fd in os.listdir('/proc/self/fd')]\n"
            "print(json.dumps({p.rsplit('/', 1)[1]: os.readlink(p) for p in fds if os.path.exists(p)}))")
    pid, in_w, out_r, err_r = spawn([sys.executable, "-c", show], {}, stdin=stdin)
    ours = {f"pipe:[{os.fstat(fd).st_ino}]": n for fd, n in ((in_w, "0"), (out_r, "1"), (err_r, "2")) if fd is not None}
    try:
        out = b""
        while chunk := os.read(out_r, 65536):
            out += chunk
        os.waitpid(pid, 0)
    finally:
        for fd in (in_w, out_r, err_r):
            if fd is not None:
                os.close(fd)
    held = json.loads(out)
    assert {fd: link for fd, link in held.items() if link in ours} == {n: link for link, n in ours.items()}


def test_input_files_of_runs_at_once_are_each_their_own(script, make_runner, results, tmp_path, inputs, tools):
    names = tmp_path / "names"
    # Each run notes its input file, then waits for all four to be running before it answers.
    body = f"""#!/bin/sh
echo "$3" >> {names}
while [ "$(wc -l < {names})" -lt 4 ]; do sleep 0.01; done
echo '{{"requests": []}}'
"""
    runner = make_runner(script(body), max_concurrent=4)
    for _ in range(4):
        runner.submit("reclaims", {"machines": [{"name": "h1"}]})
    done = results.wait(4)
    assert [r.outcome for r in done] == ["ok"] * 4, [r.reason for r in done]
    assert len(set(names.read_text().split())) == 4
    assert tools.left(inputs) == []


def test_bad_interpreter_is_a_spawn_error(script, make_runner, results):
    runner = make_runner(script("#!/nonexistent/interpreter\n"))
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "spawn_error"
    assert result.reason.startswith("p1 describe: cannot start ")


def test_bad_caller_input_never_starts_the_script(script, make_runner, results, tmp_path):
    marker = tmp_path / "ran"
    runner = make_runner(script(f"#!/bin/sh\ntouch {marker}\n"))
    runner.submit("request", {"template": "T1", "count": 1})
    runner.submit("status", {"requests": [{}]})
    first, second = results.wait(2)
    assert (first.outcome, first.reason) == ("spawn_error", "p1 request: request needs an idempotency token")
    assert (second.outcome, second.reason) == ("spawn_error", "p1 status: input requests[0].requestId: Field required")
    assert not marker.exists()


def test_unknown_action_is_refused_at_once(script, make_runner):
    runner = make_runner(script("#!/bin/sh\n"))
    with pytest.raises(ValueError, match="unknown script action 'quote'"):
        runner.submit("quote", {})  # type: ignore[arg-type]


def test_a_failing_callback_does_not_stop_the_runner(script, tmp_path, tools):
    seen: list[str] = []
    done = threading.Event()

    def on_result(result, tag):
        seen.append(tag)
        if tag == "first":
            raise RuntimeError("callback bug")
        done.set()

    from providers.runner import ScriptRunner

    cfg = tools.provider(script(f"#!/bin/sh\n{OK_JSON}\n"), max_concurrent=1)
    runner = ScriptRunner(cfg, tmp_path / "w", on_result)
    try:
        runner.submit("request", {"template": "T1", "count": 1}, token="a", tag="first")
        runner.submit("request", {"template": "T1", "count": 1}, token="b", tag="second")
        assert done.wait(5)
        assert seen == ["first", "second"]
    finally:
        runner.stop()


#: A script that says where its input file is, the file's mode and its folder's, then answers.
WHERE = """#!/bin/sh
echo "$3" >&2
stat -c %a "$3" "$(dirname "$3")" >&2
echo '{"requests": []}'
"""


def _where(result) -> tuple[Path, str, str]:
    """The input file a run of ``WHERE`` was given, its mode and its folder's."""
    path, mode, folder_mode = result.stderr_tail.split()
    return Path(path), mode, folder_mode


def test_input_files_are_in_memory_private_and_removed(script, make_runner, results, tmp_path, inputs, tools):
    runner = make_runner(script(WHERE))
    runner.submit("reclaims", {"machines": [{"name": "h1"}]})
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    path, mode, folder_mode = _where(result)
    assert path.parent.parent == inputs and path.parent.name.startswith(f"{os.getpid()}-"), "this process's folder"
    assert (mode, folder_mode, inputs.stat().st_mode & 0o777) == ("600", "700", 0o700)
    assert not path.exists() and tools.left(inputs) == []
    assert not (tmp_path / "work" / "in").exists(), "nothing of the run on the disk"


def test_a_runner_keeps_input_files_in_dev_shm_where_the_machine_has_one(script, results, tmp_path, tools):
    from providers.inputs import memory_folder
    from providers.runner import ScriptRunner

    runner = ScriptRunner(tools.provider(script(WHERE)), tmp_path / "work", results)
    try:
        runner.submit("reclaims", {"machines": [{"name": "h1"}]})
        [result] = results.wait(1)
    finally:
        runner.stop()
    assert result.outcome == "ok", result.reason
    path, mode, _ = _where(result)
    assert str(path.parent) == (memory_folder(Path("/dev/shm")) or str(tmp_path / "work" / "in"))
    assert mode == "600" and not path.exists()


def _symlink(root: Path, folder: Path) -> None:
    (root / "elsewhere").mkdir(mode=0o700)
    folder.symlink_to(root / "elsewhere")


@pytest.mark.parametrize("spoil, warning", [
    (lambda root, folder: root.rmdir(), None),
    (lambda root, folder: folder.write_text(""), "it is not a folder"),
    (_symlink, "it is not a folder"),
    (lambda root, folder: folder.mkdir(mode=0o755), "its mode is 0755: other users may enter it"),
    (lambda root, folder: root.chmod(0o777), "may be written by other users and is not sticky"),
], ids=["no memory file system", "a file in its place", "a link in its place", "open to others", "open parent"])
def test_without_a_memory_folder_to_trust_input_files_stay_in_the_work_folder(
        script, make_runner, results, tmp_path, memory, inputs, caplog, spoil, warning):
    spoil(memory, inputs)
    runner = make_runner(script(WHERE))
    runner.submit("reclaims", {"machines": [{"name": "h1"}]})
    runner.submit("reclaims", {"machines": [{"name": "h2"}]})
    first, second = results.wait(2)
    assert (first.outcome, second.outcome) == ("ok", "ok"), (first.reason, second.reason)
    for result in (first, second):
        path, mode, folder_mode = _where(result)
        assert (path.parent, mode, folder_mode) == (tmp_path / "work" / "in", "600", "700")
        assert not path.exists()
    said = [r.getMessage() for r in caplog.records if "script input files stay" in r.getMessage()]
    if warning is None:
        assert said == [], "a machine without one is no news"
    else:
        [line] = said  # once, not at every run
        assert warning in line and str(inputs) in line


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_input_folder_removed_between_runs_is_made_again(script, make_runner, results, tmp_path, inputs, tools,
                                                         where):
    runner = make_runner(script(WHERE), memory=None if where == "disk" else inputs.parent)
    folder = inputs if where == "memory" else tmp_path / "work" / "in"
    runner.submit("reclaims", {"machines": [{"name": "h1"}]})
    [first] = results.wait(1)
    shutil.rmtree(folder)
    runner.submit("reclaims", {"machines": [{"name": "h1"}]})
    _, second = results.wait(2)
    assert (first.outcome, second.outcome) == ("ok", "ok"), second.reason
    made = _where(second)[0].parent
    assert (made.parent if where == "memory" else made) == folder
    assert folder.stat().st_mode & 0o777 == 0o700 and made.stat().st_mode & 0o777 == 0o700
    assert tools.left(folder) == []


#: A process that takes its folder for input files under ``argv[1]`` and then, as ``argv[2]`` says, leaves a
#: file in it and is killed (``dies``) or waits for its stdin to close (``lives``), or ends (``ends``).
OTHER_PROCESS = """
import os, sys
from providers.inputs import memory_folder
folder = memory_folder(sys.argv[1])
if sys.argv[2] != "ends":
    open(os.path.join(folder, "left.json"), "w").write("{}")
print(folder, flush=True)
if sys.argv[2] == "dies":
    os.kill(os.getpid(), 9)
if sys.argv[2] == "lives":
    sys.stdin.read()
"""


def test_the_first_run_of_a_process_removes_the_input_folders_of_ended_processes(
        script, make_runner, results, memory, inputs):
    def other(fate: str) -> tuple[subprocess.Popen, Path]:
        proc = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(memory), fate], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return proc, Path(proc.stdout.readline().strip())

    living, kept = other("lives")
    killed, gone = other("dies")  # after: its first run would remove the folder of one killed before it
    try:
        killed.communicate(timeout=10)
        assert killed.returncode == -signal.SIGKILL
        assert (gone / "left.json").exists() and (kept / "left.json").exists()
        runner = make_runner(script(WHERE))
        runner.submit("reclaims", {"machines": [{"name": "h1"}]})
        [result] = results.wait(1)
        assert result.outcome == "ok", result.reason
        assert not gone.exists(), "the killed process's folder went, with the file it left"
        assert (kept / "left.json").exists(), "a living process's folder is its own"
        assert sorted(p for p in inputs.iterdir() if p.is_dir()) == sorted([kept, _where(result)[0].parent])
    finally:
        living.communicate("", timeout=10)
    assert living.returncode == 0
    ended, mine = other("ends")
    ended.communicate(timeout=10)
    assert ended.returncode == 0 and not mine.exists(), "a process that ends cleanly takes its folder with it"


def test_threads_start_for_work_and_end_when_idle(script, results, tmp_path, tools):
    """A thousand quiet providers must not hold max_concurrent threads each."""
    from providers.runner import ScriptRunner

    cfg = tools.provider(script(f"#!/bin/sh\n{OK_JSON}\n"), max_concurrent=3)
    runner = ScriptRunner(cfg, tmp_path / "w", results, idle_exit=0.2)

    def threads() -> list[str]:
        return runner.pool.threads()

    try:
        assert threads() == [], "no thread before there is work"
        for i in range(3):
            runner.submit("request", {"template": "T1", "count": 1}, token=f"t{i}")
        assert [r.outcome for r in results.wait(3)] == ["ok"] * 3
        assert 1 <= len(threads()) <= 3
        deadline = time.monotonic() + 5
        while threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threads() == [], "idle threads end"
        runner.submit("request", {"template": "T1", "count": 1}, token="t9")
        assert [r.outcome for r in results.wait(4)][-1] == "ok", "work after the threads ended still runs"
    finally:
        runner.stop(wait=3.0)


def test_a_run_queued_under_a_lease_does_not_start_once_the_lease_is_gone(script, make_runner, results, tmp_path):
    """Woken from a freeze past its TTL, the daemon must not start what it queued before."""
    ran = tmp_path / "ran"
    runner = make_runner(script(f"#!/bin/sh\ntouch {ran}\n{OK_JSON}\n"))
    held = [True]
    runner.may_act = lambda: held[0]
    runner.submit("request", {"template": "T1", "count": 1}, token="t1")
    assert results.wait(1)[0].outcome == "ok" and ran.exists()
    ran.unlink()
    held[0] = False
    runner.submit("request", {"template": "T1", "count": 1}, token="t2")
    refused = results.wait(2)[1]
    assert refused.outcome == "not_started" and "lease" in refused.reason
    assert not ran.exists(), "the script must not have run"


def test_providers_sharing_a_pool_take_turns(script, results, tmp_path, tools):
    """One provider with runs queued must not keep another's first run behind all of them."""
    from providers.pool import ScriptPool
    from providers.runner import ScriptRunner

    pool = ScriptPool(workers=1, idle_exit=5)
    gate = tmp_path / "gate"
    ok = script(f"#!/bin/sh\n{OK_JSON}\n")
    held = script(f"#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.01; done\n{OK_JSON}\n", name="held")
    busy = ScriptRunner(tools.provider(held, name="busy", max_concurrent=1), tmp_path / "a", results, pool=pool)
    quiet = ScriptRunner(tools.provider(ok, name="quiet", max_concurrent=1), tmp_path / "b", results, pool=pool)
    try:
        for i in range(3):
            busy.submit("request", {"template": "T1", "count": 1}, token=f"b{i}", tag=f"busy-{i}")
        quiet.submit("request", {"template": "T1", "count": 1}, token="q0", tag="quiet-0")
        gate.touch()  # the first busy run held the only worker until every run was queued
        done = results.wait(4)
        assert all(r.outcome == "ok" for r in done)
        order = [tag for _, tag, _ in results.calls]
        assert order == ["busy-0", "quiet-0", "busy-1", "busy-2"]
        assert pool.threads() and len(pool.threads()) == 1
    finally:
        busy.stop(wait=3.0)
        quiet.stop(wait=3.0)
        pool.close()
