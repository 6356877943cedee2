"""Borrowed units a scheduler's jobs hold, by the scheduler's own count (its bridge's ``license_published``), are
never given back, whatever the license server reports (issue 30)."""

from __future__ import annotations

from messages.facts import LicensePublished, UsageObserved
from policy.reclaim import reclaim
from tests.policy.test_unit_returns import IDLE, NOW, _world
from tests.support.policy import feed, units, view


def test_units_slurms_jobs_hold_stay_though_the_license_server_sees_none_in_use():
    p = _world(base=2, grants=[(4, 3 * IDLE)], uses=[(NOW - 2 * IDLE, 0)])
    provider = {"u": units("u")}
    assert sum(o.count for _, o in reclaim(None, provider, p.resources, view(p), now=NOW, idle_time=IDLE)) == 4
    # Slurm's jobs hold 5 of the 6: only 1 goes back; with all 6 held, none.
    feed(p, "u", LicensePublished(resource="vcs", license="vcs@flex", count=12, reserved=6, in_use=5), now=NOW - 1)
    (order,) = [o for _, o in reclaim(None, provider, p.resources, view(p), now=NOW, idle_time=IDLE)]
    assert order.count == 1
    feed(p, "u", LicensePublished(resource="vcs", license="vcs@flex", count=12, reserved=6, in_use=6), now=NOW)
    feed(p, "u", UsageObserved(resource="vcs", in_use=0), now=NOW)
    assert reclaim(None, provider, p.resources, view(p), now=NOW, idle_time=IDLE) == []
    assert p.resources["vcs"].in_use == 0, "the license server's count is kept as it said"
