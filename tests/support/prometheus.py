"""A real Prometheus server on loopback, scraping a daemon: the ``prometheus`` fixture and its query helper.

Bounded: a 1 s scrape and evaluation interval, a private TSDB in the test's
folder, and every wait capped. Needs the ``prometheus`` binary (Debian
package ``prometheus``, installed by ``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any, Sequence

import httpx
import pytest
import yaml

from tests.support.daemons import end_process, wait_until

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path):
    """``prometheus(target, token_file, rule_files=())``: a server scraping ``target``; answers its URL."""
    if PROMETHEUS is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed; .ci/run installs the Debian package")
        pytest.skip("prometheus is not installed here (apt-get install prometheus)")
    procs: list[subprocess.Popen] = []

    def start(target: str, token_file: str, rule_files: Sequence[Path] = ()) -> str:
        port = free_port()
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": [str(f) for f in rule_files],
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


def api(url: str, path: str, **params: Any) -> Any:
    """The ``data`` of a successful answer of Prometheus's HTTP API."""
    r = httpx.get(f"{url}{path}", params=params, timeout=5)
    r.raise_for_status()
    doc = r.json()
    assert doc["status"] == "success", doc
    return doc["data"]


def query(url: str, promql: str) -> dict[tuple, float]:
    """The instant vector for ``promql``: labels (without job and instance) -> value."""
    return {tuple(sorted((k, v) for k, v in s["metric"].items() if k not in ("job", "instance", "__name__"))):
            float(s["value"][1]) for s in api(url, "/api/v1/query", query=promql)["result"]}
