"""The command line as an operator uses it: real processes, a real controller file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, env=env)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def test_demand_put_show_roundtrip(url, tmp_path):
    doc = {"items": [{"id": "d1", "kind": "hosts", "count": 6, "select": {"ncpus": ">=8", "type": "X86_64"}},
                     {"id": "d2", "kind": "units", "resource": "vcs", "count": 5}]}
    f = tmp_path / "demand.json"
    f.write_text(json.dumps(doc))
    r = cli("--controller", url, "demand", "put", str(f))
    assert r.returncode == 0, r.stderr
    assert "demand 1 stored: 2 items" in r.stdout
    r = cli("--controller", url, "demand", "put", "-", stdin="items:\n- {id: d3, kind: units, resource: vcs, count: 1}\n")
    assert r.returncode == 0, r.stderr
    shown = json.loads(cli("--controller", url, "demand", "show", "-o", "json").stdout)
    assert shown["seq"] == 2 and [i["id"] for i in shown["items"]] == ["d3"]
    table = cli("--controller", url, "demand", "show").stdout
    assert "d3" in table and "vcs" in table


@pytest.mark.parametrize("body,expect", [
    ('{"items": [{"id": "d1", "kind": "hosts", "count": -1}]}', "items.0.hosts.count"),
    ('{"items": [{"id": "d1", "kind": "gpus", "count": 1}]}', "items.0"),
    ('{"items": [{"id": "d1", "kind": "hosts", "count": 1, "select": {"ncpus": ">=many"}}]}', "needs a number"),
    ('{"items": [{"id": "a", "kind": "units", "resource": "x", "count": 1},'
     ' {"id": "a", "kind": "units", "resource": "x", "count": 1}]}', "duplicate id"),
    ('{"items": [', "not valid JSON"),
])
def test_bad_demand_is_refused_with_the_place_named_and_nothing_stored(url, body, expect):
    r = cli("--controller", url, "demand", "put", "-", stdin=body)
    assert r.returncode == 1
    assert r.stderr.startswith("provisioner: stdin:") and expect in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "no demand yet" in cli("--controller", url, "demand", "show").stdout


def test_host_events_and_views(url):
    r = cli("--controller", url, "host", "joined", "node-1")
    assert r.returncode == 0 and "node-1 joined" in r.stdout
    r = cli("--controller", url, "host", "asleep", "node-1")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    for view in ("providers", "requests", "instances", "resources"):
        r = cli("--controller", url, view, "-o", "json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == []


def test_unreachable_controller_is_one_line_and_nonzero(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = cli("--controller", f"sqlite:///{blocker}/sub/state.db", "requests")
    assert r.returncode == 1
    assert r.stderr.startswith("provisioner: ") and len(r.stderr.strip().splitlines()) == 1


def test_check_config_good_and_bad(tmp_path):
    script = tmp_path / "prov"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    good = tmp_path / "good.yaml"
    good.write_text(
        "instance: {id: a, serves: [p1], planner: true}\n"
        f"controller: {{url: 'sqlite:///{tmp_path}/s.db'}}\n"
        "providers:\n"
        f"  - {{name: p1, kind: hosts, script: {{style: v2, path: {script}}}}}\n"
    )
    r = cli("check-config", str(good))
    assert r.returncode == 0, r.stderr
    assert "p1" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("style: v2", "style: v3").replace("serves: [p1]", "serves: [p9]"))
    r = cli("check-config", str(bad))
    assert r.returncode == 2
    assert "bad.yaml:4: providers[0].script.style" in r.stderr
