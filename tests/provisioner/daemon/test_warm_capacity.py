"""Drill: a real daemon keeps hosts warm with no demand, replaces one taken by work, and gives back only the surplus.

The test config returns idle hosts at once (``idle_time: 0s``): only warm capacity keeps them.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def _warm(s):
    return [i for i in s.instances.values() if i.item_id == "warm/*"]


def test_a_daemon_keeps_min_idle_hosts_ready_replaces_one_at_work_and_returns_only_the_surplus(start_api):
    api = start_api(policy={"min_idle": 2})
    s = api.wait_state(lambda s: sum(i.state == "running" for i in _warm(s)) == 2, "2 warm hosts running")
    first = next(r.decision for r in s.decisions if r.decision.item == "warm/*" and r.decision.chosen)
    assert first.note == "kept warm: min_idle 2: 0 ready, 0 held, 0 coming"
    names = sorted(i.name for i in _warm(s))
    for name in names:
        api.ok("POST", f"/v1/hosts/{name}/events", "scheduler", json={"event": "idle"})
    s = api.wait_state(lambda s: any("2 idle kept from return" in r.decision.note for r in s.decisions),
                       "the warm hosts idle and kept from return")
    assert sorted(i.state for i in s.instances.values()) == ["idle", "idle"], "idle at once, yet none returned"

    # Work takes one: the daemon orders one more to keep two ready.
    api.ok("POST", f"/v1/hosts/{names[0]}/events", "scheduler", json={"event": "busy"})
    s = api.wait_state(lambda s: len(_warm(s)) == 3 and all(i.state in ("running", "idle", "busy")
                                                            for i in s.instances.values()), "a third warm host")
    third = next(i for i in _warm(s) if i.name not in names)
    api.ok("POST", f"/v1/hosts/{third.name}/events", "scheduler", json={"event": "idle"})

    # The work ends: three idle, one too many. One goes back, two stay.
    api.ok("POST", f"/v1/hosts/{names[0]}/events", "scheduler", json={"event": "idle"})
    s = api.wait_state(lambda s: sum(i.state == "returned" for i in s.instances.values()) == 1,
                       "the surplus host returned")
    assert sorted(i.state for i in s.instances.values()) == ["idle", "idle", "returned"]
