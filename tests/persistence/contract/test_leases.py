"""Leases: one holder at a time, and a fence that only ever grows."""

from __future__ import annotations

import pytest

from lease.port import free_in
from persistence.port import Controller
from tests.persistence.contract.conftest import MakeController
from tests.support.controllers import FakeClock

NAME = "provider:aws-east"


def test_first_grant_and_renew_by_reacquire_keep_one_fence(controller: Controller, clock: FakeClock) -> None:
    first = controller.leases.acquire(NAME, "a", ttl=10)
    assert first is not None
    assert (first.name, first.holder, first.expires_at) == (NAME, "a", clock.now + 10)
    clock.advance(5)
    again = controller.leases.acquire(NAME, "a", ttl=10)
    assert again is not None
    assert again.fence == first.fence
    assert again.expires_at == clock.now + 10


def test_acquire_refused_while_another_holds(controller: Controller, clock: FakeClock) -> None:
    held = controller.leases.acquire(NAME, "a", ttl=10)
    assert held is not None
    clock.advance(9.9)
    assert controller.leases.acquire(NAME, "b", ttl=10) is None
    assert controller.leases.get(NAME) == held


def test_fence_grows_across_release_expiry_and_other_holders(controller: Controller, clock: FakeClock) -> None:
    leases = controller.leases
    fences = []
    a1 = leases.acquire(NAME, "a", ttl=10)
    assert a1 is not None
    fences.append(a1.fence)
    assert leases.release(a1)
    a2 = leases.acquire(NAME, "a", ttl=10)  # same holder after release: a new grant
    assert a2 is not None
    fences.append(a2.fence)
    clock.advance(10)
    a3 = leases.acquire(NAME, "a", ttl=10)  # same holder after expiry: a new grant too
    assert a3 is not None
    fences.append(a3.fence)
    clock.advance(11)
    b = leases.acquire(NAME, "b", ttl=10)
    assert b is not None
    fences.append(b.fence)
    assert leases.release(b)
    a4 = leases.acquire(NAME, "a", ttl=10)
    assert a4 is not None
    fences.append(a4.fence)
    assert fences == sorted(set(fences)), f"fences must strictly grow: {fences}"


def test_fences_of_different_names_are_independent_but_each_grows(
    controller: Controller, clock: FakeClock
) -> None:
    one = controller.leases.acquire("planner", "a", ttl=1)
    other = controller.leases.acquire(NAME, "a", ttl=1)
    assert one is not None and other is not None
    clock.advance(1)
    again = controller.leases.acquire("planner", "b", ttl=1)
    assert again is not None and again.fence > one.fence


def test_renew_by_holder_extends_and_keeps_fence(controller: Controller, clock: FakeClock) -> None:
    held = controller.leases.acquire(NAME, "a", ttl=10)
    assert held is not None
    clock.advance(8)
    renewed = controller.leases.renew(held, ttl=10)
    assert renewed is not None
    assert renewed.fence == held.fence
    assert renewed.expires_at == clock.now + 10
    clock.advance(8)  # past the first expiry, within the renewed one
    assert controller.leases.get(NAME) == renewed
    assert controller.leases.acquire(NAME, "b", ttl=10) is None


def test_renew_after_expiry_is_refused_and_does_not_revive(controller: Controller, clock: FakeClock) -> None:
    held = controller.leases.acquire(NAME, "a", ttl=10)
    assert held is not None
    clock.advance(10)
    assert controller.leases.renew(held, ttl=10) is None
    assert controller.leases.get(NAME) is None
    regained = controller.leases.acquire(NAME, "a", ttl=10)
    assert regained is not None and regained.fence > held.fence


def test_renew_refused_once_the_fence_moved_on(controller: Controller, clock: FakeClock) -> None:
    old = controller.leases.acquire(NAME, "a", ttl=10)
    assert old is not None
    assert controller.leases.release(old)
    new = controller.leases.acquire(NAME, "a", ttl=10)
    assert new is not None
    assert controller.leases.renew(old, ttl=10) is None
    assert controller.leases.get(NAME) == new


def test_release_only_by_the_current_grant(controller: Controller, clock: FakeClock) -> None:
    old = controller.leases.acquire(NAME, "a", ttl=10)
    assert old is not None
    clock.advance(10)
    assert not controller.leases.release(old), "an expired lease is not held"
    new = controller.leases.acquire(NAME, "b", ttl=10)
    assert new is not None
    assert not controller.leases.release(old), "a stale grant cannot release its successor"
    assert controller.leases.get(NAME) == new
    assert controller.leases.release(new)
    assert controller.leases.get(NAME) is None
    assert not controller.leases.release(new), "releasing twice"


def test_get_and_all_hide_expired_and_released(controller: Controller, clock: FakeClock) -> None:
    short = controller.leases.acquire("provider:short", "a", ttl=5)
    long = controller.leases.acquire("provider:long", "a", ttl=50)
    gone = controller.leases.acquire("planner", "b", ttl=50)
    assert short and long and gone
    assert controller.leases.release(gone)
    assert [lease.name for lease in controller.leases.all()] == ["provider:long", "provider:short"]
    clock.advance(5)
    assert controller.leases.get("provider:short") is None
    assert controller.leases.get("planner") is None
    assert controller.leases.get("provider:long") == long
    assert controller.leases.all() == [long]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf")])
def test_ttl_must_be_positive(controller: Controller, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        controller.leases.acquire(NAME, "a", ttl=ttl)
    held = controller.leases.acquire(NAME, "a", ttl=1)
    assert held is not None
    with pytest.raises(ValueError, match="ttl"):
        controller.leases.renew(held, ttl=ttl)


def test_second_handle_sees_leases_of_the_first(make_controller: MakeController, clock: FakeClock) -> None:
    first, second = make_controller(), make_controller()
    held = first.leases.acquire(NAME, "a", ttl=10)
    assert held is not None
    assert second.leases.get(NAME) == held
    assert second.leases.acquire(NAME, "b", ttl=10) is None
    clock.advance(10)
    taken = second.leases.acquire(NAME, "b", ttl=10)
    assert taken is not None and taken.fence > held.fence
    assert first.leases.renew(held, ttl=10) is None


def test_renew_all_renews_each_held_lease_and_refuses_the_lost_ones(controller: Controller, clock: FakeClock) -> None:
    kept = controller.leases.acquire("provider:a", "d1", ttl=10)
    lost = controller.leases.acquire("provider:b", "d1", ttl=10)
    assert kept is not None and lost is not None
    assert controller.leases.release(lost)
    taken = controller.leases.acquire("provider:b", "d2", ttl=10)
    assert taken is not None
    clock.advance(8)
    renewed = controller.leases.renew_all([kept, lost], ttl=10)
    assert renewed[1] is None, "a lease that passed to another holder is not renewed"
    assert renewed[0] is not None and renewed[0].fence == kept.fence and renewed[0].expires_at == clock.now + 10
    clock.advance(8)  # past the first expiry, within the renewed one
    assert controller.leases.get("provider:a") == renewed[0]
    assert controller.leases.get("provider:b") is None, "the other holder's lease was not extended by d1's call"
    assert controller.leases.renew_all([], ttl=10) == []


def test_acquire_all_grants_the_free_ones_and_refuses_those_held_by_another(
    controller: Controller, clock: FakeClock
) -> None:
    mine = controller.leases.acquire("provider:a", "d1", ttl=10)
    theirs = controller.leases.acquire("provider:b", "d2", ttl=10)
    expired = controller.leases.acquire("provider:c", "d2", ttl=2)
    assert mine is not None and theirs is not None and expired is not None
    clock.advance(3)
    got = controller.leases.acquire_all(["provider:a", "provider:b", "provider:c", "provider:d"], "d1", ttl=10)
    assert [lease.name if lease else None for lease in got] == ["provider:a", None, "provider:c", "provider:d"]
    assert got[0] is not None and got[0].fence == mine.fence, "asking again while holding it keeps the fence"
    assert got[2] is not None and got[2].fence > expired.fence, "an expired lease is granted anew, under a higher fence"
    assert all(lease.holder == "d1" and lease.expires_at == clock.now + 10 for lease in got if lease)
    assert controller.leases.get("provider:b") == theirs
    assert controller.leases.acquire_all([], "d1", ttl=10) == []


# --- the lease table: who holds what, who let what lapse, and since when -------------------------


def test_the_table_shows_each_grant_with_its_expiry_and_since_when_and_keeps_a_lapsed_holder(
    make_controller: MakeController, clock: FakeClock
) -> None:
    """A standby needs the moment a lease frees; an operator, who let one lapse and since when."""
    controller, other = make_controller(), make_controller()
    held = controller.leases.acquire("planner", "a", ttl=10)
    dying = controller.leases.acquire(NAME, "a", ttl=10)
    released = controller.leases.acquire("provider:gone", "b", ttl=10)
    assert held and dying and released and controller.leases.release(released)
    clock.advance(4)
    assert controller.leases.renew(held, ttl=10) is not None
    assert controller.leases.acquire("planner", "a", ttl=10) is not None, "asked again by its holder: renewed"
    clock.advance(3)
    rows = {r.name: r for r in other.leases.table()}
    assert list(rows) == sorted(rows)
    planner, provider, gone = rows["planner"], rows[NAME], rows["provider:gone"]
    assert (planner.holder, planner.fence, planner.held, planner.lapsed) == ("a", held.fence, True, False)
    assert planner.expires_in == pytest.approx(7) and planner.free_in == pytest.approx(7)
    assert planner.granted_ago == pytest.approx(7), "a renewal is not a new grant: since when is the grant's"
    assert provider.expires_in == pytest.approx(3) and provider.granted_ago == pytest.approx(7)
    assert (gone.holder, gone.held, gone.lapsed, gone.free_in, gone.expires_in) == ("", False, False, 0.0, None)
    clock.advance(5)  # a's provider lease runs out unrenewed: a holder that stopped, not one that let go
    provider = next(r for r in other.leases.table() if r.name == NAME)
    assert (provider.holder, provider.held, provider.lapsed, provider.free_in) == ("a", False, True, 0.0)
    assert provider.expires_in == pytest.approx(-2), "it lapsed two seconds ago"
    taken = other.leases.acquire(NAME, "b", ttl=10)
    assert taken is not None
    provider = next(r for r in controller.leases.table() if r.name == NAME)
    assert (provider.holder, provider.fence, provider.held) == ("b", taken.fence, True)
    assert provider.granted_ago == pytest.approx(0), "a new grant: since now"


def test_free_in_is_when_the_first_lease_held_by_another_lapses(controller: Controller, clock: FakeClock) -> None:
    assert controller.leases.acquire("provider:x", "a", ttl=10)
    assert controller.leases.acquire("provider:y", "a", ttl=4)
    assert controller.leases.acquire("provider:z", "a", ttl=2)
    clock.advance(1)
    table = controller.leases.table()
    assert free_in(table, ["provider:x", "provider:y"]) == pytest.approx(3)
    assert free_in(table, ["provider:x", "provider:unheld"]) == pytest.approx(9)
    clock.advance(1)
    assert free_in(controller.leases.table(), ["provider:z", "provider:unheld"]) is None, "none of them is held"
