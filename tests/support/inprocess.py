"""The REST app in process, on a controller fed by hand: fast tests of what a handler says and writes.

No daemon runs: actions are committed straight to the controller, as the
CLI's direct mode commits them, so a test reads back exactly the facts a
call wrote.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from messages.facts import Fact, make_fact
from persistence.controller import open_controller
from persistence.port import Controller
from provisioner.api.app import create_app
from provisioner.api.auth import TokenEntry, Tokens
from provisioner.read.model import ReadModel
from provisioner.surface.operations import Operations
from tests.support.api import TOKENS

with warnings.catch_warnings():  # Starlette's test client warns about the httpx it is built on
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

NOW = 1_800_000_000.0


@dataclass
class InProcess:
    controller: Controller
    ops: Operations
    http: TestClient
    written: list[Fact] = field(default_factory=list)

    def add(self, payload: Any, provider: str = "cloud", at: float = NOW - 600, fact_id: str | None = None) -> None:
        self.controller.append([make_fact(payload, provider=provider, fact_id=fact_id, now=at)])

    def call(self, method: str, path: str, role: str | None = "operator", **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}))
        if role is not None:
            headers["Authorization"] = f"Bearer {TOKENS[role][1]}"
        return self.http.request(method, path, headers=headers, **kw)


@pytest.fixture
def inprocess(tmp_path: Path) -> Iterator[Callable[..., InProcess]]:
    """``inprocess(reload=None, **ops_kw)``: the app over a fresh SQLite controller, every role's token known."""
    made: list[InProcess] = []

    def make(reload: Callable[[], dict[str, Any]] | None = None, **kw: Any) -> InProcess:
        c = open_controller(f"sqlite:///{tmp_path / 'state.db'}")
        written: list[Fact] = []

        def commit(facts: list[Fact]) -> list[Fact]:
            result = c.append(facts)
            written.extend(result.accepted)
            return result.accepted

        ops = Operations(ReadModel(c), c, commit, audit=None, clock=lambda: NOW, **kw)
        tokens = Tokens([TokenEntry(name=n, role=r, token=t) for r, (n, t) in TOKENS.items()])
        run = InProcess(c, ops, TestClient(create_app(ops, tokens, reload=reload)), written)
        made.append(run)
        return run

    yield make
    for run in made:
        run.http.close()
        run.controller.close()
