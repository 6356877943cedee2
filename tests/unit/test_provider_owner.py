"""An owner's own rhythm: runs the daemon chose not to start, and paced first scans."""

from __future__ import annotations

from actors.provider import SCAN_EVERY_POLLS
from config.models import PolicyConfig
from messages.commands import CaughtUp, ScriptDone
from messages.facts import RequestPlanned
from messages.scripts import ScriptResult
from tests.unit.test_provider_returns import T0, _owner


def test_a_run_not_started_is_forgotten_and_tried_again_not_taken_for_a_broken_provider(tmp_path):
    """A mandate that lapsed for a moment (a long pause) and was renewed: the owner goes on as before."""
    runs: list[tuple] = []
    actor, journal, now = _owner(tmp_path, "hosts", [("r", RequestPlanned(action="request", supply="hosts",
                                                                          template="T", count=1))])
    actor.runner = type("Runner", (), {"submit": lambda self, action, doc, token, tag: runs.append((action, tag))})()
    actor.ready = True
    actor._carry_out(actor.p.requests["r"], now[0])
    assert [a for a, _ in runs] == ["request"] and "req:r" in actor.busy
    refused = ScriptResult(provider="p", action="request", outcome="not_started",
                           reason="p request: not started: the provider's lease is no longer held")
    actor._script(ScriptDone(result=refused, tag=runs[0][1]))
    assert journal.q.empty(), "nothing happened at the provider: nothing to record, no provider disabled"
    assert "req:r" not in actor.busy and actor.p.provider("p").status == "active"
    actor._reconcile(now[0] + 1)
    assert [a for a, _ in runs].count("request") == 2, "the next reconcile runs it again"
    assert actor.p.requests["r"].attempts == 0


def test_a_paced_owner_scans_its_provider_first_after_its_delay_and_never_later_than_a_period(tmp_path):
    period = PolicyConfig().poll_every * SCAN_EVERY_POLLS

    def first_scan(scan_after: float) -> float:
        runs: list[tuple[float, str]] = []
        actor, _, now = _owner(tmp_path, "hosts", [])
        actor.runner = type("Runner", (), {"submit": lambda self, action, doc, token, tag: runs.append(
            (now[0], action))})()
        actor.scan_after = scan_after
        actor._caught_up(CaughtUp(seq=0))
        while not any(action == "list" for _, action in runs):
            now[0] += 1.0
            actor.busy.clear()
            actor._reconcile(now[0])
        return next(at for at, action in runs if action == "list") - T0

    assert first_scan(0.0) == 0.0, "unpaced: at once"
    assert first_scan(30.0) == 30.0
    assert first_scan(10 * period) == period
