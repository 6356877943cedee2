"""Drive the simulated provider scripts as the daemon does: real processes, minimal environment."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SIM = Path(__file__).resolve().parents[2] / "sim"
SCRIPT = SIM / "scripts" / "sim-provider"
LSF = SIM / "lsf"
DATA = Path(__file__).resolve().parents[1] / "sim" / "scripts" / "data"
T0 = 1_700_000_000.0


def scripts_module(name: str) -> ModuleType:
    """A module of the simulator's scripts, imported as they import each other (by bare name)."""
    folder = str(SIM / "scripts")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def minimal_env(home: Path, **extra: str) -> dict[str, str]:
    """Only what the daemon passes to provider scripts; python3 is the system one when there is one."""
    return {
        "PATH": f"/usr/bin:/bin:{Path(sys.executable).parent}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        **extra,
    }


def hosts_config(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "kind": "hosts",
        "seed": 1,
        "name_prefix": "sim",
        "priority": 10,
        "cost_per_hour": 0.1,
        "region": "sim-region",
        "zone": "sim-a",
        "templates": [
            {"id": "sim-small", "max_number": 50, "attributes": {"type": "X86_64", "ncpus": 4, "mem": 8192}},
            {"id": "sim-large", "max_number": 5, "attributes": {"type": "X86_64", "ncpus": 32, "mem": 131072},
             "cost_per_hour": 0.9, "priority": 20},
        ],
    }
    cfg.update(overrides)
    return cfg


def units_config(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "kind": "units",
        "seed": 1,
        "name_prefix": "lic",
        "cost_per_hour": 1.0,
        "pools": [{"resource": "vcs", "capacity": 10, "cost_per_unit_hour": 2.5},
                  {"resource": "xcelium", "capacity": 4}],
    }
    cfg.update(overrides)
    return cfg


class Sim:
    """One simulated provider: its config file, state folder and clock file under ``root``."""

    def __init__(self, root: Path, config: Any, now: float = T0) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.config_path = root / "sim.json"
        self.state_dir = root / "state"
        self.now_file = root / "now"
        self._inputs = 0
        self.write_config(config)
        self.set_now(now)

    def write_config(self, config: Any) -> None:
        text = config if isinstance(config, str) else json.dumps(config)
        self.config_path.write_text(text)

    def set_now(self, t: float) -> None:
        self.now = t
        self.now_file.write_text(repr(t))

    def env(self, **extra: str) -> dict[str, str]:
        return minimal_env(
            self.root, SIM_CONFIG=str(self.config_path), SIM_STATE_DIR=str(self.state_dir),
            SIM_NOW_FILE=str(self.now_file), **extra,
        )

    def input_file(self, doc: Any) -> Path:
        self._inputs += 1
        path = self.root / f"input-{self._inputs}.json"
        path.write_text(json.dumps(doc))
        return path

    def argv(self, action: str, doc: Any = None) -> list[str]:
        return [str(SCRIPT), action, "-f", str(self.input_file({} if doc is None else doc))]

    def run(self, action: str, doc: Any = None, env: dict[str, str] | None = None,
            timeout: float = 10) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(action, doc), env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout)

    def call(self, action: str, doc: Any = None) -> Any:
        r = self.run(action, doc)
        assert r.returncode == 0, f"{action} exited {r.returncode}: {r.stderr}"
        return json.loads(r.stdout)

    def admin(self, *args: str) -> Any:
        r = subprocess.run([str(SCRIPT), "admin", *args], env=self.env(), capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, f"admin {args} exited {r.returncode}: {r.stderr}"
        return json.loads(r.stdout)

    def dump(self) -> Any:
        return self.admin("dump")

    def request(self, token: str, template: str = "sim-small", count: int = 1, **extra: Any) -> str:
        return self.call("request", {"token": token, "template": template, "count": count, **extra})["requestId"]

    def status(self, *request_ids: str) -> list[dict[str, Any]]:
        return self.call("status", {"requests": [{"requestId": r} for r in request_ids]})["requests"]


def live_machines(dump: Any) -> list[dict[str, Any]]:
    return [m for m in dump["machines"].values() if m["state"] in ("pending", "running")]


def assert_shape(ours: Any, ref: Any, where: str = "$", optional: frozenset[str] = frozenset(),
                 free: frozenset[str] = frozenset({"attributes"})) -> None:
    """``ours`` has the reference document's keys (bar ``optional``) and no others, with values of the same kind.

    Keys in ``free`` are maps of free-form names: each of our values must look
    like the reference's first value. A null in the reference allows anything.
    """
    if ref is None:
        return
    if isinstance(ref, dict):
        assert isinstance(ours, dict), f"{where}: expected an object, got {ours!r}"
        if where.rsplit(".", 1)[-1] in free:
            sample = next(iter(ref.values()))
            for key, value in ours.items():
                assert_shape(value, sample, f"{where}.{key}", optional, free)
            return
        missing = set(ref) - set(ours) - optional
        extra = set(ours) - set(ref)
        assert not missing, f"{where}: missing {sorted(missing)}"
        assert not extra, f"{where}: keys the contract does not have: {sorted(extra)}"
        for key, value in ours.items():
            assert_shape(value, ref[key], f"{where}.{key}", optional, free)
    elif isinstance(ref, list):
        assert isinstance(ours, list), f"{where}: expected a list, got {ours!r}"
        for i, item in enumerate(ours):
            assert_shape(item, ref[0] if isinstance(ref[0], (dict, list)) else ref[min(i, len(ref) - 1)],
                         f"{where}[{i}]", optional, free)
    elif isinstance(ref, bool) or isinstance(ours, bool):
        assert type(ours) is type(ref), f"{where}: expected {type(ref).__name__}, got {ours!r}"
    elif isinstance(ref, (int, float)):
        assert isinstance(ours, (int, float)), f"{where}: expected a number, got {ours!r}"
    else:
        assert isinstance(ours, type(ref)), f"{where}: expected {type(ref).__name__}, got {ours!r}"


def contract_example(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def run_lsf(action: str, doc: Any, env: dict[str, str], inputs: Path) -> subprocess.CompletedProcess[str]:
    path = inputs / f"{action}-{len(list(inputs.glob(action + '-*')))}.json"
    path.write_text(json.dumps(doc))
    return subprocess.run([str(LSF / f"{action}.sh"), "-f", str(path)], env=env, capture_output=True,
                          text=True, timeout=10)

