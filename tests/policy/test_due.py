"""When time alone could change a round: a bundle item's packed requests, its joined hosts, its idle hosts."""

from __future__ import annotations

from types import SimpleNamespace

from messages.demand import BundleItem
from messages.facts import Decision, InstanceChanged, InstanceSeen, Load, Order, RequestChanged, RequestPlanned
from policy.due import AFTER, next_change
from policy.settings import PlanSettings
from policy.supply import bundles_in_flight
from state.projection import Projection
from tests.support.policy import T0, demand, feed, hosts, idle_host, view

PROVS = {"a": hosts("a")}  # a-t: 8 CPUs, X86_64
SETTINGS = PlanSettings(join_grace=300, order_timeout=900)
JOB = BundleItem(id="j", count=8, resources={"ncpus": 2})


def state(p: Projection) -> SimpleNamespace:
    return SimpleNamespace(providers=PROVS, resources=p.resources, orders=p.orders, requests=p.requests,
                           instances=p.instances, grants=p.grants, decided=p.decided)


def packed_request(p: Projection, rid: str = "r1") -> None:
    """Two hosts ordered for 8 bundles of ``j`` (4 each), taken up as one request at T0."""
    feed(p, "a", Order(action="request", supply="hosts", template="a-t", count=2,
                       loads=[Load(hosts=2, bundles={"j": 4})]), ids=[f"o-{rid}"])
    feed(p, "a", RequestPlanned(action="request", supply="hosts", order_id=f"o-{rid}", template="a-t", count=2),
         ids=[rid])


def joined(p: Projection, machine: str, at: float, rid: str = "r1") -> None:
    feed(p, "a", InstanceSeen(machine_id=machine, name=f"n-{machine}", request_id=rid, state="running",
                              template="a-t", launched_at=at - 10), now=at - 10)
    feed(p, "a", InstanceChanged(kind="instance_joined", machine_id=machine, state="joined"), now=at)


def in_flight(p: Projection, now: float) -> int:
    return bundles_in_flight(view(p), now, SETTINGS.join_grace, SETTINGS.order_timeout).get("j", 0)


def test_joined_hosts_of_a_packed_request_leave_their_grace_at_moments_a_round_must_see():
    p = Projection()
    packed_request(p)
    joined(p, "m1", T0 + 100)
    joined(p, "m2", T0 + 200)
    now = T0 + 250
    assert in_flight(p, now) == 8
    covered = [Decision(item="j", need=0, in_flight=8)]
    # The whole want rides on the hosts: the first host leaving its grace uncovers 4 bundles.
    assert next_change(demand(JOB), state(p), now, SETTINGS, 600, covered) == T0 + 400
    assert in_flight(p, T0 + 400) == 4
    # Wanting 4, the first host's 4 bundles are surplus: only the second leaving matters.
    half = demand(JOB.model_copy(update={"count": 4}))
    assert next_change(half, state(p), now, SETTINGS, 600, covered) == T0 + 500
    assert in_flight(p, T0 + 500) == 0


def test_unseen_hosts_of_a_packed_request_of_unknown_outcome_count_until_it_times_out():
    p = Projection()
    packed_request(p)
    feed(p, "a", RequestChanged(kind="request_failed", request_id="r1", state="failed", outcome="timeout"),
         now=T0 + 30)
    covered = [Decision(item="j", need=0, in_flight=8)]
    assert in_flight(p, T0 + 900) == 8 and in_flight(p, T0 + 900 + AFTER) == 0
    assert next_change(demand(JOB), state(p), T0 + 60, SETTINGS, 600, covered) == T0 + 900 + AFTER


def test_an_idle_host_a_wanting_bundle_item_could_use_is_not_due_for_reclaim():
    p = Projection()
    idle_host(p, "a", "m1", "a-t", launched=T0, idle_at=T0 + 10)
    wants = Decision(item="j", need=3)
    fits = BundleItem(id="j", count=3, resources={"ncpus": 2})
    assert next_change(demand(fits), state(p), T0 + 20, SETTINGS, 600, [wants]) is None
    too_big = fits.model_copy(update={"resources": {"ncpus": 16}})
    assert next_change(demand(too_big), state(p), T0 + 20, SETTINGS, 600, [wants]) == T0 + 610
