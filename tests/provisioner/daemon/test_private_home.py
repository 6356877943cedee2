"""The daemon's home, and what it writes there, are created for its owner only (0700 folders, 0600 files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest
import yaml

from provisioner.cli.demo import demo_config
from tests.support.daemons import HOSTS_SIM, PROCESS_TEST, RunProcess, free_port, sim_provider


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_demo_makes_its_home_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        demo_config(tmp_path / "state" / "provisioner")
    finally:
        os.umask(old)
    assert mode(tmp_path / "state") == 0o700 and mode(tmp_path / "state" / "provisioner") == 0o700


@pytest.mark.slow
@pytest.mark.timeout(PROCESS_TEST)
def test_provisioner_run_creates_its_home_and_state_private(tmp_path: Path) -> None:
    port = free_port()
    cfg = {
        "instance": {"id": "a", "serves": ["hosts"], "planner": True},
        "controller": {"url": f"sqlite:///{tmp_path / 'db' / 'state.db'}"},
        "api": {"listen": f"127.0.0.1:{port}"},
        "lease": {"ttl": "3s", "renew_every": "1s"},
        "providers": [sim_provider(tmp_path, "hosts", HOSTS_SIM)],
        "home": str(tmp_path / "home" / "provisioner"),
    }
    path = tmp_path / "provisioner.yaml"
    path.write_text(yaml.safe_dump(cfg))
    daemon = RunProcess(path, tmp_path / "daemon.log", start_new_session=True, preexec_fn=lambda: os.umask(0o022))

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        daemon.wait(ready, "the daemon to be ready")
        daemon.wait(lambda: (tmp_path / "home" / "provisioner" / "audit.log").exists(), "the audit log")
        daemon.stop()
    finally:
        daemon.kill()
    home = tmp_path / "home" / "provisioner"
    for folder in (tmp_path / "home", home, tmp_path / "db", home / "snapshots"):
        assert mode(folder) == 0o700, f"{folder}: {oct(mode(folder))}"
    for f in (tmp_path / "db" / "state.db", home / "audit.log", *(home / "snapshots").iterdir()):
        assert mode(f) == 0o600, f"{f}: {oct(mode(f))}"
