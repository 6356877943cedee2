"""An LSF-style provider (five scripts, run unchanged) through the whole daemon."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import sim
from messages.demand import DemandSnapshot, HostItem
from tests.support.daemons import HOSTS_SIM, make_config, sim_provider

pytestmark = pytest.mark.slow

LSF_FOLDER = Path(sim.__file__).resolve().parent / "lsf"


def test_lsf_scripts_provision_and_return(tmp_path, start_daemon):
    provider = sim_provider(tmp_path, "hosts", dict(HOSTS_SIM, name_prefix="lsf"))
    provider["script"] = {"style": "lsf", "path": str(LSF_FOLDER), "conf_dir": str(tmp_path / "hosts"),
                          "timeout": "10s"}
    d = start_daemon(make_config(tmp_path, [provider]))
    c = d.controller
    d.wait_state(lambda s: s.providers.get("hosts") and s.providers["hosts"].description, "described via LSF")
    desc = d.state().providers["hosts"].description
    assert [t.id for t in desc.templates] == ["small"]
    assert desc.templates[0].attributes["ncpus"] == 8.0, "LSF attribute values arrive as strings and are converted"

    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=2, template="small")]))
    p = d.wait_state(lambda s: sum(1 for i in s.instances.values() if i.state == "running") == 2, "2 running")
    for inst in p.instances.values():
        c.post_host_event(inst.name, "joined", time.time())
    c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0, template="small")]))
    for inst in p.instances.values():
        c.post_host_event(inst.name, "idle", time.time())
    p = d.wait_state(lambda s: all(i.state == "returned" for i in s.instances.values()), "returned via LSF")
    ret = [r for r in p.requests.values() if r.action == "return"]
    assert ret and all(r.provider_request_id for r in ret)
