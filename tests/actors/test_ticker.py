"""The ticker: a Tick to every actor each period, and one to an actor at the moment it asked for."""

from __future__ import annotations

import math

from actors.pumps import Ticker
from messages.commands import Tick
from tests.support.lease_world import Clock


class Inbox:
    def __init__(self, alive: bool = True) -> None:
        self.told: list[Tick] = []
        self.alive = alive

    def is_alive(self) -> bool:
        return self.alive

    def tell(self, msg: Tick) -> None:
        self.told.append(msg)


def test_a_wake_is_told_at_the_moment_asked_for_and_only_to_the_actor_that_asked() -> None:
    clock = Clock()
    ticker = Ticker(0.75, clock=clock, monotonic=clock)
    asker, other, gone = Inbox(), Inbox(), Inbox(alive=False)
    ticker.add(other)
    ticker.wake(asker, 3.1)
    ticker.wake(asker, 1.0)
    ticker.wake(gone, 0.5)
    clock.now += 0.99
    assert math.isclose(ticker.fire_due(), 0.01, abs_tol=1e-9)
    assert asker.told == [] and gone.told == []
    clock.now += 0.01
    assert math.isclose(ticker.fire_due(), 2.1, abs_tol=1e-9), "the later wake is still asked for"
    assert [t.now for t in asker.told] == [clock.now], "told once, at the moment it asked for"
    assert gone.told == [] and other.told == [], "a stopped actor is not told; nobody else is woken"
    clock.now += 2.1
    assert ticker.fire_due() == math.inf
    assert len(asker.told) == 2
    ticker.tick()
    assert len(other.told) == 1 and len(asker.told) == 2, "the periodic tick goes to the registered actors"
