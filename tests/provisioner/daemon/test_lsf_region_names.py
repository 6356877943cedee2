"""An LSF plugin that names its hosts after the region in its env_file: the names reach the facts as printed.

IBM's AWS plugin, run unchanged, names a host ``ip-10-20-1-4.us-west-2.compute.internal`` and reads its
region from the environment. The region is not a secret: the name must reach the facts exactly as the
plugin printed it, or the scheduler's ``host joined`` with the real name is refused and the host is billed
until ``join_timeout``. The plugin here builds its names from ``$AWS_DEFAULT_REGION`` as that one does,
keeps its state in ``$PRO_DATA_DIR``, and is driven through request, join and return.
"""

from __future__ import annotations

import json
import time

import pytest

from messages.demand import DemandSnapshot, HostItem
from tests.support.daemons import make_config

pytestmark = pytest.mark.slow

REGION = "us-west-2"
NAME = f"ip-10-20-1-4.{REGION}.compute.internal"
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"

#: One program under the five names; it answers by the name it was called by.
PLUGIN = """#!/usr/bin/env python3
import fcntl, json, os, sys

action = os.path.basename(sys.argv[0]).removesuffix(".sh")
doc = json.load(open(sys.argv[2])) if sys.argv[1:2] == ["-f"] else {}
region = os.environ["AWS_DEFAULT_REGION"]
state_file = os.path.join(os.environ["PRO_DATA_DIR"], "plugin-state.json")
lock = open(state_file + ".lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)  # the daemon runs several scripts at once
state = json.load(open(state_file)) if os.path.exists(state_file) else {"requests": {}, "next": 4}


def machine(n, status):
    return {"machineId": f"i-0a1b2c3d4e5f607{n:02d}", "name": f"ip-10-20-1-{n}.{region}.compute.internal",
            "result": "succeed", "status": status, "privateIpAddress": f"10.20.1.{n}",
            "launchtime": 1734619942, "message": ""}


print(f"{action}: in {region} with key {os.environ['AWS_SECRET_ACCESS_KEY']}", file=sys.stderr)
if action == "getAvailableTemplates":
    out = {"message": "", "templates": [{"templateId": "t3-small", "maxNumber": 4, "attributes": {
        "type": ["String", "X86_64"], "ncpus": ["Numeric", "2"], "zone": ["String", region + "a"]}}]}
elif action == "requestMachines":
    rid = f"req-{region}-{len(state['requests']) + 1}"
    numbers = list(range(state["next"], state["next"] + doc["template"]["machineCount"]))
    state["next"] += len(numbers)
    state["requests"][rid] = {"numbers": numbers, "status": "running"}
    out = {"requestId": rid, "message": f"Request VM from cloud successful in {region}."}
elif action == "requestReturnMachines":
    rid = f"ret-{region}-{len(state['requests']) + 1}"
    numbers = [int(m["name"].split(".")[0].rsplit("-", 1)[1]) for m in doc["machines"]]
    state["requests"][rid] = {"numbers": numbers, "status": "terminated"}
    out = {"requestId": rid, "message": "Delete VM success."}
elif action == "getRequestStatus":
    out = {"requests": [{"requestId": r["requestId"], "status": "complete", "message": "",
                         "machines": [machine(n, state["requests"][r["requestId"]]["status"])
                                      for n in state["requests"][r["requestId"]]["numbers"]]}
                        for r in doc["requests"] if r["requestId"] in state["requests"]]}
else:
    out = {"status": "complete", "message": "", "requests": []}
with open(state_file + ".new", "w") as f:
    json.dump(state, f)
os.replace(state_file + ".new", state_file)
json.dump(out, sys.stdout)
"""
SCRIPTS = ("getAvailableTemplates", "requestMachines", "getRequestStatus", "requestReturnMachines",
           "getReturnRequests")


def lsf_plugin(tmp_path) -> dict:
    folder = tmp_path / "awsinst" / "scripts"
    folder.mkdir(parents=True)
    for name in SCRIPTS:
        path = folder / f"{name}.sh"
        path.write_text(PLUGIN)
        path.chmod(0o755)
    env = tmp_path / "awsinst" / "provider.env"
    env.write_text(f"AWS_DEFAULT_REGION={REGION}\nAWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
                   f"AWS_SECRET_ACCESS_KEY={SECRET}\n")
    env.chmod(0o600)
    return {"name": "awsinst", "kind": "hosts", "env_file": str(env),
            "script": {"style": "lsf", "path": str(folder), "conf_dir": str(tmp_path / "awsinst"), "timeout": "10s"}}


def test_a_host_named_after_the_region_joins_and_is_returned_under_its_own_name(tmp_path, start_daemon):
    d = start_daemon(make_config(tmp_path, [lsf_plugin(tmp_path)]))
    c = d.controller
    p = d.wait_state(lambda s: s.providers.get("awsinst") and s.providers["awsinst"].description, "described")
    template = p.providers["awsinst"].description.templates[0]
    assert template.attributes["zone"] == f"{REGION}a", "a region is no secret, in free text either"

    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=1, template="t3-small")]))
    p = d.wait_state(lambda s: any(i.state == "running" for i in s.instances.values()), "a host running")
    [inst] = p.instances.values()
    assert inst.name == NAME, "the host's name is kept exactly as the plugin printed it"
    [req] = [r for r in p.requests.values() if r.action == "request"]
    assert req.provider_request_id == f"req-{REGION}-1"

    c.post_host_event(NAME, "joined", time.time())
    d.wait_state(lambda s: s.instances[inst.key].state == "joined", "the host joined under its real name")
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0, template="t3-small")]))
    c.post_host_event(NAME, "idle", time.time())
    p = d.wait_state(lambda s: s.instances[inst.key].state == "returned", "the host returned")
    [ret] = [r for r in p.requests.values() if r.action == "return"]
    assert ret.provider_request_id == f"ret-{REGION}-2"
    sent = json.loads((tmp_path / "home" / "providers" / "awsinst" / "plugin-state.json").read_text())
    assert sent["requests"][f"ret-{REGION}-2"]["numbers"] == [4], "the return named the host by its real name"

    facts = "".join(f.to_json().decode() for f in c.read())
    assert SECRET not in facts, "the key the plugin prints on stderr is still kept out"
    assert NAME in facts
