"""Turns for the owners' first scans: never more under way than the width, handed on in the order asked."""

from __future__ import annotations

import pykka

from actors.pacing import TURN, FirstScans
from tests.support.fakes import Inbox


class _Dead:
    def __init__(self) -> None:
        self.told = 0

    def tell(self, _msg) -> None:
        self.told += 1
        raise pykka.ActorDeadError("stopped")


def test_at_most_width_turns_at_once_the_others_told_in_the_order_they_asked():
    turns = FirstScans(2)
    a, b, c, d = Inbox(), Inbox(), Inbox(), Inbox()
    assert turns.ask("a", a) and turns.ask("b", b)
    assert not turns.ask("c", c) and not turns.ask("d", d)
    assert (turns.under_way(), turns.waiting()) == (2, 2)
    assert turns.ask("a", a), "asking again while holding a turn: still its turn"
    turns.give_back("b")
    assert c.q.get_nowait() is TURN and d.q.empty()
    turns.give_back("a")
    assert d.q.get_nowait() is TURN
    assert (turns.under_way(), turns.waiting()) == (2, 0)


def test_a_newcomer_waits_behind_those_already_waiting():
    turns = FirstScans(1)
    assert turns.ask("a", Inbox())
    assert not turns.ask("b", Inbox())
    turns.give_back("a")  # b is told its turn
    assert not turns.ask("c", Inbox())
    assert (turns.under_way(), turns.waiting()) == (1, 1)


def test_giving_back_twice_or_a_turn_never_held_hands_on_nothing_more():
    turns = FirstScans(1)
    b, c = Inbox(), Inbox()
    turns.ask("a", Inbox())
    turns.ask("b", b)
    turns.ask("c", c)
    turns.give_back("c")  # it no longer waits
    turns.give_back("a")
    turns.give_back("a")
    turns.give_back("nobody")
    assert b.q.get_nowait() is TURN and c.q.empty()
    assert (turns.under_way(), turns.waiting()) == (1, 0)


def test_a_turn_handed_to_a_stopped_owner_goes_to_the_next():
    turns = FirstScans(1)
    dead, alive = _Dead(), Inbox()
    turns.ask("a", Inbox())
    turns.ask("dead", dead)
    turns.ask("alive", alive)
    turns.give_back("a")
    assert dead.told == 1 and alive.q.get_nowait() is TURN
    assert (turns.under_way(), turns.waiting()) == (1, 0)


def test_a_width_below_one_still_lets_one_scan_through():
    turns = FirstScans(0)
    assert turns.ask("a", Inbox()) and not turns.ask("b", Inbox())


def test_the_end_of_a_run_of_first_scans_is_told_once_when_no_turn_is_held_or_awaited():
    ends = []
    turns = FirstScans(1, after=lambda: ends.append(1))
    turns.ask("a", Inbox())
    turns.ask("b", Inbox())
    turns.give_back("a")  # b holds the turn now
    assert ends == []
    turns.give_back("b")
    assert ends == [1]
    turns.give_back("b")
    turns.give_back("nobody")
    assert ends == [1], "a turn given back twice, or never held, ends no run"
    turns.ask("c", Inbox())
    turns.give_back("c")
    assert ends == [1, 1], "a later run (an owner taken up later) ends in its turn"
