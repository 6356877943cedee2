"""A lease's mandate: revoked at once, and void by itself once the lease could have expired."""

from actors.lease import Revocation


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_valid_until_its_deadline_then_void_by_itself():
    clock = Clock()
    r = Revocation(valid_until=105.0, monotonic=clock)
    assert not r.is_set()
    clock.now = 104.9
    assert not r.is_set()
    clock.now = 105.0
    assert r.is_set(), "a process woken past its TTL finds its mandate void before doing anything"


def test_renewals_extend_and_never_shorten():
    clock = Clock()
    r = Revocation(valid_until=105.0, monotonic=clock)
    r.extend(110.0)
    r.extend(107.0)  # a late, older renewal answer must not shorten it
    clock.now = 109.0
    assert not r.is_set()
    clock.now = 110.0
    assert r.is_set()


def test_revoked_at_once_whatever_the_deadline():
    r = Revocation(valid_until=1e12, monotonic=Clock())
    r.set()
    assert r.is_set()
    r.extend(2e12)
    assert r.is_set(), "a renewal cannot revive a revoked mandate"
