"""The scheduler's inputs over REST: a demand over the item limit, host events naming no host or two,
the supply view."""

from __future__ import annotations

import pytest

from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow


def test_a_demand_over_the_item_limit_is_refused_whole(start_api):
    api = start_api(policy={"max_demand_items": 3})
    items = [{"id": f"d{i}", "kind": "hosts", "count": 1} for i in range(4)]
    r = api.call("PUT", "/v1/demand", "scheduler", json={"items": items})
    assert r.status_code == 413 and "more than policy.max_demand_items (3)" in r.json()["error"], r.text
    assert api.ok("GET", "/v1/demand") is None, "nothing stored"
    assert api.call("PUT", "/v1/demand", "scheduler", json={"items": items[:3]}).status_code == 200


def test_host_events_name_a_live_host_or_are_refused_and_counted(start_api):
    api = start_api()
    r = api.call("POST", "/v1/hosts/no-such-host/events", "scheduler", json={"event": "joined"})
    assert r.status_code == 404 and "no live host named 'no-such-host'" in r.json()["error"]
    api.demand_round()
    name = next(iter(api.state().instances.values())).name
    r = api.call("POST", f"/v1/hosts/{name}/events", "scheduler", json={"event": "joined", "provider": "units"})
    assert r.status_code == 404 and "at provider 'units'" in r.json()["error"]
    ev = api.ok("POST", f"/v1/hosts/{name}/events", "scheduler", json={"event": "joined", "provider": "hosts"})
    assert ev["provider"] == "hosts"
    metrics = api.get("/metrics").text
    assert 'provisioner_host_events_refused_total{reason="unknown"} 2.0' in metrics


def test_the_supply_view_corrects_a_host_whose_idle_event_was_lost(start_api):
    api = start_api()
    api.demand_round()
    inst = next(iter(api.state().instances.values()))
    api.ok("POST", f"/v1/hosts/{inst.name}/events", "scheduler", json={"event": "busy"})
    api.wait_state(lambda s: s.instances[inst.key].state == "busy", "the host busy")
    stored = api.ok("PUT", "/v1/supply", "scheduler", json={"hosts": [{"name": inst.name, "state": "idle"}]})
    assert stored["seq"] >= 1 and api.ok("GET", "/v1/supply")["hosts"][0]["state"] == "idle"
    api.wait_state(lambda s: s.instances[inst.key].state == "idle", "the view to make it idle")
    wait_until(lambda: "scheduler's view" in api.state().instances[inst.key].reason, what="the reason recorded")
