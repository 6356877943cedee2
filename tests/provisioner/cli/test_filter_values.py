"""A filter value no row can have is an error listing the values, never "(none)" (issue 20, item 9)."""

from __future__ import annotations

import subprocess
import sys

from messages.facts import Decision, make_fact
from persistence.controller import open_controller


def test_cli_instances_state_bogus_is_an_error_listing_the_states(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    open_controller(url).append([make_fact(Decision(item="d"))])
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, "instances", "--state", "bogus"],
                       capture_output=True, text=True, timeout=60, env={"PROVISIONER_HOME": str(tmp_path / "h")})
    assert r.returncode == 2 and "(none)" not in r.stdout
    assert "--state: invalid choice: 'bogus'" in r.stderr
    for state in ("requested", "running", "joined", "idle", "busy", "returned", "orphaned", "lost"):
        assert f"'{state}'" in r.stderr


def test_rest_instances_state_bogus_is_a_422_listing_the_states(inprocess):
    run = inprocess()
    r = run.call("GET", "/v1/instances", role="viewer", params={"state": "bogus"})
    assert r.status_code == 422
    body = r.json()
    assert body["fields"][0]["field"] == "query.state"
    assert body["error"].startswith("query.state: state 'bogus': instances have no such state; one of: requested, ")
    assert run.call("GET", "/v1/instances", role="viewer", params={"state": "idle"}).json() == {"items": [],
                                                                                               "next": None}
    r = run.call("GET", "/v1/requests", role="viewer", params={"action": "give"})
    assert r.status_code == 422 and "one of: request, return" in r.json()["error"]
