"""Drill: a real Prometheus server scrapes the daemon on loopback; its query API returns the expected values.

The server comes from the ``prometheus`` fixture (``tests/support/prometheus.py``).
"""

from __future__ import annotations

import time

import pytest

from tests.support.api import write_token_file
from tests.support.prometheus import query

pytestmark = pytest.mark.slow


def test_prometheus_scrapes_the_daemon_and_answers_queries(start_api, prometheus, tmp_path):
    api = start_api(policy={"join_grace": "10m"})
    api.demand_round()
    target = api.url.removeprefix("http://")
    prom = prometheus(target, str(write_token_file(tmp_path / "scrape.token", "viewer")))

    expected = {
        'provisioner_instances{provider="hosts",state="running"}': 2,
        'provisioner_units{resource="vcs",kind="total"}': 4,
        'provisioner_units{resource="vcs",kind="borrowed"}': 2,
        'provisioner_requests_total{provider="hosts",action="request",outcome="complete"}': 1,
        'provisioner_cost_per_hour{provider="hosts"}': 1.0,
        'provisioner_cost_per_hour{provider="units"}': 4.0,
        'provisioner_lease_owned{provider="hosts"}': 1,
        'provisioner_demand_unmet{kind="hosts"}': 2,
        'provisioner_demand_unmet{kind="units"}': 2,
        'provisioner_budget_remaining{limit="max_hosts"}': 18,
        'up{job="provisioner"}': 1,
    }

    def answered() -> bool:
        return all(list(query(prom, q).values()) == [v] for q, v in expected.items())

    deadline = time.monotonic() + 30
    while not answered():
        assert time.monotonic() < deadline, {q: query(prom, q) for q in expected}
        time.sleep(0.5)

    def one(promql: str) -> float:
        (v,) = query(prom, promql).values()
        return v

    assert one('provisioner_cost_total{provider="hosts"}') > 0
    assert one("sum(provisioner_facts_total)") >= 10
    assert one('provisioner_script_duration_seconds_count{provider="hosts",action="request"}') == 1
    assert one("provisioner_journal_commit_seconds_count") >= 1
    assert one("sum(provisioner_script_failures_total) or vector(0)") == 0
    # The dashboard's split by capacity type: the hosts' templates say none, so they are on-demand.
    assert one('provisioner_instances_by_capacity_type{provider="hosts",capacity_type="on-demand",'
               'state="running"}') == 2
    assert one('sum by (capacity_type) (max by (provider, capacity_type) '
               '(provisioner_cost_per_hour_by_capacity_type))') == 1.0
    assert one('max by (provider, capacity_type) (provisioner_cost_by_capacity_type_total{provider="hosts"})') \
        == pytest.approx(one('provisioner_cost_total{provider="hosts"}'), rel=0.05)
