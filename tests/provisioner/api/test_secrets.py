"""A provider's secret (from its env file) never leaves the script: not in facts, logs, audit, REST or metrics.

The provider here is the simulated one behind a wrapper that, like a careless
real script, prints its API key in the error it gives on every request.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from provisioner.cli.demo import SIM_SCRIPT
from tests.support.api import DEMAND
from tests.support.daemons import HOSTS_SIM, sim_provider

pytestmark = pytest.mark.slow

SECRET = "AKIA-s3cr3t-9f8e7d6c5b4a"


def leaky_provider(tmp_path) -> dict:
    provider = sim_provider(tmp_path, "leaky", HOSTS_SIM)
    env = tmp_path / "leaky" / "provider.env"
    env.write_text(env.read_text() + f"API_KEY={SECRET}\n")
    wrapper = tmp_path / "leaky" / "provider"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = request ]; then\n'
        '  echo "request refused: key $API_KEY is not allowed here" >&2\n'
        "  exit 1\n"
        "fi\n"
        f'exec "{SIM_SCRIPT}" "$@"\n')
    wrapper.chmod(0o755)
    provider["script"]["path"] = str(wrapper)
    return provider


def test_a_leaky_script_cannot_leak(start_api, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    api = start_api(providers=[leaky_provider(tmp_path)])
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][0]]})
    p = api.wait_state(lambda s: any(r.attempts >= 2 for r in s.requests.values()), "two failed request attempts")
    req = next(iter(p.requests.values()))
    assert "request refused: key *** is not allowed here" in req.reason, \
        "the script's error reached the facts, scrubbed"

    seen: list[str] = [caplog.text]
    seen += [f.to_json().decode() for f in api.controller.read()]
    seen += [line for path in api.daemon.audit.files() for line in path.read_text().splitlines()]
    for path in ("/v1/providers", "/v1/providers/leaky", "/v1/requests", "/v1/instances", "/v1/resources",
                 "/v1/costs", "/v1/decisions", "/v1/orphans", "/v1/demand", "/v1/audit", "/v1/audit/verify",
                 "/metrics", "/openapi.json", "/readyz"):
        r = api.get(path)
        assert r.status_code == 200, (path, r.text)
        seen.append(r.text)
    for method, path in (("POST", "/v1/providers/leaky/pause"), ("POST", "/v1/instances/leaky/nothing/return"),
                         ("POST", f"/v1/orphans/{req.id}/return"), ("GET", "/v1/requests?after=" + req.id + "x")):
        r = api.call(method, path, "operator" if method == "POST" else "viewer")
        seen.append(r.text)
    metrics = api.get("/metrics").text
    failures = {s.labels["reason"]: s.value for f in text_string_to_metric_families(metrics)
                for s in f.samples if s.name == "provisioner_script_failures_total" and s.labels["provider"] == "leaky"}
    assert failures.get("failed", 0) >= 2, "the failures themselves are counted"

    leaks = [text[max(0, text.find(SECRET) - 80):text.find(SECRET) + 40] for text in seen if SECRET in text]
    assert leaks == [], leaks


def stdout_leaky_provider(tmp_path) -> dict:
    """A v2 provider that prints its key on stdout: in the request's message and in every status message."""
    provider = sim_provider(tmp_path, "chatty", HOSTS_SIM)
    env = tmp_path / "chatty" / "provider.env"
    env.write_text(env.read_text() + f"API_KEY={SECRET}\n")
    wrapper = tmp_path / "chatty" / "provider"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = request ]; then\n'
        '  echo "{\\"requestId\\": \\"r-chatty-1\\", \\"message\\": \\"accepted under key $API_KEY\\"}"\n'
        "  exit 0\n"
        "fi\n"
        'if [ "$1" = status ]; then\n'
        '  id=$(sed -n \'s/.*"requestId": *"\\([^"]*\\)".*/\\1/p\' "$3")\n'
        '  echo "{\\"requests\\": [{\\"requestId\\": \\"$id\\", \\"status\\": \\"running\\",'
        ' \\"message\\": \\"waiting for capacity, key $API_KEY\\"}]}"\n'
        "  exit 0\n"
        "fi\n"
        f'exec "{SIM_SCRIPT}" "$@"\n')
    wrapper.chmod(0o755)
    provider["script"]["path"] = str(wrapper)
    return provider


def test_a_secret_a_script_prints_on_stdout_reaches_nothing(start_api, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    api = start_api(providers=[stdout_leaky_provider(tmp_path)])
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][0]]})
    # Running: the request id it was given (kept as it is) and the status message it answered (scrubbed)
    # have been through every path.
    api.wait_state(lambda s: any(r.state == "running" for r in s.requests.values()), "the request running")
    rows = api.get("/v1/requests").text
    assert "r-chatty-1" in rows and "waiting for capacity, key ***" in rows, rows

    seen: list[str] = [f.to_json().decode() for f in api.controller.read()]
    seen += [line for path in api.daemon.audit.files() for line in path.read_text().splitlines()]
    for path in ("/v1/requests", "/v1/instances", "/v1/orphans", "/v1/providers", "/v1/audit", "/metrics"):
        r = api.get(path)
        assert r.status_code == 200, (path, r.text)
        seen.append(r.text)
    cli = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", api.cfg.controller.url,
                          "requests", "-o", "json"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PROVISIONER_HOME": str(tmp_path / "cli-home")})
    assert cli.returncode == 0, cli.stderr
    seen += [cli.stdout, cli.stderr]
    seen.append(caplog.text)
    assert "waiting for capacity, key ***" in "".join(seen), "the status message was kept, scrubbed"
    leaks = [text[max(0, text.find(SECRET) - 80):text.find(SECRET) + 40] for text in seen if SECRET in text]
    assert leaks == [], leaks


def test_a_request_id_holding_the_key_is_refused_and_the_key_reaches_nothing(start_api, tmp_path, caplog):
    """An identifier is never rewritten: one that holds a secret makes the answer bad output, naming the field."""
    caplog.set_level(logging.DEBUG)
    provider = sim_provider(tmp_path, "keyed", HOSTS_SIM)
    env = tmp_path / "keyed" / "provider.env"
    env.write_text(env.read_text() + f"API_KEY={SECRET}\n")
    wrapper = tmp_path / "keyed" / "provider"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = request ]; then\n'
        '  echo "{\\"requestId\\": \\"r-$API_KEY-1\\"}"\n'
        "  exit 0\n"
        "fi\n"
        f'exec "{SIM_SCRIPT}" "$@"\n')
    wrapper.chmod(0o755)
    provider["script"]["path"] = str(wrapper)
    api = start_api(providers=[provider])
    api.ok("PUT", "/v1/demand", "scheduler", json={"items": [DEMAND["items"][0]]})
    p = api.wait_state(lambda s: any(r.attempts >= 2 for r in s.requests.values()), "two refused answers")
    req = next(iter(p.requests.values()))
    assert "bad output: requestId: holds the value of API_KEY" in req.reason, req.reason
    assert not req.provider_request_id, "no rewritten id was ever kept"

    seen: list[str] = [f.to_json().decode() for f in api.controller.read()]
    for path in ("/v1/requests", "/v1/providers", "/metrics"):
        seen.append(api.get(path).text)
    seen.append(caplog.text)
    leaks = [text[max(0, text.find(SECRET) - 80):text.find(SECRET) + 40] for text in seen if SECRET in text]
    assert leaks == [], leaks
