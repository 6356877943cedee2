"""Units in use are never returned: the total leaves a return's units out from its intent on, and the use is
read before its call. (The liar soak found units returned while in use: the planner decides on the last use
read, and a scheduler may hand units out until it reads a lower total.)"""

from __future__ import annotations

from dataclasses import replace

from messages.facts import USE_READ, GrantChanged, LicensePublished, Order, RequestPlanned, UsageObserved, make_fact
from messages.scripts import Usage
from owner.calls import Carry, CheckUse
from owner.requests import carried, carry_out, replan_returns, take_order, use_checked
from owner.scans import Sightings
from owner.step import answer, step
from owner.units import totals
from policy.retry import MAX_ATTEMPTS
from tests.support.facts import T0, commit, kinds, projection
from tests.support.owners import result

GRANTS = [
    ("g1", RequestPlanned(action="request", supply="units", resource="vcs", count=3)),
    (None, GrantChanged(kind="grant_granted", grant_id="g1", resource="vcs", state="granted", count=3)),
    ("g2", RequestPlanned(action="request", supply="units", resource="vcs", count=2)),
    (None, GrantChanged(kind="grant_granted", grant_id="g2", resource="vcs", state="granted", count=2)),
]


def _planned(units):
    """g1 (3) and g2 (2) lent, base 2; the planner orders g1 back, and the owner writes the intent."""
    p = projection("p", [*GRANTS, ("o", Order(action="return", supply="units", resource="vcs", grants=["g1"],
                                               count=3, reason="unused"))])
    commit(p, "p", totals(p, units, busy=()), T0 + 10)
    assert (p.resources["vcs"].borrowed, p.resources["vcs"].total) == (5, 7)
    written = commit(p, "p", take_order(p, units, p.orders["o"], T0 + 11, busy=()), T0 + 11)
    return p, written


def test_the_total_drops_with_a_returns_intent_and_stays_down_while_its_units_are_on_their_way(units):
    p, written = _planned(units)
    assert kinds(written) == ["request_planned", "grant_return_planned", "resource_total_changed"]
    assert (p.resources["vcs"].borrowed, p.resources["vcs"].total) == (2, 4), "g1's 3 units are not to hand out"
    assert not totals(p, units, busy=()).writes, "units on their way back stay out of the total"


def test_a_fresh_units_return_reads_the_use_first_and_is_called_once_a_read_that_fits_is_written(units):
    p, _ = _planned(units)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    assert check.purpose == CheckUse("o.1", "vcs") and check.action == "usage" and check.token is None
    assert check.purpose.slot == Carry("o.1").slot, "the read holds the return's slot: no second read or call"
    fx = use_checked(p, units, check.purpose, result("usage", output=Usage(resource="vcs", in_use=4)))
    assert not fx.calls, "the read is written first"
    assert kinds(commit(p, "p", fx, T0 + 12)) == ["usage_observed", "request_status"]
    assert (p.requests["o.1"].outcome, p.requests["o.1"].attempts) == (USE_READ, 0), "no attempt: no call yet"
    (call,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    assert call.purpose == Carry("o.1") and call.action == "return" and call.token == "o.1"
    (again,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=True).calls
    assert again.purpose == Carry("o.1"), "a successor repeats it unread: the call may have been made"


def test_a_return_whose_units_are_in_use_is_called_off_and_its_grant_held_as_before(units):
    p, _ = _planned(units)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    fx, _ = answer(p, units, check, result("usage", output=Usage(resource="vcs", in_use=5)), T0 + 12, (), Sightings())
    assert not fx.calls, "5 in use, 4 would stay: no return is called"
    assert kinds(commit(p, "p", fx, T0 + 12)) == ["usage_observed", "request_failed", "grant_return_called_off",
                                                  "resource_total_changed"], "the total rises in the same write"
    g1 = p.grants["g1"]
    assert (g1.state, g1.count, g1.returning) == ("granted", 3, 0)
    assert p.requests["o.1"].state == "failed" and "called off: 5 units of vcs in use, 4 would stay" in \
        p.requests["o.1"].reason
    assert p.resources["vcs"].in_use == 5, "the planner sees the use that called it off"
    assert (p.resources["vcs"].borrowed, p.resources["vcs"].total) == (5, 7), "the units count in the total again"
    assert not totals(p, units, busy=()).writes


def test_a_read_that_fails_is_an_attempt_that_made_no_call_and_the_next_attempt_reads_again(units):
    """(The liar soak found a unit returned in use after a read failed: the retry called the return unread.)"""
    p, _ = _planned(units)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    commit(p, "p", use_checked(p, units, check.purpose, result("usage", outcome="transient", reason="busy")), T0 + 12)
    assert (p.requests["o.1"].state, p.requests["o.1"].attempts) == ("planned", 1)
    assert not carry_out(p, units, p.requests["o.1"], T0 + 12.5, busy=(), inherited=False), "after a backoff"
    (again,) = carry_out(p, units, p.requests["o.1"], T0 + 20, busy=(), inherited=False).calls
    assert again.purpose == check.purpose, "no return was called: the use is read again"


def test_once_a_return_was_called_its_retry_follows_whatever_the_use(units):
    p, _ = _planned(units)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    commit(p, "p", use_checked(p, units, check.purpose, result("usage", output=Usage(resource="vcs", in_use=0))),
           T0 + 12)
    commit(p, "p", carried(p, units, "o.1", result("return", outcome="transient", reason="throttled")), T0 + 13)
    (retry,) = carry_out(p, units, p.requests["o.1"], T0 + 20, busy=(), inherited=False).calls
    assert retry.purpose == Carry("o.1"), "the call may have taken effect: its repeat follows, unread"


def test_reads_that_keep_failing_fail_the_return_as_calls_would(units):
    p, _ = _planned(units)
    now = T0 + 12
    for _ in range(MAX_ATTEMPTS):
        (check,) = carry_out(p, units, p.requests["o.1"], now, busy=(), inherited=False).calls
        assert check.purpose == CheckUse("o.1", "vcs")
        commit(p, "p", use_checked(p, units, check.purpose, result("usage", outcome="transient")), now)
        now += 3600
    assert p.requests["o.1"].state == "failed"


def test_an_inherited_intent_whose_use_was_never_read_was_never_called_and_reads_first(units):
    """(The liar soak found a unit returned in use by a successor that repeated such an intent unread.)"""
    p, _ = _planned(units)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=True).calls
    assert check.purpose == CheckUse("o.1", "vcs")
    fx = use_checked(p, units, check.purpose, result("usage", output=Usage(resource="vcs", in_use=5)))
    assert kinds(commit(p, "p", fx, T0 + 12)) == ["usage_observed", "request_failed", "grant_return_called_off",
                                                  "resource_total_changed"], "the total rises in the same write"


def test_an_orphans_return_is_called_without_a_read(units):
    """Its units were never in the total: the scheduler could not hand them out."""
    p = projection("p", [(None, GrantChanged(kind="grant_orphan_found", grant_id="tok-9", resource="vcs",
                                             state="orphaned", count=3)),
                         (None, UsageObserved(resource="vcs", in_use=9))])
    commit(p, "p", replan_returns(p, units, T0 + 10, busy=()), T0 + 10)
    (rid,) = [r for r in p.requests]
    (call,) = carry_out(p, units, p.requests[rid], T0 + 11, busy=(), inherited=False).calls
    assert call.purpose == Carry(rid)


def test_returns_written_together_each_leave_out_the_others_units(units):
    """(The liar soak found two return intents taken in one turn, the second writing a total that counted the
    first's units again: published for a moment, the scheduler could hand them out.)"""
    p = projection("p", [*GRANTS,
                         ("o1", Order(action="return", supply="units", resource="vcs", grants=["g1"], count=3)),
                         ("o2", Order(action="return", supply="units", resource="vcs", grants=["g2"], count=1))])
    commit(p, "p", totals(p, units, busy=()), T0 + 10)
    fx = step(p, units, T0 + 11, busy=(), inherited_upto=0)
    totals_written = [w.payloads[-1] for w in fx.writes if w.payloads[-1].kind == "resource_total_changed"]
    assert [t.borrowed for t in totals_written] == [2, 1], "5 lent; 3 going, then 1 more: never 4 again"
    commit(p, "p", fx, T0 + 11)
    assert p.resources["vcs"].borrowed == 1 and not totals(p, units, busy=()).writes


def test_a_return_is_called_off_when_the_schedulers_own_count_says_its_units_are_held(units):
    # The license server sees none in use (the jobs have not checked the tokens out), Slurm's count says 5 held.
    p, _ = _planned(units)
    p.apply_all([make_fact(LicensePublished(resource="vcs", license="vcs@flex", count=12, reserved=5, in_use=5),
                           provider="p", seq=p.seq + 1, now=T0 + 11)])
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    fx, _ = answer(p, units, check, result("usage", output=Usage(resource="vcs", in_use=0)), T0 + 12, (), Sightings())
    assert not fx.calls, "5 held by Slurm's jobs, 4 would stay: no return is called"
    commit(p, "p", fx, T0 + 12)
    assert p.requests["o.1"].state == "failed" and "called off: 5 units of vcs in use, 4 would stay" in \
        p.requests["o.1"].reason
    assert (p.grants["g1"].state, p.grants["g1"].count) == ("granted", 3)
    assert p.resources["vcs"].in_use == 0, "the license server's count is recorded as it said"


def _shown(p, count, reserved, in_use=0):
    p.apply_all([make_fact(LicensePublished(kind="license_shown", resource="vcs", license="vcs@flex", count=count,
                                            reserved=reserved, in_use=in_use),
                           provider="p", seq=p.seq + 1, now=T0 + 11)])


def test_a_return_waits_until_the_schedulers_bridge_shows_its_units_held_back(units):
    # Slurm was shown base 2 + 5 borrowed (12 - 5): the intent leaves g1's 3 out, so 4 stay. Until Slurm is seen
    # handing out no more than 4, a job could be given a unit that has gone back to the pool: no read, no call.
    units = replace(units, shown=frozenset({"vcs"}))
    p, _ = _planned(units)
    _shown(p, count=12, reserved=5)
    fx = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False)
    assert not fx.calls and not fx.writes
    assert [n.text for n in fx.notes] == ["provider p: return o.1 waits: the scheduler still hands out 7 units of "
                                          "vcs, 4 stay: the return is called once its bridge shows it holding the "
                                          "rest back"]
    _shown(p, count=12, reserved=8)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 13, busy=(), inherited=False).calls
    assert check.purpose == CheckUse("o.1", "vcs"), "shown holding g1's 3 back: the use read, then the call"


def test_a_resource_no_bridge_shows_any_longer_returns_as_before(units):
    # Taken out of slurm.licenses: what Slurm last showed holds nothing back.
    p, _ = _planned(units)
    _shown(p, count=12, reserved=5)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    assert check.purpose == CheckUse("o.1", "vcs")


def test_a_return_already_called_is_repeated_whatever_the_scheduler_shows(units):
    units = replace(units, shown=frozenset({"vcs"}))
    p, _ = _planned(units)
    (check,) = carry_out(p, units, p.requests["o.1"], T0 + 12, busy=(), inherited=False).calls
    commit(p, "p", use_checked(p, units, check.purpose, result("usage", output=Usage(resource="vcs", in_use=0))),
           T0 + 12)
    _shown(p, count=12, reserved=5)
    (call,) = carry_out(p, units, p.requests["o.1"], T0 + 13, busy=(), inherited=True).calls
    assert call.purpose == Carry("o.1"), "the call may have been made: its repeat does not wait"
