"""The command line as an operator uses it: real processes, a real controller file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from messages.demand import SupplySnapshot
from messages.description import ProviderDescription, Template
from messages.facts import (
    InstanceSeen,
    LeaseChanged,
    Load,
    Order,
    ProviderDescribed,
    ResourceTotalChanged,
    UsageObserved,
    make_fact,
)
from persistence.controller import open_controller

pytestmark = pytest.mark.slow  # real processes: the command line run as an operator runs it


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
    r = cli("--controller", url, "demand", "put", "-",
            stdin="items:\n- {id: d3, kind: units, resource: vcs, count: 1}\n")
    assert r.returncode == 0, r.stderr
    shown = json.loads(cli("--controller", url, "demand", "show", "-o", "json").stdout)
    assert shown["seq"] == 2 and [i["id"] for i in shown["items"]] == ["d3"]
    table = cli("--controller", url, "demand", "show").stdout
    assert "d3" in table and "vcs" in table


@pytest.mark.parametrize("body,expect", [
    ('{"items": [{"id": "d1", "kind": "hosts", "count": -1}]}',
     "stdin:1: items[0] (id 'd1').count: must be at least 0, got -1"),
    ('{"items": [{"id": "d1", "kind": "gpus", "count": 1}]}', "items[0] (id 'd1').kind: expected one of 'hosts', "
                                                             "'units', 'bundles', got 'gpus'"),
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
    shown = cli("--controller", url, "demand", "show")
    assert shown.returncode == 1 and "no such database file" in shown.stderr, "nothing stored, not even a store"
    assert not (Path(url[len("sqlite://"):])).exists()


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
    assert r.returncode == 1 and r.stderr == ("provisioner: stdin:1: hosts[0] (name 'node-1').state: expected one of "
                                              "'idle', 'busy', got 'asleep'\n"), r.stderr


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


# --- provisioner plan -----------------------------------------------------------------------

#: Per bundle of 2 CPUs and 8 GiB: small 0.10, medium 0.095, large 0.10 an hour.
CLOUD = ProviderDescription(name="cloud", kind="hosts", priority=10, cost_per_hour=1.0, templates=[
    Template(id=t, max_number=200, cost_per_hour=price, attributes={"type": "X86_64", "ncpus": ncpus, "mem": mem})
    for t, ncpus, mem, price in (("small", 2, 8, 0.10), ("medium", 8, 32, 0.38), ("large", 32, 128, 1.60))])
PLAN_DEMAND = {"items": [
    {"id": "j1", "kind": "bundles", "count": 400, "resources": {"ncpus": 2, "mem": 8}},
    {"id": "big", "kind": "bundles", "count": 3, "resources": {"ncpus": 64, "mem": 8}},
    {"id": "h1", "kind": "hosts", "count": 2, "select": {"ncpus": ">=32"}},
]}


@pytest.fixture
def described(url, tmp_path):
    """A controller on which the daemon ``a`` owns the provider ``cloud`` and has described it."""
    c = open_controller(url)
    c.append([make_fact(LeaseChanged(kind="lease_acquired", name="provider:cloud", holder="a", fence=1),
                        provider="cloud"),
              make_fact(ProviderDescribed(description=CLOUD), provider="cloud")])
    yield c
    c.close()


def plan(url: str, tmp_path: Path, *args: str, demand: dict = PLAN_DEMAND) -> subprocess.CompletedProcess:
    f = tmp_path / "demand.json"
    f.write_text(json.dumps(demand))
    return cli("--controller", url, "plan", "--demand", str(f), *args,
               env={**os.environ, "PROVISIONER_HOME": str(tmp_path / "home")})


def test_plan_packs_bundles_on_the_described_providers_says_what_is_unplaced_and_writes_nothing(
        url, tmp_path, described):
    seq = described.last_seq()
    r = plan(url, tmp_path, "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"orders", "cost_per_hour", "unplaced", "decisions", "planning_ms", "no_owner",
                        "never_described"}
    assert out["no_owner"] == [] and all(o["note"] is None for o in out["orders"]), "cloud has its owner"
    orders = {(o["template"], o["count"]): o for o in out["orders"]}
    assert orders[("medium", 100)]["bundles"] == {"j1": 400} and orders[("medium", 100)]["provider"] == "cloud"
    assert orders[("large", 2)]["bundles"] == {} and orders[("large", 2)]["item"] == "h1"
    assert out["cost_per_hour"] == pytest.approx(100 * 0.38 + 2 * 1.60)
    [(item, count, reason)] = [(u["item"], u["count"], u["reason"]) for u in out["unplaced"]]
    assert (item, count) == ("big", 3) and reason.startswith("too small") and "ncpus 64" in reason
    assert [d["item"] for d in out["decisions"]] == ["j1", "big", "h1"]
    j1 = out["decisions"][0]
    assert j1["chosen"] == [{"provider": "cloud", "template": "medium", "resource": None, "count": 100,
                             "bundles": 400}]
    assert isinstance(out["planning_ms"], float) and out["planning_ms"] >= 0
    # Nothing written: no fact, no demand, no audit log, no snapshot.
    assert described.last_seq() == seq and described.get_demand() is None
    assert not (tmp_path / "home").exists()

    table = plan(url, tmp_path)
    assert table.returncode == 0, table.stderr
    assert "PROVIDER" in table.stdout and "j1: 400" in table.stdout and "too small" in table.stdout
    assert described.last_seq() == seq


def test_plan_counts_the_supply_in_flight_unless_empty(url, tmp_path, described):
    # Half the bundles already ride on 50 medium hosts ordered a moment ago.
    described.append([make_fact(Order(action="request", supply="hosts", template="medium", count=50,
                                      loads=[Load(hosts=50, bundles={"j1": 4})]), provider="cloud")])
    seq = described.last_seq()
    current = json.loads(plan(url, tmp_path, "-o", "json").stdout)
    assert [(o["template"], o["count"], o["bundles"]) for o in current["orders"] if o["bundles"]] == [
        ("medium", 50, {"j1": 200})]
    assert current["decisions"][0]["in_flight"] == 200 and current["decisions"][0]["need"] == 200
    empty = json.loads(plan(url, tmp_path, "--empty", "-o", "json").stdout)
    assert [(o["template"], o["count"], o["bundles"]) for o in empty["orders"] if o["bundles"]] == [
        ("medium", 100, {"j1": 400})]
    assert empty["decisions"][0]["in_flight"] == 0
    assert described.last_seq() == seq


def test_plan_uses_the_configs_budget_and_says_why_bundles_found_no_room(url, tmp_path, described):
    cfg = tmp_path / "provisioner.yaml"
    cfg.write_text(f"instance: {{id: a, serves: [], planner: true}}\ncontroller: {{url: '{url}'}}\n"
                   f"home: {tmp_path / 'home'}\nbudget: {{max_hosts: 62}}\n")
    f = tmp_path / "demand.json"
    f.write_text(json.dumps(PLAN_DEMAND))
    r = cli("--config", str(cfg), "plan", "--demand", str(f), "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # The bundles come first in the snapshot: they take the room, and the host item finds none left.
    assert [(o["template"], o["count"], o["bundles"]) for o in out["orders"]] == [("medium", 62, {"j1": 248})]
    unplaced = {u["item"]: (u["count"], u["reason"]) for u in out["unplaced"]}
    assert unplaced["j1"] == (152, "no room: cloud small: budget: max_hosts; cloud medium: budget: max_hosts; "
                                   "cloud large: budget: max_hosts")
    assert unplaced["h1"] == (2, "cloud: budget: max_hosts") and unplaced["big"][0] == 3


def test_plan_with_no_daemon_running_plans_from_the_last_descriptions_and_says_no_owner(url, tmp_path, described):
    """The daemon stopped (its lease given up): plan still answers what a round would order, each order
    and decision saying that no daemon holds the provider (every candidate said "no owner", even with
    --empty). A provider of the config never described is named."""
    described.append([make_fact(LeaseChanged(kind="lease_lost", name="provider:cloud", holder="a", fence=1),
                                provider="cloud")])
    cfg = tmp_path / "provisioner.yaml"
    cfg.write_text(f"instance: {{id: a, serves: [], planner: true}}\ncontroller: {{url: '{url}'}}\n"
                   f"home: {tmp_path / 'home'}\nproviders:\n"
                   "  - {name: cloud, kind: hosts, script: {style: v2, path: /opt/p/cloud}}\n"
                   "  - {name: spare, kind: hosts, script: {style: v2, path: /opt/p/spare}}\n")
    f = tmp_path / "demand.json"
    f.write_text(json.dumps(PLAN_DEMAND))
    for extra in ((), ("--empty",)):
        r = cli("--config", str(cfg), "plan", "--demand", str(f), "-o", "json", *extra)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["no_owner"] == ["cloud"] and out["never_described"] == ["spare"]
        assert [(o["template"], o["count"]) for o in out["orders"]] == [("medium", 100), ("large", 2)], extra
        assert all(o["note"].startswith("no_owner: no daemon holds cloud now") for o in out["orders"])
        assert all("no_owner: no daemon holds cloud now" in d["note"] for d in out["decisions"]), out["decisions"]
    table = cli("--config", str(cfg), "plan", "--demand", str(f))
    assert table.returncode == 0, table.stderr
    assert "no owner: no daemon holds cloud now; planned from its last recorded description" in table.stdout
    assert "never described, not planned for: spare" in table.stdout
    assert "no owner:" not in table.stdout.split("decisions, each candidate")[1].replace("no_owner:", "")


@pytest.mark.parametrize("body,expect", [
    ('{"items": [{"id": "j", "kind": "bundles", "count": 3, "resources": {"ncpus": "two"}}]}',
     "demand.json:1: items[0] (id 'j').resources.ncpus: expected an integer or a number, got 'two'"),
    ('{"items": [{"id": "j", "kind": "bundles", "count": 3, "resources": {}}]}',
     "items[0] (id 'j').resources: must not be empty"),
    ('{"items": [', "demand.json: not valid JSON"),
    ("items: [unclosed", "demand.json: not valid JSON or YAML"),
    ("", "demand.json: empty"),
    (None, "demand.json: No such file"),
])
def test_plan_refuses_a_bad_demand_file_naming_the_place(url, tmp_path, described, body, expect):
    f = tmp_path / "demand.json"
    if body is not None:
        f.write_text(body)
    r = cli("--controller", url, "plan", "--demand", str(f))
    assert r.returncode == 1 and expect in r.stderr, r.stderr
    assert r.stderr.startswith("provisioner: ") and len(r.stderr.strip().splitlines()) == 1


def test_plan_reads_the_controller_not_a_daemons_api(tmp_path):
    r = cli("--url", "http://127.0.0.1:9", "plan", "--demand", str(tmp_path / "demand.json"))
    assert r.returncode == 1 and "give --config or --controller, not --url" in r.stderr


def test_resources_show_what_the_scheduler_holds_and_the_drift(url):
    c = open_controller(url)
    try:
        c.append([make_fact(ResourceTotalChanged(resource="vcs", base=2, borrowed=3, total=5), provider="lic"),
                  make_fact(UsageObserved(resource="vcs", in_use=5), provider="lic")])
        c.put_supply(SupplySnapshot(resources={"vcs": 3}))
    finally:
        c.close()
    (row,) = json.loads(cli("--controller", url, "resources", "-o", "json").stdout)
    assert (row["in_use"], row["scheduler_in_use"], row["drift"]) == (5, 3, 2)


# --- who is who ----------------------------------------------------------------------------------


def test_providers_and_daemons_say_who_holds_what_and_who_let_it_lapse(url, tmp_path):
    c = open_controller(url)
    try:
        c.append([make_fact(ProviderDescribed(description=CLOUD), provider="cloud")])
        c.leases.acquire("instance:a", "a@host1:100/cafe", 3600)
        c.leases.acquire_all(["planner", "provider:cloud"], "a", 3600)
        c.leases.acquire("instance:b", "b@host2:200/beef", 3600)
        env = {**os.environ, "PROVISIONER_HOME": str(tmp_path / "home")}
        table = cli("--controller", url, "daemons", env=env).stdout.splitlines()
        assert table[0].split() == ["INSTANCE", "STATE", "PROCESS", "SINCE", "EXPIRES_IN", "PLANNER", "PROVIDERS"]
        assert table[1].split()[:3] == ["a", "active", "host1:100"] and table[1].split()[-2:] == ["True", "cloud"]
        assert table[2].split()[:3] == ["b", "standby", "host2:200"] and table[2].split()[-2:] == ["False", "-"]
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:  # a's host rebooted: its process is gone
            conn.execute("UPDATE leases SET boot = 'an-earlier-boot' WHERE holder LIKE 'a%'")
        conn.close()
        rows = json.loads(cli("--controller", url, "daemons", "-o", "json", env=env).stdout)
        assert [(r["instance"], r["state"], r["providers"]) for r in rows] == [("a", "lapsed", []),
                                                                            ("b", "standby", [])]
        assert {r["role"]: r["state"] for r in rows[0]["roles"]} == {"planner": "lapsed", "provider:cloud": "lapsed"}
        table = cli("--controller", url, "providers", env=env).stdout.splitlines()
        assert table[0].split()[:5] == ["NAME", "KIND", "OWNER", "OWNER_STATE", "LEASE"]
        assert table[1].split()[:4] == ["cloud", "hosts", "a", "lapsed"] and "owner_lapsed" in table[1].split()
        lapsed = cli("--controller", url, "providers", "--status", "owner_lapsed", "-o", "json", env=env)
        assert [r["name"] for r in json.loads(lapsed.stdout)] == ["cloud"], lapsed.stderr
    finally:
        c.close()
