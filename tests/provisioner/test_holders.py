"""Who is who (issue 34): the providers view shows an owner whose lease lapsed, and the daemons view shows
each instance, alive or not, the roles it holds and since when; REST and the CLI read both through
``Operations``."""

from __future__ import annotations

import pytest

from messages.description import ProviderDescription, Template
from messages.facts import LeaseChanged, ProviderAdmin, ProviderDescribed, make_fact
from persistence.sqlite import SqliteController
from provisioner.read.model import ReadModel
from provisioner.surface.operations import Operations
from tests.support.controllers import FakeClock

TTL = 10.0


@pytest.fixture
def world(tmp_path):
    clock = FakeClock()
    c = SqliteController(str(tmp_path / "state.db"), clock=clock)
    for name in ("cloud", "spare"):
        description = ProviderDescription(name=name, kind="hosts", templates=[Template(id="t", max_number=4)])
        c.append([make_fact(ProviderDescribed(description=description), provider=name, now=clock.now)])

    def commit(facts):
        return c.append(facts).accepted

    yield clock, c, Operations(ReadModel(c), c, commit, audit=None, clock=clock)
    c.close()


def said_acquired(c, clock, name: str, holder: str, fence: int) -> None:
    """The fact a lease actor writes once it holds a lease."""
    c.append([make_fact(LeaseChanged(kind="lease_acquired", name=name, holder=holder, fence=fence),
                        provider=name.split(":", 1)[1], now=clock.now)])


def providers(ops) -> dict[str, dict]:
    return {r["name"]: r for r in ops.list("providers")[0]}


def test_an_owner_whose_lease_lapsed_is_shown_as_such_until_another_takes_it(world) -> None:
    clock, c, ops = world
    lease = c.leases.acquire("provider:cloud", "a", TTL)
    said_acquired(c, clock, "provider:cloud", "a", lease.fence)
    row = providers(ops)["cloud"]
    assert (row["owner"], row["owner_state"], row["lease"], row["status"]) == ("a", "held", lease.fence, "active")
    assert providers(ops)["spare"]["owner_state"] == "none" and providers(ops)["spare"]["status"] == "active"
    clock.advance(TTL + 5)  # a is killed: nobody renews its lease, and no instance serving cloud takes it
    row = providers(ops)["cloud"]
    assert (row["owner"], row["owner_state"], row["status"]) == ("a", "lapsed", "owner_lapsed"), \
        "a dead owner is not shown active"
    assert "lease of its owner a lapsed 5 s ago" in row["status_reason"]
    assert [r["name"] for r in ops.list("providers", where={"status": "owner_lapsed"})[0]] == ["cloud"]
    taken = c.leases.acquire("provider:cloud", "b", TTL)
    row = providers(ops)["cloud"]
    assert (row["owner"], row["owner_state"], row["lease"], row["status"]) == ("b", "held", taken.fence, "active")


def test_a_steered_provider_keeps_its_status_and_says_its_owner_lapsed(world) -> None:
    clock, c, ops = world
    c.leases.acquire("provider:cloud", "a", TTL)
    c.append([make_fact(ProviderAdmin(kind="provider_paused", reason="maintenance"), provider="cloud", now=clock.now)])
    clock.advance(TTL)
    row = providers(ops)["cloud"]
    assert (row["status"], row["owner"], row["owner_state"]) == ("paused", "a", "lapsed")


def test_an_owner_that_left_no_record_is_lapsed_by_the_facts(world) -> None:
    """On etcd, a dead holder's key goes with its etcd lease: the facts still name an owner that never let go."""
    clock, c, ops = world
    said_acquired(c, clock, "provider:cloud", "a", 7)
    row = providers(ops)["cloud"]
    assert (row["owner"], row["owner_state"], row["lease"], row["status"]) == ("a", "lapsed", 7, "owner_lapsed")
    assert "lease of its owner a lapsed (" in row["status_reason"]
    c.append([make_fact(LeaseChanged(kind="lease_lost", name="provider:cloud", holder="a", fence=7),
                        provider="cloud", now=clock.now)])
    row = providers(ops)["cloud"]
    assert (row["owner"], row["owner_state"], row["status"]) == ("", "none", "active"), "it said it let go"


def test_the_daemons_view_says_who_holds_which_role_who_stands_by_and_since_when(world) -> None:
    clock, c, ops = world
    start = clock.now
    c.leases.acquire("instance:a", "a@host1:100/cafe", TTL)
    c.leases.acquire_all(["planner", "provider:cloud", "provider:spare"], "a", TTL)
    clock.advance(2)
    c.leases.acquire("instance:b", "b@host2:200/beef", TTL)  # b serves the same: it stands by
    c.leases.acquire("instance:c", "c@host3:300/f00d", TTL)
    c.leases.release(c.leases.acquire("instance:d", "d@host4:400/d00d", TTL))  # d stopped cleanly
    clock.advance(TTL - 1)  # only a and b go on renewing: c stopped without letting go
    for name in ("instance:a", "planner", "provider:cloud", "provider:spare"):
        assert c.leases.acquire(name, "a@host1:100/cafe" if name == "instance:a" else "a", TTL)
    assert c.leases.acquire("instance:b", "b@host2:200/beef", TTL)
    clock.advance(3)
    rows = {r["instance"]: r for r in ops.list("daemons")[0]}
    assert list(rows) == ["a", "b", "c", "d"]
    a, b, cc, d = rows["a"], rows["b"], rows["c"], rows["d"]
    assert (a["state"], a["process"], a["planner"], a["providers"]) == ("active", "host1:100", True, ["cloud", "spare"])
    assert a["since"] == pytest.approx(start) and a["expires_in"] == pytest.approx(TTL - 3)
    assert {r["role"]: (r["state"], r["since"]) for r in a["roles"]} == {
        "planner": ("held", pytest.approx(start)), "provider:cloud": ("held", pytest.approx(start)),
        "provider:spare": ("held", pytest.approx(start))}
    assert (b["state"], b["process"], b["planner"], b["providers"], b["roles"]) == \
        ("standby", "host2:200", False, [], [])
    assert b["since"] == pytest.approx(start + 2)
    assert (cc["state"], cc["process"], cc["expires_in"]) == ("lapsed", "host3:300", None)
    assert cc["since"] == pytest.approx(start + 2 + TTL), "since its lease lapsed"
    assert (d["state"], d["process"], d["since"]) == ("stopped", "", None)
    assert [r["instance"] for r in ops.list("daemons", where={"state": "standby"})[0]] == ["b"]


def test_roles_a_dead_daemon_let_lapse_are_listed_with_it(world) -> None:
    clock, c, ops = world
    c.leases.acquire("instance:a", "a@host1:100/cafe", TTL)
    c.leases.acquire_all(["planner", "provider:cloud"], "a", TTL)
    clock.advance(TTL + 1)  # a was killed, and nobody took its roles
    (row,) = ops.list("daemons")[0]
    assert (row["state"], row["planner"], row["providers"]) == ("lapsed", False, [])
    assert {r["role"]: r["state"] for r in row["roles"]} == {"planner": "lapsed", "provider:cloud": "lapsed"}
