"""``/metrics`` after a demand round: every series the issue names, with the values the facts imply."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import DEMAND
from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow


def scrape(api) -> dict[tuple[str, frozenset], float]:
    text = api.get("/metrics").text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def total(samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def test_metrics_after_a_demand_round(start_api):
    api = start_api(budget={"max_hosts": 20, "max_units": 10, "max_cost_per_hour": 100.0,
                            "max_spend": {"amount": 1000, "per": "month"}})
    api.demand_round()
    m = scrape(api)
    assert value(m, "provisioner_instances", provider="hosts", state="running") == 2
    assert value(m, "provisioner_units", resource="vcs", kind="base") == 2
    assert value(m, "provisioner_units", resource="vcs", kind="borrowed") == 2
    assert value(m, "provisioner_units", resource="vcs", kind="total") == 4
    assert value(m, "provisioner_requests_total", provider="hosts", action="request", outcome="complete") == 1
    assert value(m, "provisioner_requests_total", provider="units", action="request", outcome="complete") == 1
    assert value(m, "provisioner_cost_per_hour", provider="hosts") == 1.0
    assert value(m, "provisioner_cost_per_hour", provider="units") == 4.0
    assert value(m, "provisioner_cost_total", provider="hosts") > 0
    assert value(m, "provisioner_lease_owned", provider="hosts") == 1
    assert value(m, "provisioner_lease_owned", provider="units") == 1
    assert value(m, "provisioner_demand_unmet", kind="hosts") == 2
    assert value(m, "provisioner_demand_unmet", kind="units") == 2
    assert value(m, "provisioner_budget_remaining", limit="max_hosts") == 18
    assert value(m, "provisioner_budget_remaining", limit="max_units") == 8
    assert value(m, "provisioner_budget_remaining", limit="max_cost_per_hour") == 95.0
    spent = value(m, "provisioner_budget_remaining", limit="max_spend")
    assert spent is not None and 999 < spent < 1000
    facts = api.controller.read()
    assert total(m, "provisioner_facts_total") >= len(facts)
    assert value(m, "provisioner_facts_total", kind="decision") >= 2
    assert total(m, "provisioner_script_duration_seconds_count", provider="hosts", action="request") == 1
    assert total(m, "provisioner_script_duration_seconds_count", provider="units", action="describe") >= 1
    assert value(m, "provisioner_journal_commit_seconds_count") >= 1
    assert total(m, "provisioner_script_failures_total") == 0

    # Counters never go down between scrapes; a host returned shows in the instance gauge. (The scheduler
    # first says it needs no more hosts, so nothing replaces the one returned.)
    seq = api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][1]]})["seq"]
    wait_until(lambda: any(f.payload.kind == "decision" and f.payload.demand_seq == seq
                           for f in api.controller.read()), what="the planner's answer to the smaller demand")
    inst = next(iter(api.state().instances.values()))
    api.ok("POST", f"/v1/instances/{inst.machine_id}/return", "operator")
    wait_until(lambda: value(scrape(api), "provisioner_instances", provider="hosts", state="returned") == 1,
               what="the returned host in the gauge")
    later = scrape(api)
    assert value(later, "provisioner_requests_total", provider="hosts", action="return", outcome="complete") == 1
    assert value(later, "provisioner_instances", provider="hosts", state="running") == 1
    assert value(later, "provisioner_cost_per_hour", provider="hosts") == 0.5
    cost = "provisioner_cost_total"
    assert value(later, cost, provider="hosts") >= value(m, cost, provider="hosts")
    assert total(later, "provisioner_facts_total") > total(m, "provisioner_facts_total")
    assert value(later, "provisioner_demand_unmet", kind="hosts") == 0


def test_a_daemon_owning_nothing_reports_the_same_cluster_and_no_lease(start_api):
    a = start_api()
    a.demand_round()
    b = start_api(providers=[], instance="b", home="home-b")
    mb = scrape(b)
    assert value(mb, "provisioner_instances", provider="hosts", state="running") == 2
    assert value(mb, "provisioner_lease_owned", provider="hosts") == 0
    assert value(scrape(a), "provisioner_lease_owned", provider="hosts") == 1
    assert total(mb, "provisioner_script_duration_seconds_count") == 0, "b ran no script: live timings are its own"


def test_a_bundles_demand_is_counted_in_bundles_and_packed_into_hosts(start_api):
    api = start_api()
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [
        {"id": "j1", "kind": "bundles", "count": 6, "resources": {"ncpus": 2}, "select": {"type": "X86_64"}},
        {"id": "d2", "kind": "units", "resource": "vcs", "count": 1}]})
    # Six bundles of 2 CPUs on hosts of 8: two hosts carry them (4 + 2).
    api.wait_state(lambda s: sum(i.state == "running" for i in s.instances.values()) == 2, "2 hosts running")
    r = api.get("/metrics")
    assert r.status_code == 200, r.text
    m = scrape(api)
    assert value(m, "provisioner_demand_unmet", kind="bundles") == 6
    assert value(m, "provisioner_demand_unmet", kind="hosts") == 0
    assert value(m, "provisioner_demand_unmet", kind="units") == 1
    assert value(m, "provisioner_instances", provider="hosts", state="running") == 2
