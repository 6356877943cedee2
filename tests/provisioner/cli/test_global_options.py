"""Global options after the command too, ``run --config``, and log levels that are not one
(issue 20, items 6 and 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.audit.log import AuditLog
from tests.support.facts import decisions as facts

pytestmark = pytest.mark.slow  # real processes: the command line run as an operator runs it


def cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")}
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**base, **(env or {})})


def test_run_help_lists_its_options():
    r = cli("run", "--help")
    assert r.returncode == 0
    for option in ("--config", "--controller", "--log-level", "--log-format", "--listen"):
        assert option in r.stdout


def test_run_takes_config_after_the_command(tmp_path: Path):
    """A config run cannot start on (a missing store in a used home): reading it proves --config was taken."""
    home = tmp_path / "home"
    AuditLog(home / "audit.log").record(facts(1))
    cfg = tmp_path / "x.yaml"
    cfg.write_text(f"instance: {{id: a}}\ncontroller: {{url: 'sqlite:///{tmp_path}/nope.db'}}\nhome: {home}\n")
    try:
        r = cli("run", "--config", str(cfg), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("run did not read the config given after it")
    assert r.returncode == 1 and "unrecognized arguments" not in r.stderr, r.stderr
    assert "nope.db does not exist" in r.stderr


def test_global_options_work_after_the_command_and_in_nested_commands(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    doc = tmp_path / "demand.json"
    doc.write_text(json.dumps({"items": [{"id": "d", "kind": "units", "resource": "vcs", "count": 1}]}))
    env = {"PROVISIONER_HOME": str(tmp_path / "home")}
    r = cli("demand", "put", str(doc), "--controller", url, env=env)
    assert r.returncode == 0 and "demand 1 stored" in r.stdout, r.stderr
    after = cli("demand", "show", "-o", "json", "--controller", url, "--log-level", "warning", env=env)
    before = cli("--controller", url, "demand", "show", "-o", "json", env=env)
    assert after.returncode == 0 and json.loads(after.stdout) == json.loads(before.stdout)
    r = cli("provider", "pause", "nobody", "--controller", url, env=env)
    assert r.returncode == 1 and "no provider named 'nobody'" in r.stderr
    r = cli("--controller", "sqlite:///elsewhere.db", "demand", "show", "--controller", url, env=env)
    assert r.returncode == 0, "the one after the command wins"


@pytest.mark.parametrize("args,env,said", [
    (("--log-level", "LOUD", "schema", "demand"), {}, "--log-level=LOUD: not a log level; use one of debug, "
                                                        "info, warning, error, critical"),
    (("schema", "demand", "--log-level", "LOUD"), {}, "--log-level=LOUD: not a log level"),
    (("schema", "demand"), {"PROVISIONER_LOG": "verbose"}, "PROVISIONER_LOG=verbose: not a log level"),
])
def test_a_bad_log_level_is_one_clear_line(args, env, said):
    r = cli(*args, env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"provisioner: {said}") and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_log_levels_are_taken_in_any_case():
    assert cli("--log-level", "debug", "schema", "demand").returncode == 0
    assert cli("schema", "demand", env={"PROVISIONER_LOG": "Warning"}).returncode == 0
