"""A folder of the five LSF scripts, run unchanged through the runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from messages.description import ProviderDescription
from messages.scripts import Accepted, Reclaim, StatusReport

DATA = Path(__file__).parent / "data"

#: Each script saves its input and arguments, then prints the example answer.
SCRIPT = """#!/bin/sh
[ "$1" = -f ] && [ $# -eq 2 ] || {{ echo "bad arguments: $*" >&2; exit 64; }}
cp "$2" "{seen}/{name}.input.json"
echo "$PROVISIONER_TOKEN" > "{seen}/{name}.token"
echo "{name}: working" >&2
cat "{answers}/{name}.output.json"
"""
NAMES = ["getAvailableTemplates", "requestMachines", "getRequestStatus", "requestReturnMachines", "getReturnRequests"]


@pytest.fixture
def lsf(tmp_path, script, make_runner):
    seen = tmp_path / "seen"
    answers = tmp_path / "answers"
    seen.mkdir()
    answers.mkdir()
    for name in NAMES:
        shutil.copy(DATA / f"{name}.output.json", answers / f"{name}.output.json")
        # Mixed naming as found in the wild: with and without .sh, and a .sh without the execute bit.
        filename = name if name == "getReturnRequests" else f"{name}.sh"
        mode = 0o644 if name == "getRequestStatus" else 0o755
        folder = script(SCRIPT.format(seen=seen, answers=answers, name=name), name=filename, mode=mode, folder="lsf")
    runner = make_runner(folder.parent, style="lsf")
    return runner, seen, answers


def test_describe(lsf, results):
    runner, seen, _ = lsf
    runner.submit("describe", {})
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert isinstance(result.output, ProviderDescription)
    assert [t.id for t in result.output.templates] == ["Template-VM-1"]
    assert json.loads((seen / "getAvailableTemplates.input.json").read_text()) == {}
    assert result.stderr_tail == "getAvailableTemplates: working\n"


def test_request_passes_the_token_in_env_and_user_data(lsf, results):
    runner, seen, _ = lsf
    runner.submit("request", {"template": "Template-VM-1", "count": 2}, token="intent-1")
    [result] = results.wait(1)
    assert result.output == Accepted(
        provider_request_id="req-3f1c2a9e-5b7d-4c11-9e0a-0d5b7f2c8a41", message="Request VM from cloud successful."
    )
    assert json.loads((seen / "requestMachines.input.json").read_text()) == {
        "template": {"templateId": "Template-VM-1", "machineCount": 2},
        "rc_account": "default",
        "userData": {"provisioner_token": "intent-1"},
    }
    assert (seen / "requestMachines.token").read_text() == "intent-1\n"


def test_status_through_a_plain_sh_file(lsf, results):
    runner, seen, _ = lsf
    runner.submit("status", {"requests": [{"requestId": "req-3f1c2a9e-5b7d-4c11-9e0a-0d5b7f2c8a41"}]})
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert isinstance(result.output, StatusReport)
    assert [m.result for m in result.output.requests[0].machines] == ["succeed", "fail"]
    assert json.loads((seen / "getRequestStatus.input.json").read_text()) == json.loads(
        (DATA / "getRequestStatus.input.json").read_text()
    )


def test_return_keeps_the_token_out_of_the_document(lsf, results):
    runner, seen, _ = lsf
    machines = json.loads((DATA / "requestReturnMachines.input.json").read_text())
    runner.submit("return", machines, token="intent-2")
    [result] = results.wait(1)
    assert result.output.provider_request_id == "ret-7c0d9b1e-2f43-4a8e-b6c5-91e3d0f4a2b7"
    assert json.loads((seen / "requestReturnMachines.input.json").read_text()) == machines
    assert (seen / "requestReturnMachines.token").read_text() == "intent-2\n"


def test_reclaims_from_a_script_without_extension(lsf, results):
    runner, _, answers = lsf
    shutil.copy(DATA / "getReturnRequests.output.lsf-awsv2.json", answers / "getReturnRequests.output.json")
    runner.submit("reclaims", json.loads((DATA / "getReturnRequests.input.json").read_text()))
    [result] = results.wait(1)
    assert result.outcome == "ok", result.reason
    assert result.output.machines == [Reclaim(name="ip-10-0-1-30.ec2.internal", machine_id="i-0a1b2c3d4e5f60720")]


def test_refused_request_is_a_failure_with_the_scripts_message(lsf, results):
    runner, _, answers = lsf
    shutil.copy(DATA / "requestMachines.output.failure.json", answers / "requestMachines.output.json")
    runner.submit("request", {"template": "Template-VM-1", "count": 2}, token="intent-3")
    [result] = results.wait(1)
    assert result.outcome == "failed"
    assert result.exit_code == 0
    assert result.reason.startswith("p1 request: exit 0 without a requestId: Failed to create instances.")


def test_list_is_not_an_lsf_action(lsf, results):
    runner, _, _ = lsf
    runner.submit("list", {})
    [result] = results.wait(1)
    assert (result.outcome, result.reason) == ("spawn_error", "p1 list: the lsf style has no list action")
