"""LSF mode: the five plugin scripts print the contract's documents and share the simulator's state."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.simprov import (
    SCRIPT,
    T0,
    assert_shape,
    contract_example,
    hosts_config,
    minimal_env,
    run_lsf,
    units_config,
)


class Plugin:
    """An LSF-style provider folder: conf/sim_config.json under PRO_CONF_DIR, state in PRO_DATA_DIR."""

    def __init__(self, root: Path, config: dict) -> None:
        self.root = root
        (root / "conf").mkdir(parents=True)
        (root / "conf" / "sim_config.json").write_text(json.dumps(config))
        (root / "data").mkdir()
        (root / "inputs").mkdir()
        self.now_file = root / "now"
        self.set_now(T0)

    def set_now(self, t: float) -> None:
        self.now = t
        self.now_file.write_text(repr(t))

    def env(self, **extra: str) -> dict[str, str]:
        return minimal_env(self.root, PROVIDER_NAME="sim-lsf", PRO_CONF_DIR=str(self.root),
                           PRO_DATA_DIR=str(self.root / "data"), PRO_LSF_LOGDIR=str(self.root),
                           SIM_NOW_FILE=str(self.now_file), **extra)

    def run(self, action: str, doc: dict, **env: str):
        return run_lsf(action, doc, self.env(**env), self.root / "inputs")

    def call(self, action: str, doc: dict, **env: str) -> dict:
        r = self.run(action, doc, **env)
        assert r.returncode == 0, f"{action} exited {r.returncode}: {r.stderr}"
        return json.loads(r.stdout)

    def v2(self, *argv: str) -> dict:
        """The same simulator called as a v2 script (or admin) on this plugin's folders."""
        r = subprocess.run([str(SCRIPT), *argv], env=self.env(), capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def request(self, count: int, **env: str) -> str:
        doc = contract_example("requestMachines.input.json")
        doc["template"].update(templateId="sim-small", machineCount=count)
        out = self.call("requestMachines", doc, **env)
        assert_shape(out, contract_example("requestMachines.output.json"))
        return out["requestId"]

    def status(self, rid: str) -> dict:
        out = self.call("getRequestStatus", {"requests": [{"requestId": rid}]})
        assert_shape(out, contract_example("getRequestStatus.output.json"))
        return out["requests"][0]


@pytest.fixture
def plugin(tmp_path) -> Plugin:
    return Plugin(tmp_path, hosts_config(lead_time=60))


def test_templates_in_lsf_shape(plugin):
    out = plugin.call("getAvailableTemplates", {})
    assert_shape(out, contract_example("getAvailableTemplates.output.json"),
                 optional=frozenset({"instanceTags", "pgrpName"}))
    small, large = out["templates"]
    assert small["attributes"] == {"type": ["String", "X86_64"], "ncpus": ["Numeric", "4"],
                                   "mem": ["Numeric", "8192"]}
    assert (small["maxNumber"], small["priority"]) == (50, 10)
    assert (large["templateId"], large["priority"]) == ("sim-large", 20)


def test_request_status_return_round_trip(plugin):
    rid = plugin.request(2)
    running = plugin.status(rid)
    assert running["status"] == "running"
    assert_shape({"requests": [running]}, contract_example("getRequestStatus.output.running.json"))
    plugin.set_now(T0 + 60)
    done = plugin.status(rid)
    assert done["status"] == "complete"
    assert [m["result"] for m in done["machines"]] == ["succeed", "succeed"]
    held = [{"name": m["name"], "machineId": m["machineId"]} for m in done["machines"]]
    ret = plugin.call("requestReturnMachines", {"machines": held})
    assert_shape(ret, contract_example("requestReturnMachines.output.json"))
    returned = plugin.status(ret["requestId"])
    assert returned["status"] == "complete"
    assert {m["status"] for m in returned["machines"]} == {"terminated"}


def test_without_a_token_every_call_is_new_and_with_one_it_repeats(plugin):
    assert plugin.request(1) != plugin.request(1)
    first = plugin.request(1, PROVISIONER_TOKEN="intent-9")
    assert plugin.request(1, PROVISIONER_TOKEN="intent-9") == first
    doc = contract_example("requestMachines.input.json")
    doc["template"].update(templateId="sim-small", machineCount=1)
    doc["userData"] = {"provisioner_token": "intent-10"}
    once = plugin.call("requestMachines", doc)["requestId"]
    assert plugin.call("requestMachines", doc)["requestId"] == once


def test_return_requests_report_reclaimed_lost_and_unlisted(plugin):
    rid = plugin.request(3)
    plugin.set_now(T0 + 60)
    a, b, c = plugin.status(rid)["machines"]
    plugin.v2("admin", "reclaim", a["machineId"])
    given = [{"name": a["name"], "machineId": a["machineId"]}, {"name": b["name"], "machineId": b["machineId"]},
             {"name": "ghost", "machineId": "i-ghost"}]
    out = plugin.call("getReturnRequests", {"machines": given})
    symphony = contract_example("getReturnRequests.output.json")
    lsf = contract_example("getReturnRequests.output.lsf-awsv2.json")
    both = {**symphony, "requests": [{**symphony["requests"][0], **lsf["requests"][0]}]}
    assert_shape(out, both)
    assert out["status"] == "complete"
    assert sorted(x["machine"] for x in out["requests"]) == sorted([a["name"], "ghost", c["name"]])


def test_units_config_is_refused_in_lsf_mode(tmp_path):
    plugin = Plugin(tmp_path, units_config())
    r = plugin.run("getAvailableTemplates", {})
    assert r.returncode == 78 and "hosts only" in r.stderr


def test_lsf_and_v2_share_one_state(plugin):
    rid = plugin.request(2)
    path = plugin.root / "inputs" / "list.json"
    path.write_text("{}")
    listed = plugin.v2("list", "-f", str(path))["machines"]
    assert {m["machineId"] for m in listed} == {m["machineId"] for m in plugin.status(rid)["machines"]}
