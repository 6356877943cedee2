"""``provisioner run`` reloads its config on SIGHUP, ``provisioner reload`` and ``POST /v1/reload``; a file with
problems keeps the running config."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import yaml

from persistence.controller import open_controller
from tests.support.api import write_token_file, write_tokens
from tests.support.daemons import HOSTS_SIM, PROCESS_TEST, UNITS_SIM, RunProcess, free_port, make_config, sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PROCESS_TEST)]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")}
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_sighup_reload_command_and_rest_reload_a_running_daemon(tmp_path):
    hosts = sim_provider(tmp_path, "hosts", HOSTS_SIM)
    units = sim_provider(tmp_path, "units", UNITS_SIM)
    port = free_port()
    cfg = make_config(tmp_path, [hosts], api={"listen": f"127.0.0.1:{port}",
                                              "tokens": str(write_tokens(tmp_path / "tokens.yaml"))})
    doc = cfg.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    path = tmp_path / "provisioner.yaml"
    path.write_text(yaml.safe_dump(doc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONER_")}
    daemon = RunProcess(path, tmp_path / "daemon.log", env=env)
    proc = daemon.proc
    c = open_controller(cfg.controller.url)

    def holder(name: str) -> str | None:
        return next((lease.holder for lease in c.leases.all() if lease.name == name), None)

    def logged(text: str) -> bool:
        return text in (tmp_path / "daemon.log").read_text()

    try:
        daemon.wait(lambda: holder("provider:hosts") == "a", "the daemon serving hosts")
        doc["instance"]["serves"] = ["hosts", "units"]
        doc["providers"] = [hosts, units]
        path.write_text(yaml.safe_dump(doc))
        r = cli("reload", "--config", str(path))
        assert r.returncode == 0 and f"asked the daemon (pid {proc.pid}) to reload it" in r.stdout, r.stderr
        daemon.wait(lambda: holder("provider:units") == "a", "the added provider taken up")
        daemon.wait(lambda: logged("reload: ") and logged("provider units: now served here"), "the log")

        good = path.read_text()
        path.write_text(good.replace("plan_every: 0.1", "plan_every: soon"))
        r = cli("reload", "--config", str(path))
        assert r.returncode == 2 and "policy.plan_every: not a duration" in r.stderr
        assert "the daemon was not asked to reload" in r.stderr
        os.kill(proc.pid, signal.SIGHUP)  # asked anyway: it says why and keeps what it runs
        daemon.wait(lambda: logged("config not reloaded, the running one stays"), "the refusal in the log")
        assert proc.poll() is None and holder("provider:units") == "a"

        doc["instance"]["serves"] = ["hosts"]
        doc["providers"] = [hosts]
        path.write_text(yaml.safe_dump(doc))
        token = write_token_file(tmp_path / "ops.token", "operator")
        r = cli("--url", f"http://127.0.0.1:{port}", "--token-file", str(token), "reload")
        assert r.returncode == 0, r.stderr
        assert "provider units: removed; its owner stops and its lease is released" in r.stdout
        daemon.wait(lambda: holder("provider:units") is None, "the removed provider's lease released")
        assert holder("provider:hosts") == "a"
    finally:
        daemon.end()
        c.close()
    text = (tmp_path / "daemon.log").read_text()
    assert " WARNING " not in text.split("received SIGTERM")[-1], "a clean stop logs no WARNING"
