"""A partial return: the grant edges back to ``granted``, the record they leave, and the script input they make."""

from __future__ import annotations

import pytest

from messages.facts import GrantChanged, RequestPlanned, make_fact
from messages.states import GRANT, OnRestart
from policy.returns import MAX_RETURNS, ORPHANS, given_up, returns_due
from providers.contract import ContractError, build_input
from state.projection import Projection

T0 = 1_000.0


def _apply(p: Projection, payload, at: float, fact_id: str | None = None) -> bool:
    return p.apply(make_fact(payload, provider="u", now=at, fact_id=fact_id).model_copy(update={"seq": p.seq + 1}))


def _change(kind: str, state: str, count: int, request_id: str = "ret-1") -> GrantChanged:
    return GrantChanged(kind=kind, grant_id="g1", resource="vcs", state=state, count=count, request_id=request_id)


def _six_granted() -> Projection:
    p = Projection()
    _apply(p, RequestPlanned(action="request", supply="units", resource="vcs", count=6), T0, "g1")
    _apply(p, _change("grant_granted", "granted", 6, "g1"), T0)
    return p


def _returning_four(p: Projection, through_returning: bool = True) -> None:
    _apply(p, _change("grant_return_planned", "return_planned", 4), T0 + 100)
    if through_returning:
        _apply(p, _change("grant_returning", "returning", 4), T0 + 101)


def test_returning_to_granted_when_a_partial_return_is_done_keeps_the_rest():
    assert GRANT.allowed("returning", "granted")
    p = _six_granted()
    _returning_four(p)
    g = p.grants["g1"]
    assert (g.state, g.count, g.returning, g.partial_return) == ("returning", 6, 4, True)
    _apply(p, _change("grant_part_returned", "granted", 4), T0 + 200)
    assert (g.state, g.count, g.returning, g.partial_return) == ("granted", 2, 0, False)
    assert g.given_back == [(T0 + 200, 4)]
    assert g.granted_at == T0, "the rest is held since the grant began (min hold, costs)"
    assert g.ended_at is None and "g1" in p.part(g.provider).live_grants


def test_return_planned_to_granted_when_a_partial_return_never_completed_keeps_it_all():
    assert GRANT.allowed("return_planned", "granted")
    p = _six_granted()
    _returning_four(p, through_returning=False)
    _apply(p, _change("grant_return_timed_out", "granted", 4), T0 + 900)
    g = p.grants["g1"]
    assert (g.state, g.count, g.returning, g.given_back, g.granted_at) == ("granted", 6, 0, [], T0)


def test_returning_to_granted_when_a_partial_return_never_completed_keeps_it_all():
    p = _six_granted()
    _returning_four(p)
    _apply(p, _change("grant_return_timed_out", "granted", 4), T0 + 900)
    g = p.grants["g1"]
    assert (g.state, g.count, g.returning, g.given_back) == ("granted", 6, 0, [])
    # If the part went back after all, the provider's list says so, as a note on granted.
    _apply(p, _change("grant_part_returned", "granted", 4, ""), T0 + 1000)
    assert (g.state, g.count, g.given_back) == ("granted", 2, [(T0 + 1000, 4)])


def test_a_whole_return_still_ends_the_grant():
    p = _six_granted()
    _apply(p, _change("grant_return_planned", "return_planned", 6), T0 + 100)
    assert not p.grants["g1"].partial_return
    _apply(p, _change("grant_returning", "returning", 6), T0 + 101)
    _apply(p, _change("grant_returned", "returned", 6), T0 + 200)
    g = p.grants["g1"]
    assert (g.state, g.count, g.ended_at) == ("returned", 6, T0 + 200) and "g1" not in p.part(g.provider).live_grants


def test_a_replanned_return_names_its_new_request():
    p = _six_granted()
    _returning_four(p, through_returning=False)
    _apply(p, _change("grant_return_planned", "return_planned", 4, "ret-2"), T0 + 300)
    g = p.grants["g1"]
    assert (g.state, g.return_request_id, g.returning) == ("return_planned", "ret-2", 4)


def test_after_a_restart_a_partial_return_is_repeated_or_polled_with_its_count():
    # A new owner replays the facts: the intent is repeated with its token and the same part.
    replayed = Projection()
    assert GRANT.on_restart["return_planned"] is OnRestart.REPEAT
    assert GRANT.on_restart["returning"] is OnRestart.POLL
    assert GRANT.on_restart["granted"] is OnRestart.KEEP
    _apply(replayed, RequestPlanned(action="request", supply="units", resource="vcs", count=6), T0, "g1")
    _apply(replayed, _change("grant_granted", "granted", 6, "g1"), T0)
    _returning_four(replayed, through_returning=False)
    g = replayed.grants["g1"]
    assert (g.state, g.count, g.returning, g.return_request_id) == ("return_planned", 6, 4, "ret-1")


def test_a_partial_return_names_the_grant_and_its_count_in_the_script_input():
    doc = {"resource": "vcs", "count": 4, "grants": [{"token": "g1", "count": 4}]}
    assert build_input("v2", "units", "return", doc, "ret-1") == {"token": "ret-1", **doc}
    whole = {"resource": "vcs", "count": 6, "grants": ["g1"]}
    assert build_input("v2", "units", "return", whole, "ret-1") == {"token": "ret-1", **whole}
    with pytest.raises(ContractError, match="grants"):
        build_input("v2", "units", "return", {"resource": "vcs", "count": 4, "grants": [{"token": "g1"}]}, "ret-1")


def test_a_grant_given_back_in_parts_can_still_be_given_back_after_as_many_parts_as_the_bound():
    """Returns count towards the bound (MAX_RETURNS) only since units last went back: a grant given back in
    five parts, then orphaned by a return that said complete and ended nothing, was never returned again
    (the liar soak found its last unit held after the calm)."""
    p = Projection()
    _apply(p, RequestPlanned(action="request", supply="units", resource="vcs", count=10), T0, "g1")
    _apply(p, _change("grant_granted", "granted", 10, "g1"), T0)
    at = T0 + 100
    for n in range(1, MAX_RETURNS + 1):
        _apply(p, _change("grant_return_planned", "return_planned", 1, f"ret-{n}"), at)
        _apply(p, _change("grant_returning", "returning", 1, f"ret-{n}"), at + 1)
        _apply(p, _change("grant_part_returned", "granted", 1, f"ret-{n}"), at + 2)
        at += 10
    _apply(p, _change("grant_return_planned", "return_planned", 5, "ret-last"), at)
    _apply(p, _change("grant_returning", "returning", 5, "ret-last"), at + 1)
    _apply(p, _change("grant_returned", "returned", 5, "ret-last"), at + 2)
    _apply(p, GrantChanged(kind="grant_orphan_found", grant_id="g1", resource="vcs", state="orphaned", count=5,
                           reason="still held after its return completed"), at + 60)
    g = p.grants["g1"]
    assert g.returns == 1 and not given_up(g.returns)
    _, parts = returns_due([], [g], p.requests, at + 61, pause=1.0, orphans_go=True)
    assert parts == {("vcs", ORPHANS): {"g1": 5}}
