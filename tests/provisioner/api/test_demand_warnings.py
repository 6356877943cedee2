"""A demand no configured provider can ever serve is stored, with a warning naming why (issue 20, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys

from messages.description import Pool, ProviderDescription, Template
from messages.facts import ProviderDescribed, ProviderHealth, make_fact
from persistence.controller import open_controller

CLOUD = ProviderDescription(name="sim-hosts", kind="hosts", templates=[
    Template(id="sim-small", max_number=20, attributes={"ncpus": 4, "type": "X86_64"})])
LICENSES = ProviderDescription(name="sim-licenses", kind="units", pools=[Pool(resource="vcs", capacity=20)])
DEMAND = {"items": [{"id": "gpu", "kind": "hosts", "count": 1, "select": {"gpus": ">=1"}},
                    {"id": "fine", "kind": "hosts", "count": 1, "select": {"ncpus": ">=4"}},
                    {"id": "named", "kind": "hosts", "count": 1, "template": "huge"},
                    {"id": "lic", "kind": "units", "count": 1, "resource": "matlab"}]}
WARNED = ["item gpu: no provider can serve it (sim-hosts: no template has attribute gpus)",
          "item named: no provider can serve it (sim-hosts: no template named huge (it has sim-small))",
          "item lic: no provider can serve it (sim-licenses: lends no matlab (it lends vcs))"]


def test_rest_put_demand_stores_it_and_warns_about_items_no_provider_can_serve(inprocess):
    run = inprocess()
    run.add(ProviderDescribed(description=CLOUD), provider="sim-hosts")
    run.add(ProviderDescribed(description=LICENSES), provider="sim-licenses")
    r = run.call("PUT", "/v1/demand", role="scheduler", json=DEMAND)
    assert r.status_code == 200, r.text
    assert r.json()["warnings"] == WARNED
    assert [i.id for i in run.controller.get_demand().items] == ["gpu", "fine", "named", "lic"]
    fine = run.call("PUT", "/v1/demand", role="scheduler", json={"items": DEMAND["items"][1:2]})
    assert fine.json()["warnings"] == []


def test_cli_demand_put_stores_it_and_warns_on_stderr(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    c = open_controller(url)
    c.append([make_fact(ProviderDescribed(description=CLOUD), provider="sim-hosts"),
              make_fact(ProviderDescribed(description=LICENSES), provider="sim-licenses")])
    c.close()
    f = tmp_path / "demand.json"
    f.write_text(json.dumps(DEMAND))
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, "demand", "put", str(f)],
                       capture_output=True, text=True, timeout=60, env={"PROVISIONER_HOME": str(tmp_path / "h")})
    assert r.returncode == 0, r.stderr
    assert "demand 1 stored: 4 items" in r.stdout
    assert r.stderr.splitlines() == [f"provisioner: warning: {w}" for w in WARNED]


def test_a_provider_not_described_yet_silences_no_warning(inprocess, tmp_path):
    """Issue 28, item 5: a provider whose describe keeps failing (degraded, no description) is named as not
    described yet; what the described providers cannot serve is still said, through REST and the CLI."""
    stuck = make_fact(ProviderHealth(kind="provider_degraded", reason="describe keeps failing: exit 1"),
                      provider="cloud-b")
    warned = ["item gpu: no described provider can serve it (sim-hosts: no template has attribute gpus); "
              "not described yet: cloud-b",
              "item named: no described provider can serve it (sim-hosts: no template named huge (it has "
              "sim-small)); not described yet: cloud-b",
              "item lic: no described provider can serve it (sim-licenses: lends no matlab (it lends vcs)); "
              "not described yet: cloud-b"]
    run = inprocess()
    run.add(ProviderDescribed(description=CLOUD), provider="sim-hosts")
    run.add(ProviderDescribed(description=LICENSES), provider="sim-licenses")
    run.add(stuck.payload, provider="cloud-b")
    r = run.call("PUT", "/v1/demand", role="scheduler", json=DEMAND)
    assert r.status_code == 200, r.text
    assert r.json()["warnings"] == warned

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    c = open_controller(url)
    c.append([make_fact(ProviderDescribed(description=CLOUD), provider="sim-hosts"), stuck])
    c.close()
    f = tmp_path / "demand.json"
    f.write_text(json.dumps(DEMAND))
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, "demand", "put", str(f)],
                       capture_output=True, text=True, timeout=60, env={"PROVISIONER_HOME": str(tmp_path / "h")})
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["provisioner: warning: " + w for w in warned[:2]] + [
        "provisioner: warning: item lic: no described provider offers units; not described yet: cloud-b"]


def test_with_no_provider_described_the_demand_is_said_to_be_unchecked(inprocess):
    run = inprocess()
    run.add(ProviderHealth(kind="provider_degraded", reason="cannot start"), provider="cloud-b")
    r = run.call("PUT", "/v1/demand", role="scheduler", json=DEMAND)
    assert r.json()["warnings"] == ["demand not checked: no provider has described itself yet (cloud-b)"]
