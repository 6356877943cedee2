"""Drill: a real Prometheus server scrapes the daemon on loopback; its query API returns the expected values.

Bounded: a 1 s scrape interval, a private TSDB in the test's folder, and
every wait capped. Needs the ``prometheus`` binary (Debian package
``prometheus``, installed by ``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import httpx
import pytest
import yaml

from tests.support.api import write_token_file
from tests.support.daemons import end_process, wait_until

pytestmark = pytest.mark.slow

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path):
    if PROMETHEUS is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; .ci/run installs the Debian package")
        pytest.skip("prometheus is not installed here (apt-get install prometheus)")
    procs: list[subprocess.Popen] = []

    def start(target: str, token_file: str) -> str:
        port = free_port()
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "provisioner", "static_configs": [{"targets": [target]}],
                                "authorization": {"type": "Bearer", "credentials_file": token_file}}],
        }))
        log = open(tmp_path / "prometheus.log", "w")
        procs.append(subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT))
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _ready(url, procs[-1]), 30, "prometheus to be ready")
        return url

    yield start
    for proc in procs:
        end_process(proc)


def _ready(url: str, proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"prometheus exited with {proc.returncode}")
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def query(url: str, promql: str) -> dict[tuple, float]:
    """The instant vector for ``promql``: labels (without job and instance) -> value."""
    r = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=5)
    r.raise_for_status()
    doc = r.json()
    assert doc["status"] == "success", doc
    return {tuple(sorted((k, v) for k, v in s["metric"].items() if k not in ("job", "instance", "__name__"))):
            float(s["value"][1]) for s in doc["data"]["result"]}


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
