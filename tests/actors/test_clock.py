"""The daemon's clock (issue 28, case 3): a step of the wall clock stretches or shrinks no duration past SLEW."""

from __future__ import annotations

import logging

import pytest

from actors.clock import SLEW, SteadyClock
from messages.facts import InstanceSeen, make_fact
from state.shared import SharedProjection

T0 = 1_700_000_000.0
DAY = 86_400.0


class Clocks:
    """A wall clock that can be set, and a steady one that only runs: both moved by the test."""

    def __init__(self) -> None:
        self.wall_at, self.steady_at = T0, 1_000.0

    def wall(self) -> float:
        return self.wall_at

    def steady(self) -> float:
        return self.steady_at

    def run(self, seconds: float, clock: SteadyClock, step: float = 0.5) -> list[float]:
        """Both clocks run ``seconds``; the daemon's time read every ``step``."""
        seen = []
        for _ in range(round(seconds / step)):
            self.wall_at += step
            self.steady_at += step
            seen.append(clock())
        return seen


@pytest.fixture
def clocks():
    return Clocks()


def test_in_step_it_is_the_wall_clock(clocks):
    clock = SteadyClock(clocks.wall, clocks.steady)
    assert clock() == T0
    clocks.run(100, clock)
    assert clock() == pytest.approx(clocks.wall_at)


def test_a_day_ahead_for_six_seconds_moves_the_daemons_time_by_at_most_slew_of_them(clocks, caplog):
    """NTP after a suspend: +1 day for 6 s, then back. An idle spell measured across it stays what it was."""
    caplog.set_level(logging.WARNING, logger="actors.clock")
    clock = SteadyClock(clocks.wall, clocks.steady)
    idle_since = clock()
    clocks.run(10, clock)
    clocks.wall_at += DAY
    during = clocks.run(6, clock)
    assert during[-1] - idle_since <= 16 * (1 + SLEW), "the step reached the daemon's time"
    clocks.wall_at -= DAY
    after = clocks.run(20, clock)
    idle = after[-1] - idle_since
    assert 36 * (1 - SLEW) <= idle <= 36 * (1 + SLEW), f"36 s of idling measured as {idle:.1f} s"
    assert after[-1] == pytest.approx(clocks.wall_at), "back in step once the gap is closed"
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "+86399.9s" in said[0] and "in step with the wall clock again" in said[1], said


def test_a_lasting_step_is_caught_up_at_the_slew_rate_and_time_never_runs_backwards(clocks):
    clock = SteadyClock(clocks.wall, clocks.steady)
    clocks.wall_at -= 30  # set back by half a minute, for good
    seen = clocks.run(400, clock, step=1.0)
    assert all(b >= a for a, b in zip(seen, seen[1:])), "the daemon's time ran backwards"
    assert all(0.9 - 1e-9 <= b - a <= 1.0 + 1e-9 for a, b in zip(seen, seen[1:]))
    assert seen[-1] == pytest.approx(clocks.wall_at), "the step is taken in the end"
    assert seen[99] - (T0 - 30 + 100) > 19, "caught up faster than SLEW allows"


def test_a_fact_stamped_in_the_future_is_taken_as_stamped_now_with_a_warning(caplog):
    now = [T0]
    shared = SharedProjection(clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="state.shared")
    facts = [make_fact(InstanceSeen(machine_id="m1", name="h1", state="running"), provider="p", now=T0 + DAY),
             make_fact(InstanceSeen(machine_id="m2", name="h2", state="running"), provider="p", now=T0 - 5)]
    facts = [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(facts)]
    shared.apply_all(facts)
    with shared.reading() as p:
        assert p.instances["p/m1"].seen_at == T0
        assert p.instances["p/m2"].seen_at == T0 - 5
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith("projection: 1 facts stamped up to 86400s in the future are taken as stamped now")


def test_a_reader_without_a_clock_shows_every_stamp_as_recorded():
    shared = SharedProjection()
    fact = make_fact(InstanceSeen(machine_id="m1", name="h1", state="running"), provider="p", now=T0 + DAY)
    shared.apply_all([fact.model_copy(update={"seq": 1})])
    with shared.reading() as p:
        assert p.instances["p/m1"].seen_at == T0 + DAY
