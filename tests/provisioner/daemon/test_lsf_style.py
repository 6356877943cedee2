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


#: getAvailableTemplates that reports, as its template's attributes, the folders it was given.
ENV_TEMPLATES = """#!/bin/sh
printf '{"templates": [{"templateId": "seen", "maxNumber": 1, "attributes": {
  "type": ["String", "X86_64"], "ncpus": ["Numeric", "1"],
  "data": ["String", "%s"], "hfwork": ["String", "%s"], "hfworkdir": ["String", "%s"],
  "logs": ["String", "%s"]}}]}\\n' "$PRO_DATA_DIR" "$HF_PROVIDER_WORKDIR" "$HF_WORKDIR" "$PRO_LSF_LOGDIR"
"""


def test_script_work_dir_is_the_folder_an_lsf_plugin_is_given(tmp_path, start_daemon):
    """Issue 28, item 4: the configured work_dir, not a folder under home, is the plugin's PRO_DATA_DIR,
    so a plugin migrated from LSF keeps the records it has there; the daemon's own files stay in its home."""
    scripts = tmp_path / "plugin"
    scripts.mkdir()
    for name in ("getAvailableTemplates", "requestMachines", "getRequestStatus", "requestReturnMachines",
                 "getReturnRequests"):
        (scripts / name).write_text(ENV_TEMPLATES if name == "getAvailableTemplates" else "#!/bin/sh\nexit 1\n")
        (scripts / name).chmod(0o755)
    kept = tmp_path / "lsf" / "work" / "awsv2"  # not there yet: made by the daemon, parents too
    provider = {"name": "hosts", "kind": "hosts",
                "script": {"style": "lsf", "path": str(scripts), "work_dir": str(kept), "timeout": "10s"}}
    cfg = make_config(tmp_path, [provider])
    d = start_daemon(cfg)
    d.wait_state(lambda s: s.providers.get("hosts") and s.providers["hosts"].description, "described via LSF",
                 timeout=60)
    [template] = d.state().providers["hosts"].description.templates
    seen = template.attributes
    assert (seen["data"], seen["hfwork"], seen["hfworkdir"]) == (str(kept), str(kept), str(kept))
    assert kept.is_dir()
    own = cfg.home / "providers" / "hosts"
    assert seen["logs"] == str(own / "log"), "the plugin's log folder stays the daemon's, under its home"
    assert not (kept / "in").exists() and not (kept / "log").exists(), "the daemon's input files stay in its home"
