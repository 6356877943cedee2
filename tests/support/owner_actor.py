"""A live provider owner on a real SQLite journal, its provider scripted behind its port."""

from __future__ import annotations

from contextlib import contextmanager

from actors.answers import KeptAnswers
from actors.journal import JournalActor
from actors.lease import Revocation
from actors.pacing import FirstScans
from actors.provider import ProviderActor
from config.models import PolicyConfig, ProviderConfig
from persistence.controller import open_controller
from persistence.sqlite import SqliteController
from state.shared import SharedProjection
from tests.support.fakes import Inbox, ScriptedCalls

T0 = 1_000_000.0
CFG = ProviderConfig.model_validate({"name": "p", "kind": "hosts", "script": {"style": "v2", "path": "x"}})


@contextmanager
def owner(tmp_path, now: list[float], scan_after: float = 0.0, policy: PolicyConfig | None = None,
          turns: FirstScans | None = None, cfg: ProviderConfig = CFG, busy_timeout: float | None = None,
          answers: KeptAnswers | None = None):
    """``busy_timeout``: how long the controller waits for a write lock another process holds (SQLite's 5 s
    when None)."""
    path = tmp_path / "c.db"
    controller = open_controller(f"sqlite:///{path}", clock=lambda: now[0]) if busy_timeout is None else \
        SqliteController(str(path), clock=lambda: now[0], busy_timeout=busy_timeout)
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    lease = controller.leases.acquire("provider:p", "a", 3600)
    calls = ScriptedCalls()
    ref = ProviderActor.start(cfg, lease, Revocation(float("inf")), journal, Inbox(),
                              policy or PolicyConfig(), [], tmp_path, calls.factory, shared,
                              clock=lambda: now[0], scan_after=scan_after, turns=turns, answers=answers)
    try:
        yield ref, journal, calls, shared
    finally:
        ref.stop()
        journal.stop()
        controller.close()
