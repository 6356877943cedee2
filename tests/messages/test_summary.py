"""The one line per fact that the daemon logs and the audit log keeps: it must say what happened."""

from __future__ import annotations

from messages.facts import GrantChanged, make_fact, summary


def line(kind: str, state: str, count: int) -> str:
    return summary(make_fact(GrantChanged(kind=kind, grant_id="g1", resource="vcs", state=state, count=count),
                             provider="lic"))


def test_a_grant_line_says_how_many_units_it_is_about():
    assert line("grant_granted", "granted", 5) == "lic: grant g1: 5 vcs granted"
    assert line("grant_returning", "returning", 3) == "lic: grant g1: 3 vcs returning"
    assert line("grant_returned", "returned", 2) == "lic: grant g1: 2 vcs returned"


def test_a_partial_return_says_what_went_back_not_that_it_was_granted():
    """A grant of 5 that gave 3 back holds 2: "3 vcs granted" would say the opposite of what happened."""
    assert line("grant_part_returned", "granted", 3) == "lic: grant g1: 3 vcs given back, the rest still granted"
    assert line("grant_return_timed_out", "granted", 3) == (
        "lic: grant g1: the return of 3 vcs timed out, all still granted")
