"""Borrowed units go back above the peak use, in the provider's granularity, whole grants or part of one."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messages.demand import UnitItem
from messages.facts import GrantChanged, Order, RequestPlanned, UsageObserved
from messages.records import ResourceRecord
from policy.granularity import size_down
from policy.reclaim import reclaim
from state.projection import Projection
from tests.support.policy import T0, demand, feed, units, view

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = T0 + 10_000
IDLE = 600.0


def _grant(p: Projection, gid: str, count: int, at: float) -> None:
    feed(p, "u", RequestPlanned(action="request", supply="units", resource="vcs", count=count), ids=[gid], now=at)
    feed(p, "u", GrantChanged(kind="grant_granted", grant_id=gid, resource="vcs", state="granted", count=count),
         now=at)


def _world(base: int, grants: list[tuple[int, float]], uses: list[tuple[float, int]]) -> Projection:
    p = Projection()
    for n, (count, age) in enumerate(grants):
        _grant(p, f"g{n}", count, NOW - age)
    res = p.resource("vcs")
    res.base = base
    for at, level in sorted(uses):
        feed(p, "u", UsageObserved(resource="vcs", in_use=level), now=at)
    return p


def _peak(uses: list[tuple[float, int]], since: float) -> int:
    """Brute force: the highest use in force at any moment from ``since`` until now."""
    in_force = [level for at, level in sorted(uses) if at <= since][-1:]
    return max(in_force + [level for at, level in uses if at > since], default=0)


GRANTS = st.lists(st.tuples(st.integers(1, 9), st.floats(0, 3 * IDLE)), min_size=1, max_size=5)
USES = st.lists(st.tuples(st.floats(NOW - 3 * IDLE, NOW), st.integers(0, 40)), max_size=8, unique_by=lambda u: u[0])


@FAST
@given(GRANTS, USES, st.integers(0, 8), st.integers(1, 4), st.integers(1, 4), st.sampled_from([0.0, IDLE * 2]))
def test_units_go_back_above_peak_use_in_granular_steps_past_hold(grants, uses, base, min_request, step, min_hold):
    p = _world(base, grants, uses)
    provider = units("u", min_request=min_request, step=step, min_hold_s=min_hold)
    out = reclaim(None, {"u": provider}, p.resources, view(p), now=NOW, idle_time=IDLE)
    # Units lent within idle_time were never seen unused that long: they neither go back nor let others go.
    held = base + sum(g.count for g in p.grants.values() if g.granted_at <= NOW - IDLE)
    peak = _peak(uses, NOW - IDLE)
    returned = sum(o.count for _, o in out)

    assert returned <= max(0, held - peak), "never below the most in use within idle_time: only what is held above"
    seen = set()
    for _, o in out:
        [gid] = o.grants
        grant = p.grants[gid]
        assert gid not in seen
        seen.add(gid)
        assert 0 < o.count <= grant.count
        assert o.count == grant.count or (
            o.count >= min_request and (o.count - min_request) % step == 0), "whole, or a granular part"
        assert NOW - grant.granted_at >= max(IDLE, min_hold), "never before idle_time and the minimum hold"
    # As much as the granularity allows goes back: no grant that keeps units could give more from what is spare.
    spare = held - peak - returned
    for g in p.grants.values():
        taken = sum(o.count for _, o in out if o.grants == [g.id])
        if NOW - g.granted_at >= max(IDLE, min_hold) and taken < g.count:
            assert spare < g.count - taken and size_down(taken + spare, min_request, step) in (0, taken)


@FAST
@given(GRANTS, USES, st.integers(0, 8))
def test_no_units_go_back_while_their_resource_is_wanted(grants, uses, base):
    p = _world(base, grants, uses)
    wanted = demand(UnitItem(id="d", resource="vcs", count=1))
    assert reclaim(wanted, {"u": units("u")}, p.resources, view(p), now=NOW, idle_time=IDLE) == []


@FAST
@given(st.lists(st.tuples(st.floats(0, 1000), st.integers(0, 30)), min_size=1, max_size=30, unique_by=lambda u: u[0]),
       st.floats(-10, 1010))
def test_the_peak_staircase_matches_the_use_seen(uses, since):
    res = ResourceRecord(name="vcs")
    for at, level in sorted(uses):
        res.observe(at, level)
    assert res.peak_since(since) == _peak(uses, since)
    assert res.in_use == max(uses)[1], "the last use seen is the use now"
    assert len(res.peaks) <= max(level for _, level in uses) + 1


def test_six_borrowed_in_steps_of_two_with_one_in_use_give_four_back():
    p = _world(0, [(6, IDLE * 2)], [(NOW - IDLE * 2, 6), (NOW - IDLE - 1, 1)])
    provider = {"u": units("u", min_request=2, step=2)}
    out = reclaim(None, provider, p.resources, view(p), now=NOW, idle_time=IDLE)
    assert [(o.grants, o.count, o.reason) for _, o in out] == [(["g0"], 4, "4 of 6 unused for 600s")]
    # A use of 5 within idle_time keeps all but one, and one is not a step of two: nothing goes back.
    feed(p, "u", UsageObserved(resource="vcs", in_use=5), now=NOW - 10)
    feed(p, "u", UsageObserved(resource="vcs", in_use=1), now=NOW - 5)
    assert reclaim(None, provider, p.resources, view(p), now=NOW, idle_time=IDLE) == []
    assert [o.count for _, o in reclaim(None, provider, p.resources, view(p), now=NOW + IDLE, idle_time=IDLE)] == [4]


def test_units_already_on_their_way_back_are_not_counted_twice():
    p = _world(0, [(6, IDLE * 2), (4, IDLE * 2)], [(NOW - IDLE * 2, 1)])
    # An order to give back 3 of g0, not yet taken up by the owner: g1's 4 must not go below the 1 in use.
    feed(p, "u", Order(action="return", supply="units", resource="vcs", grants=["g0"], count=3), now=NOW - 1)
    out = reclaim(None, {"u": units("u")}, p.resources, view(p), now=NOW, idle_time=IDLE)
    assert [(o.grants, o.count) for _, o in out] == [(["g1"], 4)], \
        "with 3 of g0 on their way back, its other 3 cover the 1 in use"
    # Taken up as a partial return in progress: the same.
    feed(p, "u", RequestPlanned(action="return", supply="units", order_id=next(iter(p.orders)), resource="vcs",
                                count=3, grants=["g0"]), ids=["ret-1"], now=NOW)
    feed(p, "u", GrantChanged(kind="grant_return_planned", grant_id="g0", resource="vcs", state="return_planned",
                              request_id="ret-1", count=3), now=NOW)
    out = reclaim(None, {"u": units("u")}, p.resources, view(p), now=NOW, idle_time=IDLE)
    assert [(o.grants, o.count) for _, o in out] == [(["g1"], 4)]


def test_units_lent_within_idle_time_neither_go_back_nor_let_others_go():
    """A scheduler hands out units as soon as their total says so: units lent within idle_time were never
    seen unused that long. (The liar soak found a unit returned 0.3 s after the total grew to 3, on the
    2 in use read a second before: the scheduler had taken the third.)"""
    p = _world(0, [(2, IDLE * 2), (1, 1.0)], [(NOW - IDLE * 2, 2)])
    provider = {"u": units("u")}
    assert reclaim(None, provider, p.resources, view(p), now=NOW, idle_time=IDLE) == [], \
        "g1's unit came a second ago: whether it is in use is not known"
    # Lent for idle_time with no more than 2 in use since: one unit is spare, from the oldest grant.
    out = reclaim(None, provider, p.resources, view(p), now=NOW + IDLE, idle_time=IDLE)
    assert [(o.grants, o.count) for _, o in out] == [(["g0"], 1)]
