"""The CLI against a running daemon (``--url --token-file``) and directly against the controller: one answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.api import write_token_file
from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow

#: Owners poll their scripts less often, so the CLI's own processes get the CPU.
QUIET = {"poll_every": "1s", "plan_every": "0.2s"}
#: Fields that move with the clock between two calls.
MOVING = {"cost_so_far", "cost_per_hour", "cost_per_hour_now"}


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def still(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in MOVING} for r in rows]


def test_views_over_rest_equal_the_direct_views(start_api, tmp_path):
    api = start_api(policy=QUIET | {"join_grace": "10m"})  # the supply stays in flight: nothing moves
    api.demand_round()
    viewer = write_token_file(tmp_path / "viewer.token", "viewer")
    remote = ("--url", api.url, "--token-file", str(viewer))
    direct = ("--controller", api.cfg.controller.url)
    for view in ("providers", "requests", "instances", "decisions"):
        over_rest = run_cli(*remote, view, "-o", "json")
        straight = run_cli(*direct, view, "-o", "json")
        assert over_rest.returncode == 0 and straight.returncode == 0, (view, over_rest.stderr, straight.stderr)
        assert still(json.loads(over_rest.stdout)) == still(json.loads(straight.stdout)), view
    over_rest, straight = (json.loads(run_cli(*how, "daemons", "-o", "json").stdout) for how in (remote, direct))
    assert [(r["instance"], r["state"], r["planner"], r["providers"]) for r in over_rest] == \
        [("a", "active", True, ["hosts", "units"])]
    assert [{k: v for k, v in r.items() if k not in ("since", "expires_in", "roles")} for r in over_rest] == \
        [{k: v for k, v in r.items() if k not in ("since", "expires_in", "roles")} for r in straight]
    assert abs(over_rest[0]["since"] - straight[0]["since"]) < 1.0, "the same start, read by two clocks"
    filtered = json.loads(run_cli(*remote, "requests", "--provider", "units", "-o", "json").stdout)
    assert [r["resource"] for r in filtered] == ["vcs"]
    table = run_cli(*remote, "decisions").stdout
    assert re.search(r"hosts/small +took 2", table) and re.search(r"units/vcs +took 2", table), table
    table = run_cli(*remote, "providers").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "KIND", "OWNER"] and "DESCRIPTION" not in table[0]
    shown = json.loads(run_cli(*remote, "demand", "show", "-o", "json").stdout)
    assert shown["seq"] == api.controller.get_demand().seq


def test_cli_acts_through_the_daemon_with_the_right_token(start_api, tmp_path):
    api = start_api(policy=QUIET)
    p = api.demand_round()
    ops = ("--url", api.url, "--token-file", str(write_token_file(tmp_path / "ops.token", "operator")))
    sched = ("--url", api.url, "--token-file", str(write_token_file(tmp_path / "sched.token", "scheduler")))

    r = run_cli(*ops, "provider", "pause", "hosts", "--reason", "cloud maintenance")
    assert r.returncode == 0 and r.stdout.strip() == "pause of hosts recorded; its owner applies it", r.stderr
    assert api.ok("GET", "/v1/providers/hosts")["status_reason"] == "operator: cloud maintenance (by ops)"
    r = run_cli(*ops, "provider", "resume", "hosts")
    assert r.returncode == 0 and api.ok("GET", "/v1/providers/hosts")["status"] == "active"

    inst = sorted(p.instances.values(), key=lambda i: i.key)[0]
    r = run_cli(*ops, "instance", "return", inst.name)
    assert r.returncode == 0 and inst.key in r.stdout, r.stderr
    api.wait_state(lambda s: s.instances[inst.key].state == "returned", "the host returned")

    demand = tmp_path / "demand.yaml"
    demand.write_text("items:\n- {id: d9, kind: units, resource: vcs, count: 1}\n")
    r = run_cli(*sched, "demand", "put", str(demand))
    assert r.returncode == 0 and r.stdout.startswith(f"demand {api.controller.get_demand().seq} stored: 1 items")
    other = sorted(p.instances.values(), key=lambda i: i.key)[1]
    r = run_cli(*sched, "host", "idle", other.name)
    assert r.returncode == 0 and f"{other.name} idle" in r.stdout

    r = run_cli(*sched, "provider", "drain", "hosts")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == ("provisioner: POST /v1/providers/hosts/drain: 403 role scheduler (sched) may not "
                                "steer providers or return supply: it needs role operator")
    r = run_cli(*ops, "instance", "return", "no-such-host")
    assert r.returncode == 1 and "404 no instance 'no-such-host'" in r.stderr and len(r.stderr.splitlines()) == 1

    r = run_cli(*ops, "audit", "-o", "json", "--limit", "500")
    kinds = [x["kind"] for x in json.loads(r.stdout)]
    assert kinds.count("provider_paused") == 1 and kinds.count("provider_resumed") == 1
    r = run_cli(*ops, "audit", "verify")
    assert r.returncode == 0 and r.stdout.startswith("audit log intact:")


def test_cli_refuses_a_loose_token_file_and_reports_an_unreachable_daemon(start_api, tmp_path):
    api = start_api(providers=[])
    loose = write_token_file(tmp_path / "loose.token", "viewer")
    loose.chmod(0o644)
    r = run_cli("--url", api.url, "--token-file", str(loose), "providers")
    assert r.returncode == 1 and "mode 0644 is too open" in r.stderr and "viewer-" not in r.stderr
    r = run_cli("--url", api.url, "providers")
    assert r.returncode == 1 and r.stderr.strip() == "provisioner: GET /v1/providers: 401 missing bearer token: " \
                                                     "send 'Authorization: Bearer <token>'"
    r = run_cli("--url", "http://127.0.0.1:9", "requests")
    assert r.returncode == 1 and r.stderr.startswith("provisioner: cannot reach http://127.0.0.1:9")


def test_direct_actions_are_facts_and_audit_lines_too(start_api, tmp_path):
    """With no daemon in the way, the CLI appends the operator's fact itself and audits it in the home.

    Its log, as every audit log, holds every audited fact of the controller up to its own.
    """
    api = start_api()
    api.demand_round()
    env = {"PROVISIONER_HOME": str(tmp_path / "cli-home")}
    r = run_cli("--controller", api.cfg.controller.url, "provider", "drain", "units", "--reason", "license audit",
                env=env)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: api.ok("GET", "/v1/providers/units")["status"] == "drained", what="the drain seen by the API")
    lines = [json.loads(x) for x in (tmp_path / "cli-home" / "audit.log").read_text().splitlines()]
    assert lines[-1]["kind"] == "provider_drained" and "license audit" in lines[-1]["what"]
    assert lines[-1]["lease"] == "" and lines[-1]["seq"] is not None
    assert {x["kind"] for x in lines[:-1]} >= {"lease_acquired", "decision", "order"}, "the daemon's too"
    r = run_cli("--controller", api.cfg.controller.url, "audit", "verify", env=env)
    assert r.returncode == 0 and r.stdout.startswith("audit log intact:"), r.stderr
