"""``provisioner run`` as a real process: it starts, acts, and stops cleanly on SIGTERM."""

from __future__ import annotations

import pytest
import yaml

from persistence.controller import open_controller
from tests.support.daemons import HOSTS_SIM, PROCESS_TEST, RunProcess, free_port, sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PROCESS_TEST)]


def test_sigterm_stops_in_order_and_releases_leases(tmp_path):
    provider = sim_provider(tmp_path, "hosts", HOSTS_SIM)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    cfg = {
        "instance": {"id": "proc", "serves": ["hosts"], "planner": True},
        "controller": {"url": url},
        "api": {"listen": f"127.0.0.1:{free_port()}"},  # never the default port a demo may hold
        "lease": {"ttl": "3s", "renew_every": "1s"},
        "policy": {"poll_every": "0.2s", "plan_every": "0.2s"},
        "providers": [provider],
        "home": str(tmp_path / "home"),
    }
    path = tmp_path / "provisioner.yaml"
    path.write_text(yaml.safe_dump(cfg))
    daemon = RunProcess(path, tmp_path / "daemon.log")
    c = open_controller(url)
    try:
        daemon.wait(lambda: {lease.name for lease in c.leases.all()} == {"instance:proc", "planner", "provider:hosts"},
                    "the daemon to take its leases")
        daemon.wait(lambda: any(f.kind == "provider_described" for f in c.read()), "the provider described")
        code = daemon.stop()
    finally:
        daemon.kill()
    out = daemon.text()
    assert code == 0, daemon.tail()
    assert c.leases.all() == [], "leases are released on a clean stop, so a standby need not wait out the TTL"
    lines = out.splitlines()
    stopped = [i for i, line in enumerate(lines) if "given up: daemon stopping" in line]
    assert len(stopped) == 2 and "provider:hosts" in lines[stopped[0]] and "planner" in lines[stopped[1]], \
        "actors stop in reverse order of their start"
    assert "daemon proc stopped" in lines[-1]
    c.close()
