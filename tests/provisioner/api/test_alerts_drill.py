"""Drill: a real Prometheus loads the shipped alert rules and answers every dashboard query on a real daemon.

On a daemon that has met a demand and returned a host, every rule evaluates
without error and none fires, and the dashboard's panels have data to show.
"""

from __future__ import annotations

import math

import pytest

from tests.support.api import DEMAND, write_token_file
from tests.support.daemons import wait_until
from tests.support.dashboards import RULES, alert_rules, dashboard_queries
from tests.support.prometheus import api as prometheus_api
from tests.support.prometheus import query

pytestmark = pytest.mark.slow

#: Panels with nothing to show on a healthy daemon that met its demand: nothing failed, every provider is active.
QUIET = {"panel 'Providers not active' A", "panel 'Script failures' A"}


def test_the_rules_load_and_stay_quiet_and_every_panel_has_data(start_api, prometheus, tmp_path):
    api = start_api(policy={"join_grace": "10m"})
    api.demand_round()
    prom = prometheus(api.url.removeprefix("http://"), str(write_token_file(tmp_path / "scrape.token", "viewer")),
                      rule_files=[RULES])
    # Rates and quantiles show what happened while Prometheus watched: give the daemon work then (a host
    # returned: facts committed, a return script run), once it has scraped the daemon.
    wait_until(lambda: query(prom, "provisioner_build_info") != {}, 30, "a first scrape of the daemon")
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][1]]})
    inst = next(iter(api.state().instances.values()))
    api.ok("POST", f"/v1/instances/{inst.machine_id}/return", "operator")
    wait_until(lambda: query(prom, 'provisioner_instances{state="returned"}') == {(("provider", "hosts"),
                                                                                   ("state", "returned")): 1.0},
               30, "the return seen by Prometheus")

    def evaluated() -> list[dict]:
        rules = [r for g in prometheus_api(prom, "/api/v1/rules")["groups"] for r in g["rules"]]
        return rules if rules and all(r.get("lastEvaluation", "").startswith("2") and
                                      r.get("evaluationTime", 0) > 0 for r in rules) else []

    wait_until(lambda: evaluated() != [], 30, "every rule evaluated once")
    rules = evaluated()
    assert sorted(r["name"] for r in rules) == sorted(r["alert"] for r in alert_rules())
    assert [(r["name"], r["health"], r.get("lastError", "")) for r in rules if r["health"] != "ok"] == []
    assert [(r["name"], r["state"]) for r in rules if r["state"] != "inactive"] == []

    empty = []
    for where, expr in dashboard_queries():
        result = query(prom, expr)
        if where not in QUIET and not any(not math.isnan(v) for v in result.values()):
            empty.append(where)
    assert empty == [], f"panels with no data on a daemon that worked: {empty}"
    assert query(prom, "provisioner_controller_up") == {(): 1.0}
