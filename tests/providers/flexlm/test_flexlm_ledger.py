"""The pool ledger's rules, and both backends keeping them: idempotent tokens, returns, nothing written when full."""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest

from providers.flexlm.errors import BadInput, PoolExhausted
from providers.flexlm.ledger import open_ledger, rules
from providers.flexlm.ledger.port import BorrowAsk, Grant, PoolView, ReturnAsk

# --- rules -----------------------------------------------------------------------


def grant(token: str, count: int, created: float, pool: str = "P") -> Grant:
    return Grant("a", token, pool, "vcs", count, count, count, {}, created)


def back(count: int, named=None) -> ReturnAsk:
    return ReturnAsk("a", "ret", "P", "vcs", count, named)


def test_room_is_within_the_pool_and_within_what_the_server_can_still_issue():
    view = PoolView("P", {"a": 6, "b": 3}, {})
    assert rules.room(pool=10, cap=50, view=view) == 1
    assert rules.room(pool=40, cap=12, view=view) == 3
    assert rules.room(pool=5, cap=50, view=view) == 0


def test_a_grant_is_as_much_as_fits_in_whole_steps():
    assert rules.grant_size(asked=8, free=5, step=2) == 4
    assert rules.grant_size(asked=3, free=10, step=1) == 3
    assert rules.grant_size(asked=4, free=1, step=2) == 0


def test_a_return_without_names_takes_the_newest_grants_first():
    live = [grant("old", 3, 1.0), grant("new", 2, 2.0), grant("other-pool", 9, 3.0, pool="Q")]
    assert rules.plan_return(live, back(4)) == [("new", 2), ("old", 2)]


def test_a_named_return_takes_only_those_units_and_never_more_than_held_or_asked():
    live = [grant("g1", 5, 1.0), grant("g2", 2, 2.0)]
    assert rules.plan_return(live, back(3, (("g1", 3),))) == [("g1", 3)]
    assert rules.plan_return(live, back(7, (("g1", None), ("g2", None)))) == [("g1", 5), ("g2", 2)]
    assert rules.plan_return(live, back(2, (("g1", None),))) == [("g1", 2)]
    assert rules.plan_return(live, back(4, (("gone", None), ("g2", 9)))) == [("g2", 2)]


# --- backends ----------------------------------------------------------------------


def never(view: PoolView) -> int:
    raise AssertionError("a known token must not be sized again")


def ask(token: str, count: int = 3, cluster: str = "a", hosts=("cn*",)) -> BorrowAsk:
    return BorrowAsk(cluster, token, "VCSRuntime_Net", "vcs", count, tuple(hosts), {"provisioner": "x"})


def give(token: str, count: int, named=None, cluster: str = "a") -> ReturnAsk:
    return ReturnAsk(cluster, token, "VCSRuntime_Net", "vcs", count, named)


@pytest.fixture
def ledger(ledger_url):
    ledger = open_ledger(ledger_url)
    yield ledger
    ledger.close()


def test_a_grant_is_written_once_and_a_repeated_token_finds_it(ledger):
    views = []

    def size(view):
        views.append(view)
        return 3

    first = ledger.borrow(ask("t1"), size)
    assert (first.granted, first.count, first.tags) == (3, 3, {"provisioner": "x"})
    assert ledger.borrow(ask("t1"), never) == first
    assert ledger.grant("a", "t1") == first
    assert ledger.grant("b", "t1") is None, "tokens are the cluster's own"
    assert views == [PoolView("VCSRuntime_Net", {}, {})]


def test_the_pool_view_holds_every_clusters_borrowing_and_hosts(ledger):
    ledger.borrow(ask("t1", cluster="a"), lambda view: 3)
    ledger.borrow(ask("t1", cluster="b", hosts=("gpu-*",)), lambda view: 2)
    seen = []
    ledger.borrow(ask("t2", cluster="a"), lambda view: seen.append(view) or 1)
    assert seen == [PoolView("VCSRuntime_Net", {"a": 3, "b": 2}, {"a": ("cn*",), "b": ("gpu-*",)})]


def test_a_token_repeated_for_another_request_is_refused(ledger):
    ledger.borrow(ask("t1", 3), lambda view: 3)
    with pytest.raises(BadInput, match="token t1 was used for a request of 3 vcs, not 4 vcs"):
        ledger.borrow(ask("t1", 4), never)


def test_a_full_pool_writes_nothing(ledger):
    def full(view):
        raise PoolExhausted("full")

    with pytest.raises(PoolExhausted):
        ledger.borrow(ask("t1"), full)
    assert ledger.grant("a", "t1") is None
    assert ledger.borrow(ask("t1"), lambda view: 2).count == 2


def test_returns_partial_whole_and_repeated(ledger):
    ledger.borrow(ask("t1", 5), lambda view: 5)
    ledger.borrow(ask("t2", 2), lambda view: 2)
    part = ledger.give_back(give("r1", 3, (("t1", 3),)))
    assert (part.takes, part.returned) == ((("t1", 3),), 3)
    assert ledger.give_back(give("r1", 3, (("t1", 3),))) == part, "a repeated return gives nothing back twice"
    assert ledger.grant("a", "t1").count == 2
    with pytest.raises(BadInput, match="token r1 was used for another return"):
        ledger.give_back(give("r1", 2, (("t1", 2),)))

    whole = ledger.give_back(give("r2", 2, (("t2", None),)))
    assert whole.takes == (("t2", 2),)
    assert [(g.token, g.count) for g in ledger.grants("a")] == [("t1", 2)]
    ended = ledger.grant("a", "t2")
    assert (ended.count, ended.granted) == (0, 2) and ended.ended is not None
    assert ledger.returned("a", "r2") == whole

    seen = []
    ledger.borrow(ask("t3", 1), lambda view: seen.append(view.held) or 1)
    assert seen == [{"a": 2}]


def test_a_return_of_grants_no_longer_held_gives_nothing(ledger):
    ledger.borrow(ask("t1", 2), lambda view: 2)
    assert ledger.give_back(give("r1", 2)).returned == 2
    assert ledger.give_back(give("r2", 2, (("t1", None),))).takes == ()


def test_etcd_forgets_ended_grants_and_returns_by_itself(etcd_member):
    """Ended grants and returns carry a lease: only live grants stay in etcd for good."""
    url = etcd_member.url("flexlm-lease")
    ledger = open_ledger(url)
    try:
        ledger.borrow(ask("t1", 2), lambda view: 2)
        ledger.give_back(give("r1", 2))
    finally:
        ledger.close()
    member = etcd_member.members[0]

    def lease_of(key: str) -> int:
        body = json.dumps({"key": base64.b64encode(f"/flexlm-lease/{key}".encode()).decode()}).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{member.client_url}/v3/kv/range", data=body),
                                    timeout=5) as reply:
            (kv,) = json.loads(reply.read())["kvs"]
        return int(kv.get("lease", 0))

    assert lease_of("ended/a/t1") != 0
    assert lease_of("returns/a/r1") != 0
    assert lease_of("pools/VCSRuntime_Net") == 0
