"""``provisioner sim`` takes the daemon's own config: each provider described by running its describe once,
the parts the simulator does not use ignored, a provider whose describe fails an error naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.daemons import HOSTS_SIM, UNITS_SIM, sim_provider

TRACE = [{"trace": {"start": "2024-05-06T00:00:00Z"}},
         {"time": 0, "items": [{"id": "batch", "kind": "hosts", "count": 3, "select": {"ncpus": ">=8"}},
                               {"id": "lic", "kind": "units", "resource": "vcs", "count": 4},
                               {"id": "gpu", "kind": "hosts", "count": 2, "select": {"gpus": ">=1"}}]},
         {"time": 3600, "items": [{"id": "batch", "count": 1}]},
         {"time": 7200}]


def daemon_config(tmp: Path, providers: list[dict]) -> Path:
    doc = {"instance": {"id": "prod-a", "serves": [p["name"] for p in providers], "planner": True},
           "controller": {"url": f"sqlite:///{tmp / 'nowhere' / 'state.db'}"},
           "api": {"listen": "127.0.0.1:8787"},
           "policy": {"idle_time": "5m"}, "budget": {"max_hosts": 50},
           "providers": providers,
           "resources": [{"name": "vcs", "elastic": True, "base": 2, "provider": "units"}],
           "home": str(tmp / "daemon-home")}
    path = tmp / "provisioner.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def sim(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", "sim", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def write_trace(tmp: Path) -> Path:
    path = tmp / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in TRACE) + "\n")
    return path


def test_sim_runs_on_the_daemons_config_and_warns_about_items_no_provider_serves(tmp_path):
    hosts = {**sim_provider(tmp_path, "hosts", HOSTS_SIM), "describe": {"priority": 30},
             "policy": {"billing_unit": "1h"}}
    cfg = daemon_config(tmp_path, [hosts, sim_provider(tmp_path, "units", UNITS_SIM)])
    out = tmp_path / "out"
    r = sim("--config", str(cfg), "--trace", str(write_trace(tmp_path)), "--out", str(out), "--no-plots",
            "--compare", "short:idle_time=1m", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "the daemon's config: 2 providers as they describe themselves" in r.stdout
    warned = ("trace item gpu: no provider can serve it (hosts: no template has attribute gpus): "
              "its demand stays unmet throughout")
    assert f"warning: {warned}" in r.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["warnings"] == [warned]
    assert set(report["variants"]) == {"base", "short"}
    assert report["variants"]["base"]["cost_by_provider"]["hosts"] > 0
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "daemon-home").exists(), "nothing of the daemon's"


def test_a_provider_whose_describe_fails_is_an_error_naming_it(tmp_path):
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'cannot reach the API' >&2\nexit 1\n")
    broken.chmod(0o755)
    cfg = daemon_config(tmp_path, [sim_provider(tmp_path, "units", UNITS_SIM),
                                   {"name": "aws-east", "kind": "hosts",
                                    "script": {"style": "v2", "path": str(broken)}}])
    r = sim("--config", str(cfg), "--trace", str(write_trace(tmp_path)), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{cfg}: providers[1]: provider aws-east: describe failed:" in r.stderr
    assert "cannot reach the API" in r.stderr and not (tmp_path / "o").exists()


def check_config(cfg: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", "check-config", str(cfg)], capture_output=True,
                          text=True, timeout=60, cwd=cwd)


@pytest.mark.parametrize("lease", [{"ttl": "3s", "renew_every": "1s"}, {"ttl": "3s"}, {"renew_every": "15s"},
                                   {"ttl": "1m", "renew_every": "20s"}])
def test_every_lease_section_check_config_takes_the_simulator_takes(tmp_path, lease):
    """The simulator rebuilt the lease from its ttl alone, so the default renew_every (3s) clashed with a
    short ttl the daemon's config had paired with its own renew_every."""
    cfg = daemon_config(tmp_path, [sim_provider(tmp_path, "hosts", HOSTS_SIM),
                                   sim_provider(tmp_path, "units", UNITS_SIM)])
    doc = yaml.safe_load(cfg.read_text())
    cfg.write_text(yaml.safe_dump({**doc, "lease": lease}))
    checked = check_config(cfg, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(x) for x in [
        {"time": 0, "items": [{"id": "batch", "kind": "hosts", "count": 2}]},
        {"time": 600, "failover": ["hosts"]}, {"time": 3600}]) + "\n")
    out = tmp_path / "out"
    r = sim("--config", str(cfg), "--trace", str(trace), "--out", str(out), "--no-plots",
            "--compare", "long-ttl:lease.ttl=2m", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["variants"]["base"]["failovers"] == 1 and report["variants"]["long-ttl"]["failovers"] == 1
