"""``provisioner-ec2 serve``: the EC2 provider in persistent mode, behind the daemon's own runner, on moto."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.models import ProviderConfig
from messages.scripts import ScriptResult
from providers.persistent import PersistentRunner
from tests.support.ec2.world import CREDENTIALS, SCRIPT, World, env_lines, wait_for

pytestmark = pytest.mark.slow  # real processes: the provider's script and moto's EC2 server

TEMPLATE = "c6i-4x"
OURS = {"provisioner-provider": "aws"}


class Served:
    """The provider ``aws`` as one ``provisioner-ec2 serve`` process; ``call`` waits for the answer."""

    def __init__(self, world: World) -> None:
        env_file = world.folder / "aws.env"
        env_file.write_text(env_lines(world.env()))
        env_file.chmod(0o600)
        cfg = ProviderConfig.model_validate({"name": "aws", "kind": "hosts", "env_file": str(env_file), "script": {
            "style": "v2", "mode": "persistent", "path": str(SCRIPT), "timeout": "20s", "ping_every": "1s"}})
        self.results: dict[int, ScriptResult] = {}
        self.done = threading.Condition()
        self.runner = PersistentRunner(cfg, world.folder / "work", self._result)
        self.n = 0

    def _result(self, result: ScriptResult, tag: Any) -> None:
        with self.done:
            self.results[tag] = result
            self.done.notify_all()

    def call(self, action: str, doc: dict[str, Any], token: str | None = None) -> ScriptResult:
        self.n += 1
        tag = self.n
        self.runner.submit(action, doc, token=token, tag=tag)
        with self.done:
            assert self.done.wait_for(lambda: tag in self.results, 30), f"no answer to {action}"
            return self.results[tag]


@pytest.fixture
def served(world: World) -> Iterator[Served]:
    s = Served(world)
    yield s
    s.runner.stop()


def test_a_launch_and_its_return_through_one_process(world: World, served: Served) -> None:
    described = served.call("describe", {})
    assert described.ok and [t.id for t in described.output.templates] == [TEMPLATE]
    doc = {"template": TEMPLATE, "count": 2, "tags": {**OURS, "provisioner-request": "req-p1"}}
    first = served.call("request", doc, token="req-p1")
    again = served.call("request", doc, token="req-p1")
    assert first.ok and again.output.provider_request_id == first.output.provider_request_id
    rid = first.output.provider_request_id

    def complete() -> Any:
        st = served.call("status", {"requests": [{"requestId": rid}]})
        return st if st.ok and st.output.requests[0].status == "complete" else None

    done = wait_for(complete, 20, "the launch to complete").output.requests[0]
    assert len(world.live()) == 2, "a repeated token launched nothing more"
    machines = [{"name": m.name, "machineId": m.machine_id} for m in done.machines]
    back = served.call("return", {"machines": machines}, token="ret-p1")
    assert back.ok
    assert served.runner.status().restarts == 0 and served.runner.status().phase == "ready"


def test_aws_errors_are_answers_with_the_contract_exit_and_no_secret(world: World, served: Served) -> None:
    world.proxy.fail("DescribeInstances", "RequestLimitExceeded", 503)
    throttled = served.call("list", {"tags": OURS})
    assert throttled.outcome == "transient" and "RequestLimitExceeded" in throttled.reason
    world.proxy.clear()
    world.proxy.fail("RunInstances", "UnauthorizedOperation", 403,
                     message=f"not allowed for {CREDENTIALS['AWS_ACCESS_KEY_ID']}")
    refused = served.call("request", {"template": TEMPLATE, "count": 1, "tags": OURS}, token="req-denied")
    assert refused.outcome == "credentials"
    assert f"not allowed for {CREDENTIALS['AWS_ACCESS_KEY_ID']}" in refused.reason, "a key's id is no secret"
    assert served.call("describe", {}).ok, "the process serves on"
    assert served.runner.status().restarts == 0


def test_a_settings_file_broken_later_fails_calls_as_configuration(world: World, served: Served) -> None:
    assert served.call("describe", {}).ok
    world.write_settings(text="region: [")
    broken = served.call("describe", {})
    assert broken.outcome == "config" and "ec2.yaml:1" in broken.reason
    world.write_settings()
    assert served.call("describe", {}).ok
    assert served.runner.status().restarts == 0, "read per call: no restart needed to see it, nor to fix it"


def test_serve_is_in_the_usage(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert "provisioner-ec2 serve" in out.stdout
