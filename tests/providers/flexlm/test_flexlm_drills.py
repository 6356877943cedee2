"""Drills on both ledgers: two clusters racing for one pool, and ``kill -9`` in the middle of a grant or return."""

from __future__ import annotations

import os
import selectors
import signal
import time

import pytest

#: Real processes killed and raced on both ledgers.
pytestmark = pytest.mark.slow

GRANT = {"token": "req-1", "resource": "vcs", "count": 4, "tags": {}}


def held(site) -> dict[str, int]:
    result = site.run("list", {"tags": {}})
    assert result.code == 0, result.err
    return {g["token"]: g["count"] for g in result.out["grants"]}


def lent(*sites) -> int:
    return sum(sum(held(s).values()) for s in sites)


def test_two_clusters_borrowing_at_once_never_exceed_the_pool(make_site, ledger_url):
    """Twelve requests of 3 from two clusters at the same moment, for a pool of 10: exactly 10 are lent.

    Not more (the atomic step holds), and not fewer: a request that finds
    room for less than it asked gets what is left, so only those that find
    the pool full are refused. Each process waits a tenth of a second between
    reading the pool and writing its grant, where a ledger without an atomic
    step would let them all decide on the same total.
    """
    a = make_site(cluster="site-a", hosts=("cn*",), ledger=ledger_url, pool=10)
    b = make_site(cluster="site-b", hosts=("gpu-*",), ledger=ledger_url, pool=10)
    procs = [site.start("request", {**GRANT, "token": f"req-{i}", "count": 3}, FLEXLM_DRILL_PAUSE="borrow:mid=0.1")
             for i in range(6) for site in (a, b)]
    results = [a.finish(p) for p in procs]
    assert sorted({r.code for r in results}) == [0, 69], [r.err for r in results if r.code not in (0, 69)]
    assert lent(a, b) == 10
    by_grant = sum(int(r.out["message"].split()[1]) for r in results if r.code == 0)
    assert by_grant == 10, "each answer says what its grant got, and together they are what the ledger holds"


def wait_for_line(proc, text: str, within: float = 10.0) -> None:
    """Reads the child's stderr until ``text`` appears; a child that never gets there fails the drill in time."""
    deadline = time.monotonic() + within
    seen = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while text.encode() not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None and not sel.select(0):
                raise AssertionError(f"never saw {text!r}; stderr so far: {seen.decode(errors='replace')}")
            if sel.select(min(left, 0.5)):
                chunk = os.read(proc.stderr.fileno(), 4096)
                seen += chunk


def kill_at(site, point: str, action: str, doc: dict) -> None:
    proc = site.start(action, doc, FLEXLM_DRILL_PAUSE=point)
    try:
        wait_for_line(proc, f"paused at {point}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("point, recorded", [("borrow:mid", False), ("borrow:after", True)])
def test_kill_9_during_a_grant_then_the_same_token_borrows_once(make_site, ledger_url, point, recorded):
    site = make_site(ledger=ledger_url, pool=40)
    kill_at(site, point, "request", GRANT)
    # Killed inside the atomic step, nothing was lent; killed after it, the grant stands without an answer.
    assert held(site) == ({"req-1": 4} if recorded else {})
    again = site.run("request", GRANT)
    assert again.code == 0 and again.out["requestId"] == "g-req-1"
    assert held(site) == {"req-1": 4}
    # The pool counts the grant once: 36 of 40 are left for the next request.
    assert site.run("request", {**GRANT, "token": "req-2", "count": 40}).code == 0
    assert held(site) == {"req-1": 4, "req-2": 36}


def test_kill_9_during_a_return_then_the_same_token_gives_back_once(make_site, ledger_url):
    site = make_site(ledger=ledger_url)
    assert site.run("request", GRANT).code == 0
    give = {"token": "ret-1", "resource": "vcs", "count": 2, "grants": [{"token": "req-1", "count": 2}]}
    kill_at(site, "return:mid", "return", give)
    assert held(site) == {"req-1": 4}, "a return killed inside its atomic step gave nothing back"
    assert site.run("return", give).code == 0
    assert site.run("return", give).code == 0
    assert held(site) == {"req-1": 2}
