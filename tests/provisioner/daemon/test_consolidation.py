"""Drill: a real daemon consolidates through any scheduler's interface (issue 32): a busy dear host says ``drain``
in the instances view, a cheap host is made, and the dear one goes back only once the scheduler reports it idle.

The scheduler is this test, over REST: it reads ``GET /v1/instances`` and sends host events.
"""

from __future__ import annotations

import pytest

from tests.support.daemons import HOSTS_SIM, sim_provider

pytestmark = pytest.mark.slow


def test_a_busy_dear_host_is_asked_to_drain_replaced_and_returned_only_once_the_scheduler_says_idle(start_api,
                                                                                                   tmp_path):
    dear = sim_provider(tmp_path, "dear", {**HOSTS_SIM, "name_prefix": "d", "cost_per_hour": 1.0})
    cheap = sim_provider(tmp_path, "cheap", {**HOSTS_SIM, "name_prefix": "c", "cost_per_hour": 0.1})
    api = start_api(providers=[dear, cheap], policy={"consolidation": {"enabled": True, "max_hosts": 1}})
    api.wait_state(lambda s: all(n in s.providers and s.providers[n].description for n in ("dear", "cheap")),
                   "both providers described")
    api.ok("POST", "/v1/providers/cheap/pause", "operator", json={"reason": "no room"})
    api.wait_state(lambda s: s.providers["cheap"].status == "paused", "cheap paused")
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [{"id": "batch", "kind": "hosts", "count": 1}]})
    s = api.wait_state(lambda s: [i.state for i in s.instances.values()] == ["running"], "a dear host made")
    (host,) = s.instances.values()
    assert host.provider == "dear"
    api.ok("POST", f"/v1/hosts/{host.name}/events", "scheduler", json={"event": "joined"})
    api.ok("POST", f"/v1/hosts/{host.name}/events", "scheduler", json={"event": "busy"})
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [{"id": "batch", "kind": "hosts", "count": 0}]})
    api.wait_state(lambda s: s.instances[host.key].state == "busy", "the dear host busy")
    assert not [r for r in api.ok("GET", "/v1/instances")["items"] if r["drain"]], "cheap has no room: no drain"

    api.ok("POST", "/v1/providers/cheap/resume", "operator", json={"reason": "room again"})
    s = api.wait_state(lambda s: any(i.provider == "cheap" for i in s.instances.values()), "a cheap host made")
    (row,) = [r for r in api.ok("GET", "/v1/instances")["items"] if r["id"] == host.key]
    assert (row["state"], row["drain"]) == ("busy", True), row
    assert row["drain_reason"] == "consolidating to cheap/small: saves 0.9/h (1/h to 0.1/h)"
    (d,) = [r.decision for r in s.decisions if r.decision.item == f"consolidate/dear/{host.machine_id}"]
    assert d.saving_per_hour == 0.9
    api.ok("POST", f"/v1/hosts/{host.name}/events", "scheduler", json={"event": "busy"})  # its work runs on
    s = api.state()
    assert s.instances[host.key].state == "busy", "never returned while busy"

    api.ok("POST", f"/v1/hosts/{host.name}/events", "scheduler", json={"event": "idle"})  # its work ended
    api.wait_state(lambda s: s.instances[host.key].state == "returned", "the dear host returned once idle")
    (row,) = [r for r in api.ok("GET", "/v1/instances")["items"] if r["id"] == host.key]
    assert not row["drain"], "on its way back: no longer a drain request"
