"""Units: grants from a pool, partial and full returns, usage at the source."""

from __future__ import annotations

from tests.support.simprov import Sim, units_config


def _request(sim: Sim, token: str, count: int, resource: str = "vcs") -> str:
    return sim.call("request", {"token": token, "resource": resource, "count": count})["requestId"]


def _grants(sim: Sim) -> dict[str, int]:
    return {g["request_id"]: g["count"] for g in sim.call("list")["grants"]}


def test_grant_after_lead_time_and_idempotent(tmp_path):
    sim = Sim(tmp_path, units_config(lead_time=10))
    rid = _request(sim, "g-1", 4)
    assert _request(sim, "g-1", 4) == rid
    [st] = sim.status(rid)
    assert (st["status"], st["granted"]) == ("running", 0)
    sim.set_now(sim.now + 10)
    [st] = sim.status(rid)
    assert (st["status"], st["granted"]) == ("complete", 4)
    assert sim.call("list") == {"machines": [], "grants": [
        {"token": "g-1", "request_id": rid, "resource": "vcs", "count": 4}]}


def test_pool_capacity_partial_then_unavailable(tmp_path):
    sim = Sim(tmp_path, units_config())
    _request(sim, "g-1", 8)
    partial = _request(sim, "g-2", 5)
    [st] = sim.status(partial)
    assert (st["status"], st["granted"]) == ("complete_with_error", 2)
    assert "2 of 5" in st["message"]
    r = sim.run("request", {"token": "g-3", "resource": "vcs", "count": 1})
    assert r.returncode == 69 and "vcs" in r.stderr
    assert sum(_grants(sim).values()) == 10
    # another pool is separate
    _request(sim, "g-4", 4, resource="xcelium")


def test_return_from_named_grant(tmp_path):
    sim = Sim(tmp_path, units_config())
    a = _request(sim, "g-1", 4)
    b = _request(sim, "g-2", 3)
    ret = sim.call("return", {"token": "r-1", "resource": "vcs", "count": 3, "grants": [a]})["requestId"]
    assert sim.call("return", {"token": "r-1", "resource": "vcs", "count": 3, "grants": [a]})["requestId"] == ret
    [st] = sim.status(ret)
    assert st["status"] == "complete"
    assert _grants(sim) == {a: 1, b: 3}
    assert sim.status(a)[0]["granted"] == 1
    # the freed units can be lent again
    _request(sim, "g-3", 6)


def test_return_by_count_takes_newest_first_and_all_of_a_grant_removes_it(tmp_path):
    sim = Sim(tmp_path, units_config())
    a = _request(sim, "g-1", 2)
    b = _request(sim, "g-2", 3)
    sim.call("return", {"token": "r-1", "resource": "vcs", "count": 4})
    assert _grants(sim) == {a: 1}
    assert sim.status(b)[0]["granted"] == 0


def test_returning_more_than_held_is_complete_with_error(tmp_path):
    sim = Sim(tmp_path, units_config())
    a = _request(sim, "g-1", 2)
    ret = sim.call("return", {"token": "r-1", "resource": "vcs", "count": 5, "grants": [{"request_id": a}]})
    [st] = sim.status(ret["requestId"])
    assert st["status"] == "complete_with_error" and "2 of 5" in st["message"]
    assert _grants(sim) == {}


def test_return_takes_the_configured_time(tmp_path):
    sim = Sim(tmp_path, units_config(return_time=20))
    a = _request(sim, "g-1", 5)
    ret = sim.call("return", {"token": "r-1", "resource": "vcs", "grants": [{"request_id": a, "count": 2}]})
    assert sim.status(ret["requestId"])[0]["status"] == "running"
    assert _grants(sim) == {a: 5}
    sim.set_now(sim.now + 20)
    assert sim.status(ret["requestId"])[0]["status"] == "complete"
    assert _grants(sim) == {a: 3}


def test_usage_reports_the_source(tmp_path):
    sim = Sim(tmp_path, units_config())
    assert sim.call("usage", {"resource": "vcs"}) == {"resource": "vcs", "in_use": 0, "total": 10}
    sim.admin("set-in-use", "vcs", "7")
    assert sim.call("usage", {"resource": "vcs"}) == {"resource": "vcs", "in_use": 7, "total": 10}
    assert sim.call("usage", {"resource": "xcelium"})["in_use"] == 0
    r = sim.run("usage", {"resource": "spice"})
    assert r.returncode == 65 and "spice" in r.stderr


def test_a_partial_return_names_the_grant_by_token_and_a_repeat_returns_once(tmp_path):
    sim = Sim(tmp_path, units_config())
    a = _request(sim, "g-1", 6)
    doc = {"token": "r-1", "resource": "vcs", "count": 4, "grants": [{"token": "g-1", "count": 4}]}
    ret = sim.call("return", doc)["requestId"]
    assert sim.call("return", doc)["requestId"] == ret, "the same token is the same return"
    assert sim.status(ret)[0]["status"] == "complete"
    assert _grants(sim) == {a: 2}, "4 went back once, 2 stay"
    r = sim.run("return", {**doc, "count": 2, "grants": [{"token": "g-1", "count": 2}]})
    assert r.returncode == 65 and "r-1" in r.stderr, "a token names one return"
    assert _grants(sim) == {a: 2}


def test_the_state_keeps_when_each_grant_was_made_and_ended_and_the_use_each_return_met(tmp_path):
    """Ground truth for whoever checks a daemon: a grant's life, and what was checked out when a return set
    units aside (those beyond the units that stay lent were returned while in use)."""
    sim = Sim(tmp_path, units_config(return_time=5))
    a = _request(sim, "g-1", 4)
    b = _request(sim, "g-2", 2)
    sim.admin("set-in-use", "vcs", "3")
    sim.set_now(sim.now + 1)
    ret = sim.call("return", {"token": "r-1", "resource": "vcs", "grants": ["g-1"]})["requestId"]
    dump = sim.dump()
    assert (dump["requests"][ret]["in_use"], dump["requests"][ret]["staying"]) == (3, 2)
    assert dump["grants"][a]["created"] == sim.now - 1 and dump["grants"][a]["ended_at"] is None
    sim.set_now(sim.now + 5)
    dump = sim.dump()
    assert dump["grants"][a]["ended_at"] == sim.now and dump["grants"][b]["ended_at"] is None
