"""Bulk returns and drains over REST and from the CLI: the same filters, a dry run, a question before acting."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from messages.facts import InstanceChanged, InstanceSeen, RequestPlanned, make_fact
from persistence.controller import open_controller
from tests.support.inprocess import NOW

HOUR = 3600.0
HOSTS = (("aws", "i-1", "gpu-1", NOW - 5 * HOUR, "idle"), ("aws", "i-2", "gpu-2", NOW - 1 * HOUR, "busy"),
         ("gcp", "g-1", "cpu-1", NOW - 7 * HOUR, "idle"))


def seed(controller) -> None:
    facts = []
    for provider, machine, name, launched, state in HOSTS:
        facts += [make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1),
                            provider=provider, fact_id=f"r-{machine}", now=launched),
                  make_fact(InstanceSeen(machine_id=machine, name=name, request_id=f"r-{machine}", state="running",
                                         launched_at=launched), provider=provider, now=launched),
                  make_fact(InstanceChanged(kind="instance_joined", machine_id=machine, state="joined"),
                            provider=provider, now=launched),
                  make_fact(InstanceChanged(kind=f"instance_{state}", machine_id=machine, state=state),
                            provider=provider, now=launched)]
    controller.append(facts)


def test_rest_dry_run_writes_nothing_and_return_orders_per_provider(inprocess):
    run = inprocess()
    seed(run.controller)
    r = run.call("POST", "/v1/instances/return", json={"name": "gpu-*", "dry_run": True})
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["matched"], body["dry_run"], body["facts"]) == (2, True, [])
    assert [h["id"] for h in body["hosts"]] == ["aws/i-1", "aws/i-2"] and run.written == []
    assert body["message"] == "would return 2 hosts (aws: 2)"
    r = run.call("POST", "/v1/instances/return", json={"provider": "aws", "older_than": "2h", "reason": "bad image"})
    assert r.status_code == 202 and r.json()["matched"] == 1
    [order] = run.written
    assert (order.provider, order.payload.machines, order.payload.when_idle, order.lease) == ("aws", ["i-1"], False, "")
    assert order.payload.reason == "operator: bad image (by ops)"


def test_rest_drain_is_one_waiting_order_per_host(inprocess):
    run = inprocess()
    seed(run.controller)
    r = run.call("POST", "/v1/instances/drain", json={"all": True})
    assert r.status_code == 202 and r.json()["matched"] == 3
    assert sorted((f.provider, f.payload.machines[0], f.payload.when_idle) for f in run.written) == [
        ("aws", "i-1", True), ("aws", "i-2", True), ("gcp", "g-1", True)]


def test_rest_refuses_no_filter_a_bad_state_and_a_viewer(inprocess):
    run = inprocess()
    seed(run.controller)
    r = run.call("POST", "/v1/instances/return", json={})
    assert r.status_code == 422 and "--all to mean every host" in r.json()["error"]
    r = run.call("POST", "/v1/instances/drain", json={"state": "returned"})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "body.state"
    assert run.call("POST", "/v1/instances/return", role="viewer", json={"all": True}).status_code == 403
    assert run.written == []


def cli(url, *args, stdin: str = "", home) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, "instances", *args],
                          input=stdin, capture_output=True, text=True, timeout=60,
                          env={"PROVISIONER_HOME": str(home)})


def orders_of(url) -> list:
    c = open_controller(url)
    try:
        return [f for f in c.read() if f.kind == "order"]
    finally:
        c.close()


@pytest.mark.slow  # real processes
def test_cli_asks_before_acting_and_yes_acts_without_asking(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    c = open_controller(url)
    seed(c)
    c.close()
    r = cli(url, "drain", "--provider", "aws", stdin="n\n", home=tmp_path / "h")
    assert r.returncode == 1 and "would drain 2 hosts (aws: 2)" in r.stdout and "drain these 2 hosts? [y/N]" in r.stdout
    assert "nothing done" in r.stdout and orders_of(url) == []
    r = cli(url, "drain", "--provider", "aws", stdin="y\n", home=tmp_path / "h")
    assert r.returncode == 0 and "drain of 2 hosts ordered (aws: 2)" in r.stdout, r.stderr
    assert len(orders_of(url)) == 2
    r = cli(url, "return", "--name", "cpu-*", "--yes", "-o", "json", home=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["matched"] == 1 and "?" not in r.stdout
    listed = cli(url, "return", "--all", "--dry-run", home=tmp_path / "h")
    assert listed.returncode == 0 and "aws/i-1" in listed.stdout and "would return" in listed.stdout
    r = cli(url, "return", home=tmp_path / "h")
    assert r.returncode == 1 and "no filter given" in r.stderr
    r = cli(url, "return", "--older-than", "soon", "--yes", home=tmp_path / "h")
    assert r.returncode == 1 and "--older-than: not a duration: 'soon'" in r.stderr


def test_the_cli_over_rest_sends_the_body_the_api_takes(monkeypatch):
    from provisioner.cli.client import Remote
    from provisioner.surface.bulk import BulkBody, BulkFilter

    sent = []
    remote = Remote("http://127.0.0.1:9")
    monkeypatch.setattr(remote, "_call", lambda method, path, body=None, **q: sent.append((method, path, body)))
    remote.bulk("drain", BulkFilter(provider="aws", older_than="2h", name="gpu-*"), "maintenance", dry_run=True)
    [(method, path, body)] = sent
    assert (method, path) == ("POST", "/v1/instances/drain")
    parsed = BulkBody.model_validate(body)
    assert (parsed.provider, parsed.older_than, parsed.name, parsed.dry_run, parsed.reason) == (
        "aws", 7200.0, "gpu-*", True, "maintenance")
