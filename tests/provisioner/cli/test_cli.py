"""The command line as an operator uses it: real processes, a real controller file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from messages.facts import InstanceSeen, make_fact
from persistence.controller import open_controller


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


def _hosts(url: str, *placed: tuple[str, str, str]) -> None:
    """Live hosts (provider, machine id, name) in the controller's facts."""
    c = open_controller(url)
    try:
        c.append([make_fact(InstanceSeen(machine_id=m, name=n, state="running"), provider=p) for p, m, n in placed])
    finally:
        c.close()


def test_a_host_event_for_no_live_host_is_an_error_and_stores_nothing(url):
    """It used to print success and vanish."""
    r = cli("--controller", url, "host", "joined", "no-such-host")
    assert r.returncode == 1 and "no live host named 'no-such-host'" in r.stderr, r.stderr
    c = open_controller(url)
    try:
        assert c.read_host_events() == []
    finally:
        c.close()


def test_a_host_name_live_at_two_providers_is_refused_unless_the_provider_is_named(url):
    """Two providers each made node-1: one join applied to both let the other escape its join timeout."""
    _hosts(url, ("aws", "i-1", "node-1"), ("gcp", "g-1", "node-1"), ("gcp", "g-2", "node-2"))
    r = cli("--controller", url, "host", "joined", "node-1")
    assert r.returncode == 1 and "live at providers aws, gcp" in r.stderr and "--provider" in r.stderr, r.stderr
    r = cli("--controller", url, "host", "joined", "node-1", "--provider", "gcp")
    assert r.returncode == 0 and "node-1 joined" in r.stdout, r.stderr
    r = cli("--controller", url, "host", "joined", "node-2")
    assert r.returncode == 0, "a name live at one provider needs no provider named"
    r = cli("--controller", url, "host", "joined", "node-2", "--provider", "aws")
    assert r.returncode == 1 and "at provider 'aws'" in r.stderr
    c = open_controller(url)
    try:
        assert [(e.name, e.provider) for e in c.read_host_events()] == [("node-1", "gcp"), ("node-2", None)]
    finally:
        c.close()


def test_the_supply_view_is_put_and_a_bad_one_refused_naming_the_place(url):
    view = {"hosts": [{"name": "node-1", "state": "idle"}, {"name": "node-2", "provider": "p", "state": "busy"}]}
    r = cli("--controller", url, "supply", "put", "-", stdin=json.dumps(view))
    assert r.returncode == 0 and "supply view 1 stored: 2 hosts" in r.stdout, r.stderr
    r = cli("--controller", url, "supply", "put", "-", stdin='{"hosts": [{"name": "node-1", "state": "asleep"}]}')
    assert r.returncode == 1 and r.stderr.startswith("provisioner: stdin: hosts.0.state"), r.stderr


def test_host_events_and_views(url):
    _hosts(url, ("p", "m-1", "node-1"))
    r = cli("--controller", url, "host", "joined", "node-1")
    assert r.returncode == 0 and "node-1 joined" in r.stdout
    r = cli("--controller", url, "host", "asleep", "node-1")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    for view in ("requests", "resources"):
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
