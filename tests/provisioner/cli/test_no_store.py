"""A view never invents the store it reads, and run never starts an empty one where a daemon has been
(issue 20, item 5)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.audit.log import AuditLog
from tests.support.facts import decisions as facts


def cli(*args: str, home: Path, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")}
    env.update(HOME=str(home), PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def everything(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


@pytest.mark.parametrize("args", [("instances",), ("providers", "-o", "json"), ("decisions",), ("demand", "show"),
                                  ("audit",), ("audit", "verify")])
def test_a_view_with_no_config_and_no_store_says_so_exits_1_and_creates_nothing(tmp_path, args):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    r = cli(*args, home=home, cwd=cwd)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("provisioner: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--config" in r.stderr and r.stdout == ""
    assert everything(tmp_path) == [cwd, home], "nothing created: no state.db, no folders"


def test_a_view_of_a_sqlite_file_that_is_not_there_creates_none(tmp_path):
    missing = tmp_path / "typo" / "state.db"
    r = cli("--controller", f"sqlite:///{missing}", "instances", home=tmp_path, cwd=tmp_path)
    assert r.returncode == 1 and f"no such database file {missing}" in r.stderr
    assert not missing.parent.exists()


def test_run_refuses_a_missing_sqlite_file_in_a_home_a_daemon_has_used(tmp_path):
    home = tmp_path / "home"
    AuditLog(home / "audit.log").record(facts(1))  # the home a daemon wrote its audit log to
    missing = tmp_path / "var" / "stat.db"  # meant: state.db
    cfg = tmp_path / "provisioner.yaml"
    cfg.write_text(f"instance: {{id: a}}\ncontroller: {{url: 'sqlite:///{missing}'}}\nhome: {home}\n"
                   f"api: {{listen: '127.0.0.1:{free_port()}'}}\n")
    before = everything(tmp_path)
    try:
        r = cli("--config", str(cfg), "run", home=tmp_path, cwd=tmp_path, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("run started a daemon on a store that was not there")
    assert r.returncode == 1, r.stderr
    assert f"controller.url: {missing} does not exist, but {home} has been used by a daemon before" in r.stderr
    assert everything(tmp_path) == before, "nothing created"
