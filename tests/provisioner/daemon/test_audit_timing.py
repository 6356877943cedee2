"""Which audited facts the commit hook writes at once, and which it leaves to the auditor thread."""

from __future__ import annotations

from pathlib import Path

from messages.facts import Decision, ProviderAdmin, make_fact
from provisioner.audit.auditor import Auditor
from provisioner.audit.log import AuditLog
from provisioner.daemon.commit_hooks import CommitHooks
from provisioner.daemon.root import Daemon
from tests.support.daemons import make_config, wait_until


def _kinds(log: AuditLog) -> list[str]:
    return [line["kind"] for line in log.read(limit=100)] if log.path.exists() else []


def test_an_operators_action_is_in_the_log_when_the_hook_returns_the_daemons_own_facts_go_to_the_auditor(
        tmp_path: Path) -> None:
    daemon = Daemon(make_config(tmp_path, []), tmp_path / "home")
    poked: list[bool] = []
    daemon.auditor.soon = lambda: poked.append(True)  # type: ignore[method-assign]
    seen: list[int] = []
    hooks = CommitHooks(daemon.metrics, daemon.marks, daemon.audit, daemon.auditor, daemon.controller,
                        extra=lambda facts, _s: seen.append(len(facts)))
    try:
        decision = make_fact(Decision(item="d1", need=1), lease="planner", fence=1)
        hooks([decision], 0.0)
        assert poked == [True] and _kinds(daemon.audit) == [], "the planner's own decision waits for the auditor"
        [paused] = daemon.controller.append([make_fact(ProviderAdmin(kind="provider_paused", reason="ops"),
                                                       provider="p")]).accepted
        hooks([paused], 0.0)
        assert _kinds(daemon.audit) == ["provider_paused"], "an operator's action is written before its reply"
        assert poked == [True]
        assert seen == [1, 1], "the caller's own hook runs after each commit too"
    finally:
        daemon.controller.close()


def test_the_auditor_takes_the_daemons_own_facts_when_told_long_before_its_next_look(tmp_path: Path) -> None:
    daemon = Daemon(make_config(tmp_path, []), tmp_path / "home")
    log, controller = daemon.audit, daemon.controller
    auditor = Auditor(log, controller, every=3600.0)
    auditor.start()
    try:
        controller.append([make_fact(ProviderAdmin(kind="provider_drained", reason="ops"), provider="p")])
        auditor.soon()
        wait_until(lambda: _kinds(log) == ["provider_drained"], timeout=30, what="the auditor to take the fact")
    finally:
        auditor.stop()
        controller.close()
