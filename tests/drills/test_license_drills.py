"""License drills: real ``provisioner run`` processes lending FlexNet tokens through ``provisioner-flexlm``.

The license server is a fake ``lmutil`` printing what ``lmstat -a`` prints
(``tests.support.licenses``); the pool ledger is real (SQLite, or etcd). The
drills judge the daemons by the ledger, which is what was actually borrowed
from the pool, and by the totals the controller publishes to the scheduler.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from messages.demand import DemandSnapshot, SupplySnapshot, UnitItem
from providers.flexlm.ledger import open_ledger
from tests.support.daemons import STARTUP, wait_until
from tests.support.licenses import LicenseServer, LicenseSite, ledger_held

pytestmark = pytest.mark.slow


def units(count: int, item: str = "lic") -> DemandSnapshot:
    return DemandSnapshot(items=[UnitItem(id=item, resource="vcs", count=count)])


@pytest.fixture
def server(tmp_path: Path) -> LicenseServer:
    return LicenseServer(tmp_path / "license-server")


@pytest.fixture
def sites(tmp_path: Path) -> Iterator[list[LicenseSite]]:
    """The clusters a drill makes; their daemons are killed at the end and their last words printed."""
    made: list[LicenseSite] = []
    yield made
    for site in made:
        site.close()
        print(site.tails())


# --- 1. borrow on demand, give back what is unused, never below use, never before the minimum hold ---------

IDLE = 2.0
MIN_HOLD = 6.0


def test_borrow_on_demand_and_give_back_only_the_unused_after_idle_time_and_min_hold(tmp_path, server, sites):
    ledger = f"sqlite://{tmp_path}/ledger.db"
    site = LicenseSite(tmp_path / "site-a", server, ledger, base=2, pool=10, min_hold=MIN_HOLD,
                       idle_time=f"{IDLE}s")
    sites.append(site)
    book = open_ledger(ledger)

    def held() -> int:
        """What site-a holds from the pool now; on every look, never less than its hosts use beyond its base."""
        n = ledger_held(ledger).get("site-a", 0)
        in_use = sum(server.holders.values())
        assert n >= in_use - site.base, f"{n} borrowed while {in_use} are in use and {site.base} owned"
        return n

    site.start("a")
    site.c.put_demand(units(5))
    wait_until(lambda: held() == 5 and site.published() == (2, 5, 7), timeout=30,
               what="5 tokens borrowed and the total published as 2 + 5")
    (grant,) = book.grants("site-a")
    assert (grant.requested, grant.granted, grant.count) == (5, 5, 5)

    # Jobs on cn001 and cn002 check out 4 tokens: 2 of the base and 2 of the borrowed ones.
    server.use(cn001=3, cn002=1)
    site.c.put_supply(SupplySnapshot(resources={"vcs": 3}))
    wait_until(lambda: site.state().resources["vcs"].in_use == 4, what="the daemon to see 4 tokens in use")
    row = site.resources_cli()["vcs"]
    assert {k: row[k] for k in ("base", "borrowed", "total", "in_use", "free", "scheduler_in_use", "drift")} == {
        "base": 2, "borrowed": 5, "total": 7, "in_use": 4, "free": 3, "scheduler_in_use": 3, "drift": 1}

    # No more demand: the 3 unused tokens go back, once the grant is held for its minimum hold; the 2 in use stay.
    site.c.put_demand(units(0))
    wait_until(lambda: held() == 2, timeout=MIN_HOLD + 20, what="the 3 unused tokens to go back")
    (partial,) = {tok for _, _, tok in site.calls("return")}
    first = book.returned("site-a", partial)
    assert first is not None and first.takes == ((grant.token, 3),), "a partial return of the one grant"
    assert first.created - grant.created >= MIN_HOLD, "given back before the feature's minimum hold"
    wait_until(lambda: site.published() == (2, 2, 4), what="the total to follow the return")
    # The 2 borrowed tokens in use stay, however long nobody asks for more.
    settle = time.monotonic()
    wait_until(lambda: held() != 2 or time.monotonic() - settle > 3 * IDLE, timeout=30, what="a few reclaim rounds")
    assert held() == 2 and site.published() == (2, 2, 4)

    # The jobs end: the rest goes back once nobody has used it for idle_time.
    fell = time.time()
    server.use()
    wait_until(lambda: held() == 0, timeout=IDLE + 20, what="the last 2 tokens to go back")
    returns = [book.returned("site-a", tok) for tok in dict.fromkeys(tok for _, _, tok in site.calls("return"))]
    assert [r.takes for r in returns] == [((grant.token, 3),), ((grant.token, 2),)]
    assert returns[1].created - fell >= IDLE, "given back before it was unused for idle_time"
    wait_until(lambda: site.published() == (2, 0, 2), what="the total to fall back to the base")
    row = site.resources_cli()["vcs"]
    assert (row["borrowed"], row["total"], row["in_use"]) == (0, 2, 0)
    assert book.grants("site-a") == [], "nothing is left borrowed"
    book.close()


# --- both ledgers --------------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "etcd"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The pool ledger's URL: a SQLite file, or a namespace of its own on the session's etcd member."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/ledger.db"
    return request.getfixturevalue("etcd_cluster").url(f"licpool-{uuid.uuid4().hex[:12]}")


class PoolWatch:
    """Reads the ledger over and over on a thread of its own while clusters borrow: the most ever lent at once."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.most: dict[str, int] = {}
        self.looks = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                held = ledger_held(self.url)
            except BaseException as exc:  # noqa: BLE001 - reported by stop()
                self.error = exc
                return
            self.looks += 1
            if sum(held.values()) > sum(self.most.values()):
                self.most = held
            self._stop.wait(0.02)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error is not None:
            raise self.error
        return self.most


# --- 2. two clusters borrowing from one pool at once never exceed it ----------------------------------------

POOL = 10


def test_two_clusters_borrowing_at_once_never_exceed_the_pool(tmp_path, server, sites, ledger):
    """Two daemons, each with its own controller, ask for 9 tokens each (3 items of 3) from a pool of 10.

    Each provider call waits a moment between reading the pool and writing its
    grant, so the two clusters' decisions overlap; the ledger must still lend
    no more than the pool, and each cluster publish its own base plus what
    it alone borrowed.
    """
    a = LicenseSite(tmp_path / "site-a", server, ledger, name="site-a", hosts=("cn*",), base=2, pool=POOL)
    b = LicenseSite(tmp_path / "site-b", server, ledger, name="site-b", hosts=("gpu-*",), base=1, pool=POOL)
    sites += [a, b]
    for site in (a, b):
        site.extra_env["a"] = {"FLEXLM_DRILL_PAUSE": "borrow:mid=0.2"}
        site.start("a")
    for site in (a, b):
        wait_until(site.described, timeout=STARTUP, what=f"{site.name}'s provider to be described", said=site.tails)
    watch = PoolWatch(ledger)
    demand = DemandSnapshot(items=[UnitItem(id=f"lic{i}", resource="vcs", count=3) for i in range(3)])
    a.c.put_demand(demand)
    b.c.put_demand(demand)

    def settled() -> bool:
        held = ledger_held(ledger)
        for site in (a, b):
            # The ledger is written before the daemon hears of a grant: while the clusters only borrow,
            # no total may count more than the cluster holds in the ledger.
            published = site.published()
            mine = ledger_held(ledger).get(site.name, 0)
            assert published is None or published[1] <= mine, f"{site.name} published {published}, holds {mine}"
        return sum(held.values()) == POOL and all(
            s.published() == (s.base, held.get(s.name, 0), s.base + held.get(s.name, 0))
            and s.borrowed_by_facts() == held.get(s.name, 0) for s in (a, b))

    wait_until(settled, timeout=40, what="the pool to be lent out and both totals published")
    held = ledger_held(ledger)
    assert held.get("site-a", 0) > 0 and held.get("site-b", 0) > 0, f"both clusters borrowed: {held}"
    full = [r.reason for s in (a, b) for r in s.state().requests.values() if r.state == "failed"]
    assert any("no room" in why for why in full), "some request found the pool full"

    # Both give everything back: the pool empties and each total falls back to its base.
    a.c.put_demand(units(0))
    b.c.put_demand(units(0))
    wait_until(lambda: ledger_held(ledger) == {} and a.published() == (2, 0, 2) and b.published() == (1, 0, 1),
               timeout=30, what="everything to go back")
    most = watch.stop()
    assert watch.looks > 10 and sum(most.values()) == POOL, f"the most ever lent at once: {most}"


# --- 3. kill -9 between the provider's answer and its record; the restart lends or gives back nothing twice ----


def test_kill_9_after_the_grant_before_its_record_then_the_restart_borrows_nothing_twice(tmp_path, server, sites,
                                                                                        ledger):
    site = LicenseSite(tmp_path / "site-a", server, ledger, base=2, pool=POOL)
    sites.append(site)
    first = site.start("a", failpoints="request.after_script")
    site.c.put_demand(units(4))
    assert first.wait_dead(timeout=40) == -signal.SIGKILL
    assert "failpoint request.after_script:" in first.text()
    # The provider lent the tokens and said so; the daemon died before recording its answer.
    (call,) = site.calls("request")
    token = call[2]
    assert ledger_held(ledger) == {"site-a": 4}
    assert site.published() in (None, (2, 0, 2)), "nothing borrowed was published yet"
    (req,) = site.state().requests.values()
    assert req.state == "planned" and req.id == token

    again = site.start("a")
    wait_until(lambda: site.published() == (2, 4, 6) and site.borrowed_by_facts() == 4, timeout=30,
               what="the restarted daemon to record the grant and publish its total")
    # The restart repeated the request with the same token, and the ledger found the first grant.
    assert [tok for _, _, tok in site.calls("request")] == [token, token]
    assert site.exits("request") == [("a", token, 0), ("a", token, 0)], "the repeat is answered as the first was"
    book = open_ledger(ledger)
    try:
        (grant,) = book.grants("site-a")
        assert (grant.token, grant.requested, grant.granted, grant.count) == (token, 4, 4, 4)
    finally:
        book.close()
    assert ledger_held(ledger) == {"site-a": 4}
    (g,) = site.state().grants.values()
    assert (g.id, g.state, g.count) == (token, "granted", 4)
    assert again.alive()



def test_kill_9_after_a_partial_return_before_its_record_then_the_restart_gives_back_nothing_twice(
        tmp_path, server, sites, ledger):
    """The same for a return: the ledger names a return by the daemon's token and the grants it names; the
    restart must name them the same, or the provider takes the repeat for another return and refuses it."""
    site = LicenseSite(tmp_path / "site-a", server, ledger, base=2, pool=POOL)
    sites.append(site)
    first = site.start("a", failpoints="return.after_script")
    site.c.put_demand(units(5))
    wait_until(lambda: ledger_held(ledger) == {"site-a": 5} and site.published() == (2, 5, 7), timeout=30,
               what="5 tokens borrowed")
    server.use(cn001=4)
    wait_until(lambda: site.state().resources["vcs"].in_use == 4, what="the daemon to see 4 tokens in use")
    site.c.put_demand(units(0))
    assert first.wait_dead(timeout=40) == -signal.SIGKILL
    assert "failpoint return.after_script:" in first.text()
    # The provider took 3 back; the daemon died before recording it. The facts still hold 5; the total left
    # the 3 out from the return's intent on (units on their way back are not the scheduler's to hand out).
    (call,) = site.calls("return")
    token = call[2]
    assert ledger_held(ledger) == {"site-a": 2}
    assert site.borrowed_by_facts() == 5
    assert site.published() == (2, 2, 4)

    again = site.start("a")
    wait_until(lambda: site.published() == (2, 2, 4) and site.borrowed_by_facts() == 2, timeout=30,
               what="the restarted daemon to record the partial return")
    assert [tok for _, _, tok in site.calls("return")] == [token, token]
    assert site.exits("return") == [("a", token, 0), ("a", token, 0)], "the repeat is answered as the first was"
    book = open_ledger(ledger)
    try:
        (grant,) = book.grants("site-a")
        ret = book.returned("site-a", token)
        assert ret is not None and ret.takes == ((grant.token, 3),) and grant.count == 2
    finally:
        book.close()
    (g,) = site.state().grants.values()
    assert (g.state, g.count) == ("granted", 2)
    assert again.alive()

# --- 4. an owner paused past its lease wakes to find that nothing it writes is published -------------------


def test_a_stale_owners_total_is_refused_and_the_published_total_is_the_standbys(tmp_path, server, sites):
    """Daemon a borrows; the grant's status comes back, and a is frozen before it could record it.

    The drill holds the controller's write lock from before the status answer
    until a is frozen, so a's record of the grant, with the total it raises,
    waits in a's journal under a's fence. a stays frozen past its lease; b
    takes over, finds the grant by its token, borrows more and gives
    everything back. Woken, a sends what it held: the controller must refuse
    it, and the scheduler's total stays the one b's facts give.
    """
    ledger = f"sqlite://{tmp_path}/ledger.db"
    # A lease long enough that a's mandate outlasts the lock the drill holds (a's renewals wait for it too).
    site = LicenseSite(tmp_path / "site-a", server, ledger, base=2, pool=POOL, ttl=8.0)
    sites.append(site)
    # a's status calls answer a second late: the drill takes the write lock meanwhile.
    site.extra_env["a"] = {"DRILL_SLOW_ACTION": "status", "DRILL_SLOW_SECONDS": "1"}
    roles = {"planner", "provider:lic"}
    a = site.start("a")
    a.wait(lambda: {r for r in roles if site.owner(r) == "a"} == roles and site.described(),
           "a to own the planner and the provider")
    b = site.start("b")
    site.c.put_demand(units(4))
    wait_until(lambda: any(r.state == "submitted" for r in site.state().requests.values()), timeout=30,
               what="a's request to be submitted")
    with site.between_writes():
        asked = len(site.calls("status", ended=True))
        wait_until(lambda: len(site.calls("status", ended=True)) > asked, timeout=10,
                   what="the grant's status to come back")
        # a reads the answer and hands its record to its journal, which waits for the lock.
        handed = time.monotonic()
        wait_until(lambda: time.monotonic() - handed > 1.0, what="a moment")
        os.kill(a.proc.pid, signal.SIGSTOP)
        wait_until(a.stopped, timeout=10, what="a to stop")
    assert ledger_held(ledger) == {"site-a": 4} and site.published() == (2, 0, 2)
    wait_until(lambda: {r for r in roles if site.owner(r) == "b"} == roles, timeout=site.ttl + 10,
               what="b to take over")
    taken = site.c.last_seq()
    fences = {lease.name: lease.fence for lease in site.c.leases.all()}

    # b asks the provider how a's submitted request went and records the grant (nothing borrowed twice),
    # then borrows 2 more, then gives everything back.
    wait_until(lambda: site.published() == (2, 4, 6), timeout=30, what="b to record a's grant")
    assert ledger_held(ledger) == {"site-a": 4}
    assert [caller for caller, _, _ in site.calls("request")] == ["a"]
    assert ("b", "status", "-") in site.calls("status")
    site.c.put_demand(units(6))
    wait_until(lambda: ledger_held(ledger) == {"site-a": 6} and site.published() == (2, 6, 8), timeout=30,
               what="b to borrow 2 more")
    site.c.put_demand(units(0))
    # Given back at the pool, and recorded so: the last return's completion is in the facts only after b's
    # next status poll, which a loaded machine may make a moment after the pool let the units go.
    wait_until(lambda: ledger_held(ledger) == {} and site.published() == (2, 0, 2)
               and site.borrowed_by_facts() == 0, timeout=30, what="b to give everything back")

    # Wake a into a world that moved on; give its threads time to send whatever they had in hand.
    a.signal(signal.SIGCONT)
    wait_until(lambda: a.text().count("given up") >= len(roles), timeout=15, what="a to learn it lost its leases")
    wait_until(lambda: re.search(r"fact resource-\S+ refused under lease provider:lic", a.text()), timeout=10,
               what="a's total to be refused")
    settle = time.monotonic()
    wait_until(lambda: time.monotonic() - settle > 1.0, what="a moment")

    late = [f for f in site.c.read(after=taken) if f.lease in fences and f.fence != fences[f.lease]]
    assert not late, f"writes under a lost fence were accepted: {[(f.kind, f.lease, f.fence) for f in late]}"
    totals = [f for f in site.c.read() if f.kind == "resource_total_changed"]
    # a published the base alone, before it borrowed; every total that counts a token is b's.
    assert [(f.payload.total, f.fence) for f in totals if f.fence != fences["provider:lic"]] == [(2, 1)]
    assert [f.payload.total for f in totals][1:3] == [6, 8] and totals[-1].payload.total == 2
    assert site.published() == (2, site.borrowed_by_facts(), 2 + site.borrowed_by_facts()) == (2, 0, 2)
    assert {lease.holder for lease in site.c.leases.all() if not lease.name.startswith("instance:")} == {"b"}
    assert b.alive()
