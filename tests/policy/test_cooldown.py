"""Cooldowns from the request history: exponential, capped, scoped, and cleared by success."""

from __future__ import annotations

from policy.cooldown import cooldowns
from state.projection import Projection
from tests.support.policy import T0, completed_request, failed_request


def _cool(p, now, base=60, cap=300):
    return cooldowns(p.requests.values(), now, base, cap)


def test_each_failure_in_a_row_doubles_the_cooldown_up_to_the_cap():
    p = Projection()
    at = T0
    waits = []
    for n in range(5):
        failed_request(p, "a", "a-t", f"r{n}", at=at, outcome="failed")
        c = _cool(p, at)[("a", "")]
        waits.append(c.until - at)
        assert c.strikes == n + 1 and c.cause == "a failed request"
        at = c.until + 1  # tried again right after the cooldown, and failed again
    assert waits == [60, 120, 240, 300, 300]


def test_capacity_cools_only_the_template_and_other_failures_the_whole_provider():
    p = Projection()
    failed_request(p, "a", "a-big", "r1", at=T0, outcome="capacity")
    assert set(_cool(p, T0 + 1)) == {("a", "a-big")}
    failed_request(p, "a", "a-small", "r2", at=T0 + 2, outcome="timeout")
    cool = _cool(p, T0 + 3)
    assert set(cool) == {("a", "a-big"), ("a", "")} and cool[("a", "")].cause == "a request of unknown outcome"
    failed_request(p, "b", "b-t", "r3", at=T0 + 2, state="timed_out", outcome=None)
    assert _cool(p, T0 + 3)[("b", "")].cause == "a request timed out"


def test_a_cooldown_ends_and_a_success_clears_the_strikes():
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="capacity")
    assert _cool(p, T0 + 59) and not _cool(p, T0 + 60)
    failed_request(p, "a", "a-t", "r2", at=T0 + 61, outcome="capacity")
    assert _cool(p, T0 + 62)[("a", "a-t")].strikes == 2
    completed_request(p, "a", "a-t", "ok", at=T0 + 200)
    failed_request(p, "a", "a-t", "r3", at=T0 + 300, outcome="capacity")
    assert _cool(p, T0 + 301)[("a", "a-t")].strikes == 1, "the success in between started the count afresh"


def test_an_old_bad_spell_is_forgotten():
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="failed")
    failed_request(p, "a", "a-t", "r2", at=T0 + 61, outcome="failed")
    # The second cooldown ended at T0 + 181; a failure more than ``cap`` after that counts as the first.
    failed_request(p, "a", "a-t", "r3", at=T0 + 181 + 301, outcome="failed")
    assert _cool(p, T0 + 483)[("a", "")].strikes == 1
