"""The built-in demo: SQLite state, simulated host and license providers, a workload.

``provisioner run`` falls back to this when no config is given, so a newcomer
sees the whole loop (demand, requests, hosts joining, idle hosts returned)
within a minute. State lives under ``$PROVISIONER_HOME`` (default
``~/.local/state/provisioner``); a restart resumes from it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import sim
from config.models import Config
from messages.facts import ProviderAdmin, make_fact
from persistence.port import Controller
from persistence.private import private_dir
from persistence.replay import replay

SIM_SCRIPT = Path(sim.__file__).resolve().parent / "scripts" / "sim-provider"


def default_home() -> Path:
    env = os.environ.get("PROVISIONER_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "provisioner"


def _sim_provider(home: Path, name: str, sim_config: dict) -> dict:
    folder = private_dir(home / "demo" / name)
    (folder / "sim.json").write_text(json.dumps(sim_config, indent=2))
    env_file = folder / "provider.env"
    env_file.write_text(f"SIM_CONFIG={folder / 'sim.json'}\nSIM_STATE_DIR={folder / 'state'}\n")
    env_file.chmod(0o600)
    return {"name": name, "kind": sim_config["kind"], "env_file": str(env_file),
            "script": {"style": "v2", "path": str(SIM_SCRIPT), "timeout": "30s"}}


def demo_config(home: Path, *, idle_time: str = "20s", lead_time: float = 3.0, unlisted_grace: str = "10s") -> Config:
    """Write the simulated providers' files under ``home`` and return the demo's config.

    ``unlisted_grace`` is short: the demo's scheduler sends its view of the hosts in the same step
    that joins them, so a host its view leaves out (one the last run joined, after a restart) serves
    no one and goes back soon.
    """
    hosts = _sim_provider(home, "sim-hosts", {
        "kind": "hosts", "seed": 7, "name_prefix": "simhost", "priority": 10, "cost_per_hour": 0.2,
        "lead_time": lead_time, "region": "sim-1", "zone": "sim-1a",
        "templates": [
            {"id": "sim-small", "max_number": 20, "attributes": {"type": "X86_64", "ncpus": 4, "mem": 8192},
             "cost_per_hour": 0.1},
            {"id": "sim-large", "max_number": 10, "attributes": {"type": "X86_64", "ncpus": 16, "mem": 65536},
             "cost_per_hour": 0.4},
        ],
    })
    licenses = _sim_provider(home, "sim-licenses", {
        "kind": "units", "seed": 7, "priority": 10, "cost_per_hour": 1.0, "lead_time": 1.0,
        "pools": [{"resource": "vcs", "capacity": 20, "cost_per_unit_hour": 1.5}],
    })
    return Config.model_validate({
        "instance": {"id": "demo", "serves": ["sim-hosts", "sim-licenses"], "planner": True},
        "controller": {"url": f"sqlite:///{(home / 'state.db').resolve()}"},
        "lease": {"ttl": "6s", "renew_every": "2s"},
        "budget": {"max_hosts": 25, "max_cost_per_hour": 20.0},
        "policy": {"idle_time": idle_time, "poll_every": "1s", "plan_every": "2s", "cooldown": "30s",
                   "join_grace": "20s", "request_timeout": "5m",
                   "unlisted_grace": unlisted_grace},
        "providers": [hosts, licenses],
        "resources": [{"name": "vcs", "elastic": True, "base": 10, "provider": "sim-licenses"}],
        "home": str(home),
    })


def revive_moved(controller: Controller, cfg: Config) -> list[str]:
    """Resume the demo's providers that a run from another checkout disabled because their script was not
    found where that checkout had it: the demo's state outlives a checkout (it is the user's), and its
    providers' script is the running checkout's. Written as an operator's ``provider resume``, with why; a
    provider disabled for another cause stays disabled. The names resumed."""
    p = replay(controller)
    revived = []
    for pc in cfg.providers:
        rec = p.providers.get(pc.name)
        script = str(pc.script.path)
        if rec is None or rec.status != "disabled" or "script not found: " not in rec.status_reason \
                or rec.status_reason.endswith(f"script not found: {script}"):
            continue
        controller.append([make_fact(ProviderAdmin(kind="provider_resumed", reason=(
            f"the demo's script is {script} in this checkout ({rec.status_reason})")), provider=pc.name)])
        revived.append(pc.name)
    return revived


def sim_admin(home: Path, provider: str, *args: str) -> None:
    """Act on a demo sim provider as its cloud or license server would (e.g. ``set-in-use vcs 4``)."""
    folder = home / "demo" / provider
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SIM_CONFIG": str(folder / "sim.json"),
           "SIM_STATE_DIR": str(folder / "state")}
    subprocess.run([str(SIM_SCRIPT), "admin", *args], env=env, check=True, capture_output=True, timeout=30)
