"""A real daemon serving its REST API on 127.0.0.1 (an ephemeral port), spoken to over real HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from config.models import Config
from persistence.controller import open_controller
from persistence.replay import replay
from provisioner.daemon.root import Daemon
from state.projection import Projection
from tests.support.daemons import HOSTS_SIM, UNITS_SIM, make_config, sim_provider, wait_state

#: role -> (token name, token value); values are long random-looking strings a test can search for.
TOKENS = {
    "viewer": ("watcher", "viewer-7f3c2a91d84e4b6f"),
    "operator": ("ops", "operator-2b9e64c1a0f35d7e"),
    "scheduler": ("sched", "scheduler-c41d8e2f7a6b9035"),
}
DEMAND = {"items": [{"id": "d1", "kind": "hosts", "count": 2, "select": {"ncpus": ">=8"}},
                    {"id": "d2", "kind": "units", "resource": "vcs", "count": 2}]}


def write_tokens(path: Path, mode: int = 0o600) -> Path:
    path.write_text(yaml.safe_dump({"tokens": [{"name": n, "role": r, "token": t} for r, (n, t) in TOKENS.items()]}))
    path.chmod(mode)
    return path


def write_token_file(path: Path, role: str) -> Path:
    path.write_text(TOKENS[role][1] + "\n")
    path.chmod(0o600)
    return path


class Api:
    """One daemon with its API, and an HTTP client that can speak as any role (or none)."""

    def __init__(self, cfg: Config, home: Path) -> None:
        self.cfg = cfg
        self.daemon = Daemon(cfg, home, tick=0.05, serve_api=True).start()
        assert self.daemon.api is not None
        self.url = self.daemon.api.url
        self.http = httpx.Client(base_url=self.url, timeout=20)
        self.controller = open_controller(cfg.controller.url)

    def call(self, method: str, path: str, role: str | None = "viewer", **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if role is not None:
            headers["Authorization"] = f"Bearer {TOKENS[role][1]}"
        return self.http.request(method, path, headers=headers, **kw)

    def get(self, path: str, role: str | None = "viewer", **kw: Any) -> httpx.Response:
        return self.call("GET", path, role, **kw)

    def ok(self, method: str, path: str, role: str | None = "viewer", **kw: Any) -> Any:
        r = self.call(method, path, role, **kw)
        assert r.status_code < 300, (r.status_code, r.text)
        return r.json()

    def state(self) -> Projection:
        return replay(self.controller)

    def wait_state(self, condition: Any, what: str, timeout: float = 20.0) -> Projection:
        return wait_state(self.state, condition, what, timeout)

    def demand_round(self) -> Projection:
        """The scheduler's demand over REST, met: 2 hosts running, 2 vcs units lent (total 4)."""
        self.ok("PUT", "/v1/demand", "scheduler", json=DEMAND)
        return self.wait_state(
            lambda s: sum(i.state == "running" for i in s.instances.values()) == 2
            and sum(g.count for g in s.grants.values() if g.state == "granted") == 2
            and s.resources.get("vcs") is not None and s.resources["vcs"].total == 4
            and all(r.state == "complete" for r in s.requests.values()),
            "2 hosts running and 2 vcs units granted")

    def stop(self) -> None:
        self.http.close()
        self.daemon.stop()
        self.controller.close()


@pytest.fixture
def start_api(tmp_path):
    """``start_api(tokens=True, providers=None, instance="a", **config)``: a running daemon with its API."""
    started: list[Api] = []

    def start(tokens: bool = True, providers: list[dict] | None = None, instance: str = "a",
              home: str = "home", **over: Any) -> Api:
        if providers is None:
            providers = [sim_provider(tmp_path, "hosts", HOSTS_SIM), sim_provider(tmp_path, "units", UNITS_SIM)]
        api = {"listen": "127.0.0.1:0"}
        if tokens:
            api["tokens"] = str(write_tokens(tmp_path / "tokens.yaml"))
        over = {"budget": {"max_hosts": 20, "max_cost_per_hour": 100.0}, **over}
        over["api"] = {**api, **over.get("api", {})}
        cfg = make_config(tmp_path, providers, instance=instance, **over)
        run = Api(cfg, tmp_path / home)
        started.append(run)
        return run

    yield start
    for run in reversed(started):
        run.stop()
