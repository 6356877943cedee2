"""Every endpoint of the REST API, over real HTTP, against a daemon doing real work."""

from __future__ import annotations

import time
import urllib.parse
from importlib.metadata import version

import pytest

from provisioner.read import views
from tests.support.api import DEMAND, TOKENS
from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow


def test_views_after_a_demand_round(start_api):
    api = start_api()
    assert api.ok("GET", "/healthz", None) == {"status": "ok", "version": version("provisioner")}
    p = api.demand_round()

    providers = api.ok("GET", "/v1/providers")
    assert providers["next"] is None
    rows = {r["name"]: r for r in providers["items"]}
    assert set(rows) == {"hosts", "units"}
    assert rows["hosts"]["owner"] == "a" and rows["hosts"]["lease"] >= 1 and rows["hosts"]["status"] == "active"
    assert rows["hosts"]["in_use"] == 2 and rows["hosts"]["cost_per_hour"] == 1.0  # 2 hosts at 0.5
    assert rows["hosts"]["description"]["templates"][0]["id"] == "small"
    assert rows["units"]["description"]["pools"][0]["resource"] == "vcs"
    assert api.ok("GET", "/v1/providers/units")["in_use"] == 2

    instances = api.ok("GET", "/v1/instances")["items"]
    assert sorted(i["id"] for i in instances) == sorted(p.instances)
    assert all(i["state"] == "running" and i["template"] == "small" and i["cost_so_far"] >= 0 for i in instances)

    requests = api.ok("GET", "/v1/requests")["items"]
    assert sorted(r["id"] for r in requests) == sorted(p.requests)
    assert {(r["kind"], r["count"], r["state"]) for r in requests} == {("hosts", 2, "complete"),
                                                                       ("units", 2, "complete")}

    assert api.ok("GET", "/v1/resources")["items"] == [
        {"name": "vcs", "provider": "units", "base": 2, "borrowed": 2, "total": 4,
         "in_use": p.resources["vcs"].in_use, "free": 4 - (p.resources["vcs"].in_use or 0),
         "scheduler_in_use": None, "drift": None}], "no supply view yet: nothing to compare with"

    costs = {c["provider"]: c for c in api.ok("GET", "/v1/costs")["items"]}
    assert costs["hosts"]["cost_per_hour_now"] == 1.0 and costs["units"]["cost_per_hour_now"] == 4.0
    assert costs["hosts"]["cost_so_far"] > 0 and costs["units"]["cost_so_far"] > 0

    decisions = api.ok("GET", "/v1/decisions")["items"]
    first = {d["item"]: d for d in decisions if d["chosen"]}
    assert first["d1"]["need"] == 2 and first["d1"]["chosen"][0]["provider"] == "hosts"
    assert first["d2"]["chosen"][0]["resource"] == "vcs" and first["d2"]["chosen"][0]["count"] == 2
    assert [d["seq"] for d in decisions] == sorted(d["seq"] for d in decisions)

    assert api.ok("GET", "/v1/orphans") == {"items": [], "next": None}
    demand = api.ok("GET", "/v1/demand")
    assert demand["seq"] == api.controller.get_demand().seq and [i["id"] for i in demand["items"]] == ["d1", "d2"]

    ready = api.ok("GET", "/readyz", None)
    assert ready["status"] == "ready" and ready["seq"] >= max(f.seq for f in api.controller.read())
    assert "/v1/providers/{name}/pause" in api.ok("GET", "/openapi.json", None)["paths"]


def test_rows_are_the_cli_views_rows(start_api):
    """REST and the CLI's direct mode show one shape: the rows of provisioner/read/views.py."""
    api = start_api()
    api.demand_round()
    p = api.state()
    assert api.ok("GET", "/v1/requests")["items"] == views.requests(p)
    assert api.ok("GET", "/v1/decisions")["items"] == views.decisions(p)
    rest = api.ok("GET", "/v1/providers")["items"]
    direct = views.provider_details(p, api.controller.leases.table(), time.time())
    assert [{k: v for k, v in r.items() if k != "cost_per_hour"} for r in rest] == \
        [{k: v for k, v in r.items() if k != "cost_per_hour"} for r in direct]


def test_filters_and_paging(start_api):
    api = start_api()
    api.demand_round()
    everything = [i["id"] for i in api.ok("GET", "/v1/instances")["items"]]
    first = api.ok("GET", "/v1/instances", params={"limit": 1})
    assert [i["id"] for i in first["items"]] == everything[:1] and first["next"] == everything[0]
    second = api.ok("GET", "/v1/instances", params={"limit": 1, "after": first["next"]})
    assert [i["id"] for i in second["items"]] == everything[1:2] and second["next"] is None

    assert api.ok("GET", "/v1/requests", params={"provider": "units"})["items"][0]["resource"] == "vcs"
    assert api.ok("GET", "/v1/requests", params={"provider": "units", "kind": "hosts"})["items"] == []
    assert api.ok("GET", "/v1/instances", params={"state": "returned"})["items"] == []
    assert len(api.ok("GET", "/v1/instances", params={"state": "running", "provider": "hosts"})["items"]) == 2
    assert [r["name"] for r in api.ok("GET", "/v1/providers", params={"kind": "units"})["items"]] == ["units"]
    decisions = api.ok("GET", "/v1/decisions")["items"]
    later = api.ok("GET", "/v1/decisions", params={"after": str(decisions[0]["seq"])})["items"]
    assert later == decisions[1:]

    r = api.get("/v1/instances", params={"after": "nobody/none"})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "query.after"
    assert "nobody/none" in r.json()["error"]


def test_scheduler_feeds_demand_and_host_events(start_api):
    api = start_api()
    p = api.demand_round()
    stored = api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][0]]})
    assert stored["seq"] == api.controller.get_demand().seq and len(stored["items"]) == 1
    assert api.ok("GET", "/v1/demand")["seq"] == stored["seq"]

    inst = next(iter(p.instances.values()))
    ev = api.ok("POST", f"/v1/hosts/{inst.name}/events", "scheduler", json={"event": "joined"})
    assert ev["name"] == inst.name and ev["event"] == "joined" and ev["seq"] >= 1
    api.wait_state(lambda s: s.instances[inst.key].state == "joined", "the host joined")
    joined = api.ok("GET", "/v1/instances", params={"state": "joined"})["items"]
    assert [i["id"] for i in joined] == [inst.key] and joined[0]["joined_at"] is not None


def test_operator_steers_providers_and_it_is_audited(start_api):
    api = start_api()
    api.demand_round()
    for action, status in (("pause", "paused"), ("drain", "drained"), ("resume", "active")):
        r = api.call("POST", f"/v1/providers/hosts/{action}", "operator", json={"reason": f"{action} for maintenance"})
        assert r.status_code == 202, r.text
        body = r.json()
        assert body["kind"] == f"provider_{status if status != 'active' else 'resumed'}" and body["provider"] == "hosts"
        row = api.ok("GET", "/v1/providers/hosts")
        assert row["status"] == status and row["status_reason"] == f"operator: {action} for maintenance (by ops)"
    fact = next(f for f in api.controller.read() if f.id == body["fact"])
    assert fact.lease == "" and fact.provider == "hosts", "an operator's request is an unfenced fact"
    assert api.ok("POST", "/v1/providers/units/pause", "operator")["kind"] == "provider_paused"

    audit = api.ok("GET", "/v1/audit", params={"limit": 1000})["items"]
    steered = [a for a in audit if a["kind"].startswith("provider_")]
    assert [a["kind"] for a in steered] == ["provider_paused", "provider_drained", "provider_resumed",
                                           "provider_paused"]
    assert "(by ops)" in steered[0]["what"]
    assert {a["kind"] for a in audit} >= {"decision", "order", "lease_acquired"}
    assert api.ok("GET", "/v1/audit/verify") == {"ok": True, "lines": len(audit), "problem": None,
                                                 "starts_after_rotation": False}
    tail = api.ok("GET", "/v1/audit", params={"after": audit[-2]["hash"]})
    assert tail["items"] == audit[-1:] and tail["next"] == audit[-1]["hash"]

    r = api.call("POST", "/v1/providers/nowhere/pause", "operator")
    assert r.status_code == 404 and "nowhere" in r.json()["error"]


def test_any_daemon_serves_the_cluster_and_owners_carry_out_its_requests(start_api):
    """Daemon b owns nothing; it shows a's supply, and a return asked of b is carried out by a."""
    a = start_api()
    p = a.demand_round()
    b = start_api(providers=[], instance="b", home="home-b")

    def rows(api):
        return [{k: v for k, v in r.items() if k != "cost_so_far"} for r in api.ok("GET", "/v1/instances")["items"]]

    assert rows(b) == rows(a) and {r["id"]: r["state"] for r in rows(b)} == {k: "running" for k in p.instances}
    assert {r["name"]: r["owner"] for r in b.ok("GET", "/v1/providers")["items"]} == {"hosts": "a", "units": "a"}

    inst = sorted(p.instances.values(), key=lambda i: i.key)[0]
    r = b.call("POST", f"/v1/instances/{urllib.parse.quote(inst.key, safe='')}/return", "operator",
               json={"reason": "bad disk"})
    assert r.status_code == 202, r.text
    assert inst.provider in r.json()["message"]
    s = a.wait_state(lambda s: s.instances[inst.key].state == "returned", "the owner returns the host")
    order = next(o for o in s.orders.values() if o.order.action == "return" and inst.machine_id in o.order.machines)
    assert order.order.reason == "operator: bad disk (by ops)"

    again = b.call("POST", f"/v1/instances/{inst.machine_id}/return", "operator")
    assert again.status_code == 409 and "returned" in again.json()["error"]
    assert b.call("POST", "/v1/instances/hosts/no-such-machine/return", "operator").status_code == 404


def test_orphans_are_listed_and_returned_on_request(start_api):
    """With ``orphans: report`` a host that never joins stays orphaned until an operator returns it."""
    api = start_api(policy={"join_timeout": "1s", "orphans": "report"})
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][0]]})
    p = api.wait_state(lambda s: sum(i.state == "orphaned" for i in s.instances.values()) == 2,
                       "the hosts that never joined become orphans")
    rows = api.ok("GET", "/v1/orphans")["items"]
    assert sorted(r["id"] for r in rows) == sorted(p.instances)
    assert all(r["kind"] == "instance" and r["provider"] == "hosts" and "join_timeout" in r["reason"] for r in rows)
    assert api.ok("GET", "/v1/orphans", params={"kind": "grant"})["items"] == []

    api.ok("PUT", "/v1/demand", "scheduler", json={"items": []})  # nothing replaces them: the list stays put
    victim = rows[0]["id"]
    r = api.call("POST", f"/v1/orphans/{victim}/return", "operator")
    assert r.status_code == 202, r.text
    api.wait_state(lambda s: s.instances[victim].state == "returned", "the orphan returned")
    assert [r["id"] for r in api.ok("GET", "/v1/orphans")["items"]] == [rows[1]["id"]]
    assert api.call("POST", f"/v1/orphans/{victim}/return", "operator").status_code == 404


def test_metrics_endpoint_needs_a_reader_and_serves_text(start_api):
    api = start_api()
    r = api.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert "provisioner_facts_total" in r.text
    assert api.get("/metrics", role=None).status_code == 401
    wait_until(lambda: api.get("/readyz", role=None).status_code == 200, what="ready")
    assert TOKENS["viewer"][1] not in r.text
