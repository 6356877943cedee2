"""The lease actor's rounds: renew what it holds, take what is free, run an actor exactly while a lease is held."""

from __future__ import annotations

import pytest

from actors.lease import LAPSE_SLACK, LeaseActor, Revocation
from lease.port import Lease
from messages.commands import Tick
from messages.facts import ProviderAdmin, make_fact
from tests.support.lease_world import ROLES, Clock, Role, held, lease_actor


def rounds(actor: LeaseActor, clock: Clock, seconds: float) -> None:
    """Let ``seconds`` pass in ticks of a quarter second, as the ticker would."""
    for _ in range(int(seconds * 4)):
        clock.now += 0.25
        actor.on_receive(Tick(now=clock.now))


def test_a_standby_takes_each_lease_as_it_frees_while_renewing_those_it_holds(world) -> None:
    clock, controller = world
    controller.leases.acquire("provider:units", "a", 4.0)  # a holds one role, and then dies
    b, started = lease_actor(world, "b")
    b.on_start()  # its first round, as when pykka starts it
    assert held(b) == {"planner", "provider:hosts"}
    rounds(b, clock, 3.75)
    assert held(b) == {"planner", "provider:hosts"}, "a's lease has not run out yet"
    rounds(b, clock, 1.0)
    assert held(b) == ROLES, "renewing the two it holds, b took the third once it was free"
    assert {lease.name for lease in controller.leases.all() if lease.holder == "b"} == ROLES
    assert [r.name for r in started] == ["planner", "provider:hosts", "provider:units"], "no role started twice"
    assert not any(r.stopped or r.revoked.is_set() for r in started)


def ticking(actor: LeaseActor, clock: Clock, until: float, every: float = 0.25) -> None:
    """Let time pass until ``until`` as the ticker would: a Tick every ``every`` seconds, and one at each
    moment the actor asked to be woken at."""
    next_tick = clock.now + every
    while True:
        wakes = actor.ticker.wakes
        soonest = min([next_tick, *wakes])
        if soonest > until:
            clock.now = until
            return
        clock.now = soonest
        if soonest in wakes:
            wakes.remove(soonest)
        else:
            next_tick += every
        actor.on_receive(Tick(now=clock.now))


def test_a_standby_asks_again_the_moment_the_holders_lease_lapses_not_at_its_next_round(world) -> None:
    """Issue 34: a takeover came up to ``renew_every`` after the lapse, at the standby's next round."""
    clock, controller = world
    b, started = lease_actor(world, "b")  # ttl 4 s, renew_every 1 s
    b.on_start()
    assert held(b) == ROLES
    b.on_stop()  # b lets go; a takes every role, and dies
    clock.now += 0.3
    for name in ROLES:
        assert controller.leases.acquire(name, "a", 4.0) is not None
    lapse = clock.now + 4.0
    b, started = lease_actor(world, "b")
    clock.now += 0.2
    b.on_start()  # its rounds come every second from now: none near the lapse
    ticking(b, clock, until=lapse - 0.01)
    assert held(b) == set(), "a's leases stand until they lapse"
    ticking(b, clock, until=lapse + LAPSE_SLACK)
    assert held(b) == ROLES, "it holds every lease as they lapse, not at its next round"
    assert all(r.holder == "b" and r.granted_ago == pytest.approx(0) for r in controller.leases.table()
               if r.name in ROLES)
    assert not any(r.stopped for r in started)


def test_a_standby_of_the_same_id_takes_the_instance_lease_the_moment_it_lapses(world) -> None:
    clock, controller = world
    first, _ = lease_actor(world, "a")
    second, _ = lease_actor(world, "a")
    first.on_start()  # and then dies
    lapse = clock.now + 4.0
    clock.now += 0.2
    second.on_start()  # it waits behind the first
    ticking(second, clock, until=lapse - 0.01)
    assert held(second) == set()
    ticking(second, clock, until=lapse + LAPSE_SLACK)
    assert controller.leases.get("instance:a").holder == second.incarnation
    assert held(second) == ROLES


def test_an_owner_holding_all_it_wants_reads_no_lease_table(world, monkeypatch) -> None:
    clock, controller = world
    b, _ = lease_actor(world, "b")
    b.on_start()
    read = []
    monkeypatch.setattr(controller.leases, "table", lambda: read.append(1) or [])
    rounds(b, clock, 3.0)
    assert held(b) == ROLES and read == [] and b.ticker.wakes == []


def test_a_lease_refused_at_renewal_stops_its_actor_and_is_asked_for_again_next_round(world) -> None:
    clock, controller = world
    b, started = lease_actor(world, "b")
    b.on_start()  # its first round, as when pykka starts it
    assert held(b) == ROLES
    hosts = next(r for r in started if r.name == "provider:hosts")
    # The hosts lease passes to a behind b's back (as if it had expired there).
    controller.leases.release(hosts.lease)
    controller.leases.acquire("provider:hosts", "a", 4.0)
    rounds(b, clock, 1.0)
    assert hosts.stopped and hosts.revoked.is_set(), "the actor of a refused lease stops, and acts no more"
    assert held(b) == {"planner", "provider:units"}
    rounds(b, clock, 4.0)  # a's lease runs out in turn
    assert held(b) == ROLES
    fresh = [r for r in started if r.name == "provider:hosts"][-1]
    assert fresh is not hosts and fresh.lease.fence > hosts.lease.fence, "taken again under a higher fence"
    assert not any(r.stopped for r in started if r.name != "provider:hosts")


def test_a_mandate_run_out_between_rounds_is_given_up_and_asked_for_only_next_round(world) -> None:
    clock, controller = world
    b, started = lease_actor(world, "b")
    b.on_start()  # its first round, as when pykka starts it
    clock.now += 3.6  # a stall past ttl - renew_every/2 with no renewal: the lease may be gone
    b.on_receive(Tick(now=clock.now))
    assert all(r.stopped and r.revoked.is_set() for r in started), "every mandate voided itself"
    assert held(b) == set(), "not asked for again in the round that gave it up"
    rounds(b, clock, 1.0)
    assert held(b) == ROLES
    assert len(started) == 6


def test_a_long_round_renews_the_leases_it_took_first_before_taking_more(world) -> None:
    """A thousand actors starting take a while: the first leases must not run out within the round."""
    clock, controller = world
    b, started = lease_actor(world, "b")
    b.acquire_batch = 1
    slow = b.start_role

    def start_slowly(name: str, lease: Lease, revoked: Revocation) -> Role:
        clock.now += 1.5  # each actor takes 1.5 s to start: the round outlasts ttl - renew_every/2
        return slow(name, lease, revoked)

    b.start_role = start_slowly
    b.on_start()  # its first round, as when pykka starts it
    assert held(b) == ROLES
    assert not any(r.revoked.is_set() for r in started), "no mandate ran out during the round"
    first = controller.leases.get(started[0].name)
    assert first is not None and first.expires_at > started[0].lease.expires_at, "renewed mid-round"
    rounds(b, clock, 2.0)
    assert held(b) == ROLES and not any(r.stopped for r in started)


# --- one process per instance id --------------------------------------------------------


def test_a_second_process_with_the_same_id_takes_no_role_and_says_so_once(world, caplog) -> None:
    clock, controller = world
    first, first_roles = lease_actor(world, "a")
    second, second_roles = lease_actor(world, "a")
    first.on_start()
    second.on_start()
    rounds(first, clock, 0)
    for _ in range(20):  # five seconds of rounds of both, each renewing or asking every second
        clock.now += 0.25
        first.on_receive(Tick(now=clock.now))
        second.on_receive(Tick(now=clock.now))
    assert held(first) == ROLES and held(second) == set(), "the second process waits"
    assert second_roles == [], "and started no role"
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "another process holds" in r.message]
    assert len(warnings) == 1, [r.message for r in caplog.records]
    assert "instance a" in warnings[0].message and "instance:a" in warnings[0].message
    assert first.incarnation in warnings[0].message, "it names the process that holds it"
    assert first.incarnation != second.incarnation and first.incarnation.startswith("a@")


def test_the_standby_takes_over_under_new_fences_when_the_first_process_stops_renewing(world, caplog) -> None:
    clock, controller = world
    first, first_roles = lease_actor(world, "a")
    second, second_roles = lease_actor(world, "a")
    first.on_start()
    second.on_start()
    before = {r.name: r.lease.fence for r in first_roles}
    # The first process freezes (or dies): only the second goes on ticking.
    for _ in range(4 * 5):
        clock.now += 0.25
        second.on_receive(Tick(now=clock.now))
    assert held(second) == ROLES, "taken over once the first process's leases ran out"
    assert {r.name: r.lease.fence > before[r.name] for r in second_roles} == dict.fromkeys(ROLES, True)
    assert any("took over lease instance:a" in r.message for r in caplog.records)
    # The first process wakes up: it gives everything up, renews nothing, and waits behind the second.
    first.on_receive(Tick(now=clock.now))
    rounds(first, clock, 2.0)
    assert held(first) == set() and all(r.stopped and r.revoked.is_set() for r in first_roles)
    assert {lease.name: lease.fence for lease in controller.leases.all() if lease.name in ROLES} == \
        {r.name: r.lease.fence for r in second_roles}, "the second process's grants stand"
    assert controller.leases.get("instance:a").holder == second.incarnation


def test_a_late_write_of_the_first_process_is_refused_once_the_second_took_over(world) -> None:
    """Role leases are held under the id: taking over ends those still granted, so no fence is shared."""
    clock, controller = world
    first, first_roles = lease_actor(world, "a")
    first.on_start()
    hosts = next(r for r in first_roles if r.name == "provider:hosts")
    # The first process's instance lease lapses a moment before its roles (on etcd each key is renewed
    # on its own), and a second process with the same id starts in that moment.
    controller.leases.release(controller.leases.get("instance:a"))
    second, second_roles = lease_actor(world, "a")
    second.on_start()
    assert held(second) == ROLES
    assert all(r.lease.fence > f.lease.fence for r, f in zip(second_roles, first_roles)), "fences of its own"
    late = make_fact(ProviderAdmin(kind="provider_paused"), provider="hosts", lease="provider:hosts",
                     fence=hosts.lease.fence, now=clock.now)
    result = controller.append([late])
    assert not result.accepted and result.refused, "a write under the first process's fence is refused"


def test_a_clean_stop_hands_over_at_the_standby_next_round(world) -> None:
    clock, controller = world
    first, _ = lease_actor(world, "a")
    second, _ = lease_actor(world, "a")
    first.on_start()
    second.on_start()
    first.on_stop()
    assert controller.leases.get("instance:a") is None, "released, not left to expire"
    rounds(second, clock, 1.0)
    assert held(second) == ROLES


def test_roles_stop_with_the_instance_lease_when_its_renewal_is_refused(world) -> None:
    clock, controller = world
    a, started = lease_actor(world, "a")
    a.on_start()
    # Its instance lease passes to another process behind its back.
    controller.leases.release(controller.leases.get("instance:a"))
    controller.leases.acquire("instance:a", "a@elsewhere:1/cafe", 4.0)
    rounds(a, clock, 1.0)
    assert held(a) == set() and all(r.stopped and r.revoked.is_set() for r in started)
    assert a.instance is None
