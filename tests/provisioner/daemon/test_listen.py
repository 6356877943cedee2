"""``provisioner run --listen``, and a port someone else holds (issue 28 item 9, issue 34 item 2).

A second daemon or demo on a taken port must stop at once with one line that
names the address and says how to choose another; ``--listen HOST:0`` picks a
free port, which the log names, and the CLI still finds the daemon by its home.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.daemons import HOSTS_SIM, PROCESS_TEST, STARTUP, RunProcess, sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PROCESS_TEST)]


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port another process listens on, as a demo holds 8787."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def config(tmp: Path, port: int) -> Path:
    path = tmp / "provisioner.yaml"
    path.write_text(yaml.safe_dump({
        "instance": {"id": "a", "serves": ["hosts"], "planner": True},
        "controller": {"url": f"sqlite:///{tmp / 'state.db'}"},
        "api": {"listen": f"127.0.0.1:{port}"},
        "lease": {"ttl": "3s", "renew_every": "1s"},
        "providers": [sim_provider(tmp, "hosts", HOSTS_SIM)],
        "home": str(tmp / "home"),
    }))
    return path


def cli(*args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")}
    if home is not None:
        env["PROVISIONER_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=STARTUP, env=env)


def in_use(setting: str, port: int) -> str:
    return (f"provisioner: {setting} 127.0.0.1:{port}: the address is in use (another daemon, or a demo, serves "
            "there): choose another with `provisioner run --listen 127.0.0.1:PORT`, or `--listen 127.0.0.1:0` "
            "for any free port (the log says which)")


def test_a_taken_port_stops_the_daemon_at_once_saying_how_to_choose_another(tmp_path, taken):
    path = config(tmp_path, taken)
    r = cli("--config", str(path), "run")
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [in_use("api.listen", taken)], "one line, and nothing of a daemon that never ran"
    r = cli("--config", str(path), "run", "--listen", f"127.0.0.1:{taken}")
    assert (r.returncode, r.stderr.splitlines()) == (1, [in_use("--listen", taken)])
    r = cli("--config", str(path), "run", "--listen", str(taken))
    assert (r.returncode, r.stderr.splitlines()) == (
        1, [f"provisioner: --listen: expected HOST:PORT (e.g. 127.0.0.1:8787), got '{taken}'"])


def test_a_second_demo_on_a_taken_port_says_how_to_choose_another(tmp_path, taken):
    r = cli("run", "--listen", f"127.0.0.1:{taken}", home=tmp_path / "demo")
    assert r.returncode == 1 and r.stderr.splitlines()[-1] == in_use("--listen", taken), r.stderr
    assert "daemon demo stop" not in r.stderr, "a daemon that never ran does not say it stops"


def test_listen_port_0_serves_on_a_free_port_that_the_log_names(tmp_path, taken):
    """``--listen`` wins over api.listen (here a taken port); the CLI finds the daemon by its config, or
    through the address the log names."""
    path = config(tmp_path, taken)
    daemon = RunProcess(path, tmp_path / "daemon.log", "--listen", "127.0.0.1:0",
                        env={k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")})
    try:
        url = daemon.wait(lambda: (m := re.search(r"api: serving (http://127\.0\.0\.1:\d+)", daemon.text()))
                          and m.group(1), "the daemon to say where it serves")
        assert url != f"http://127.0.0.1:{taken}"
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        daemon.wait(lambda: "hosts" in cli("--config", str(path), "providers").stdout, "the provider in the view")
        remote = cli("--url", url, "providers", "-o", "json")
        assert remote.returncode == 0 and '"name": "hosts"' in remote.stdout, remote.stderr
        assert daemon.stop() == 0, daemon.tail()
    finally:
        daemon.kill()
