"""A scheduler's named nodes (issue 29): one host per wanted name, within the same room; let go, given back."""

from __future__ import annotations

from messages.facts import InstanceChanged, InstanceSeen, NodesChanged, Order, RequestChanged, RequestPlanned
from messages.scripts import StatusReport
from owner.status import status_facts
from policy.budget import BudgetLimits
from policy.catalog import Catalog
from policy.rounds import propose, review_orders
from policy.settings import PlanSettings
from state.projection import Projection
from tests.support.policy import T0, feed, hosts

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def world(max_number: int = 10) -> Projection:
    p = Projection()
    p.providers["aws"] = hosts("aws", max_number=max_number)
    return p


def resume(p: Projection, *names: str, now: float = T0, join_timeout: float | None = None) -> None:
    feed(p, "aws", NodesChanged(kind="nodes_resumed", names=list(names), template="aws-t",
                                join_timeout=join_timeout), now=now)


def round_(p: Projection, now: float = T0 + 1, settings: PlanSettings = SETTINGS):
    return propose(None, p, now, settings, idle_time=60, catalog=Catalog(p.providers))


def take(p: Projection, order_id: str, order: Order, now: float = T0 + 1) -> None:
    """The order written, and taken up by its owner as a request of the same names."""
    feed(p, "aws", order, now=now, ids=[order_id])
    feed(p, "aws", RequestPlanned(action="request", supply="hosts", order_id=order_id, item_id=order.item_id,
                                  template=order.template, count=order.count, names=order.names),
         now=now, ids=[f"{order_id}.1"])


def test_wanted_names_become_one_order_per_template_naming_each_host():
    p = world()
    resume(p, "cloud3", "cloud1", "cloud2")
    prop = round_(p)
    ((provider, order),) = prop.orders
    assert provider == "aws" and (order.template, order.count, order.names) == ("aws-t", 3,
                                                                                ["cloud1", "cloud2", "cloud3"])
    (d,) = prop.decisions
    assert (d.item, d.need, d.in_flight, [c.count for c in d.chosen]) == ("nodes/aws/aws-t", 3, 0, [3])


def test_a_name_already_ordered_requested_or_made_is_not_ordered_again():
    p = world()
    resume(p, "cloud1", "cloud2")
    ((_, order),) = round_(p).orders
    feed(p, "aws", order, now=T0 + 1, ids=["o1"])
    assert round_(p, T0 + 2).orders == [], "an order still pending covers its names"
    resume(p, "cloud1", "cloud2", now=T0 + 3)  # Slurm asks again: nothing more
    take(p, "o1", order, now=T0 + 1)
    assert round_(p, T0 + 4).orders == []
    feed(p, "aws", RequestChanged(kind="request_submitted", request_id="o1.1", state="submitted",
                                  provider_request_id="x"), now=T0 + 5)
    req = p.requests["o1.1"]
    report = StatusReport.model_validate({"requests": [{"request_id": "x", "status": "complete", "machines": [
        {"machine_id": "i-1", "name": "cloud2", "result": "succeed"},
        {"machine_id": "i-2", "name": "ip-10-0-0-9", "result": "succeed"}]}]})
    st = report.requests[0]
    feed(p, "aws", *status_facts("aws", p.instances, p.grants, req, st.status, st.message, st.machines, None),
         now=T0 + 6)
    assert {i.machine_id: (i.name, i.node) for i in p.instances.values()} == {
        "i-1": ("cloud2", "cloud2"), "i-2": ("ip-10-0-0-9", "cloud1")}, "names bound, the provider's kept"
    assert round_(p, T0 + 7).orders == []
    # A host the provider lost stands for nothing: its name is ordered again.
    feed(p, "aws", InstanceChanged(kind="instance_lost", machine_id="i-2", state="lost"), now=T0 + 8)
    ((_, again),) = round_(p, T0 + 9).orders
    assert again.names == ["cloud1"] and again.count == 1


def test_names_beyond_the_room_wait_and_the_decision_says_which():
    p = world(max_number=2)
    resume(p, "cloud1", "cloud2", "cloud3")
    prop = round_(p)
    ((_, order),) = prop.orders
    assert order.names == ["cloud1", "cloud2"]
    (d,) = prop.decisions
    assert d.note == "1 named nodes wait: cloud3" and d.rejected[0].reason == "capacity: room for 2"


def test_the_budget_review_cuts_names_with_the_count():
    p = world()
    resume(p, "cloud1", "cloud2", "cloud3")
    settings = PlanSettings(cooldown=60, join_grace=30, order_timeout=600, budget=BudgetLimits(max_hosts=2))
    prop = round_(p, settings=PlanSettings(cooldown=60, join_grace=30, order_timeout=600))
    approved, _ = review_orders(prop.orders, p, T0 + 1, settings)
    ((_, order),) = approved
    assert (order.count, order.names) == (2, ["cloud1", "cloud2"])


def test_a_name_let_go_has_its_host_returned_and_a_wanted_names_host_is_not_reclaimed_when_idle():
    p = world()
    resume(p, "cloud1", "cloud2")
    ((_, order),) = round_(p).orders
    take(p, "o1", order)
    for mid, node in (("i-1", "cloud1"), ("i-2", "cloud2")):
        feed(p, "aws", InstanceSeen(machine_id=mid, name=node, request_id="o1.1", template="aws-t", state="running",
                                    node=node), now=T0 + 2)
        feed(p, "aws", InstanceChanged(kind="instance_idle", machine_id=mid, state="idle"), now=T0 + 3)
    later = T0 + 3600
    assert round_(p, later).returns == [], "idle a long while, but Slurm powers its nodes down, not the reclaim"
    feed(p, "aws", NodesChanged(kind="nodes_suspended", names=["cloud2"], reason="SuspendProgram"), now=later)
    ((provider, ret),) = round_(p, later + 1).returns
    assert (provider, ret.machines) == ("aws", ["i-2"])
    assert "SuspendProgram" in ret.reason
    assert round_(p, later + 1).orders == [], "a name let go is not ordered"
    # Wanted again while its host still stands: that host serves it, nothing is ordered.
    resume(p, "cloud2", now=later + 2)
    prop = round_(p, later + 3)
    assert prop.orders == [] and prop.returns == []


def test_a_name_let_go_that_was_never_wanted_is_nothing():
    p = world()
    feed(p, "aws", NodesChanged(kind="nodes_suspended", names=["cloud9"]), now=T0)
    assert p.nodes == {} and round_(p).orders == [] and round_(p).returns == []


def test_a_name_given_up_on_while_in_flight_is_ordered_anew_once_its_request_is_called_off_and_resumed():
    p = world()
    resume(p, "cloud1")
    ((_, order),) = round_(p).orders
    take(p, "o1", order)
    feed(p, "aws", RequestChanged(kind="request_submitted", request_id="o1.1", state="submitted",
                                  provider_request_id="x"), now=T0 + 2)
    feed(p, "aws", NodesChanged(kind="nodes_resume_failed", names=["cloud1"]), now=T0 + 3)
    resume(p, "cloud1", now=T0 + 4)
    assert round_(p, T0 + 5).orders == [], "resumed while its request is still open: that request serves it"
    feed(p, "aws", NodesChanged(kind="nodes_resume_failed", names=["cloud1"]), now=T0 + 6)
    feed(p, "aws", RequestChanged(kind="request_called_off", request_id="o1.1", state="called_off"), now=T0 + 7)
    assert round_(p, T0 + 8).orders == [], "given up on and not resumed: nothing ordered"
    resume(p, "cloud1", now=T0 + 9)
    ((_, again),) = round_(p, T0 + 10).orders
    assert again.names == ["cloud1"] and again.count == 1


def test_a_host_lost_after_it_joined_is_not_replaced_until_the_scheduler_resumes_its_node_again():
    p = world()
    resume(p, "cloud1")
    ((_, order),) = round_(p).orders
    take(p, "o1", order)
    feed(p, "aws", InstanceSeen(machine_id="i-1", name="ip-1", node="cloud1", request_id="o1.1", state="running"),
         now=T0 + 2)
    feed(p, "aws", RequestChanged(kind="request_submitted", request_id="o1.1", state="submitted",
                                  provider_request_id="x"),
         RequestChanged(kind="request_completed", request_id="o1.1", state="complete"),
         InstanceChanged(kind="instance_joined", machine_id="i-1", state="joined"), now=T0 + 3)
    feed(p, "aws", InstanceChanged(kind="instance_lost", machine_id="i-1", state="lost"), now=T0 + 4)
    assert round_(p, T0 + 5).orders == [], "its jobs are the scheduler's to requeue: the node is taken down first"
    feed(p, "aws", NodesChanged(kind="nodes_suspended", names=["cloud1"]), now=T0 + 6)
    assert round_(p, T0 + 7).orders == []
    resume(p, "cloud1", now=T0 + 8)
    ((_, again),) = round_(p, T0 + 9).orders
    assert again.names == ["cloud1"] and again.count == 1


def test_a_name_whose_host_never_joined_within_the_schedulers_wait_is_not_ordered_again_until_resumed_anew():
    # The daemon gives up on a host that never joins when the scheduler does (ResumeTimeout); on a loaded
    # machine it may do so before Slurm's ResumeFailProgram comes: the name must not be ordered meanwhile.
    p = world()
    resume(p, "cloud1", "cloud2", join_timeout=40)
    ((_, order),) = round_(p).orders
    take(p, "o1", order)
    feed(p, "aws", InstanceSeen(machine_id="i-1", name="cloud1", node="cloud1", request_id="o1.1", state="running"),
         InstanceSeen(machine_id="i-2", name="cloud2", node="cloud2", request_id="o1.1", state="running"),
         now=T0 + 2)
    feed(p, "aws", RequestChanged(kind="request_submitted", request_id="o1.1", state="submitted",
                                  provider_request_id="x"),
         RequestChanged(kind="request_completed", request_id="o1.1", state="complete"), now=T0 + 3)
    for machine in ("i-1", "i-2"):
        feed(p, "aws", InstanceChanged(kind="instance_orphan_found", machine_id=machine, state="orphaned",
                                       reason="never joined within the scheduler's wait for node 40s"), now=T0 + 42)
    assert round_(p, T0 + 41).orders == [], "hosts still standing cover their names"
    assert round_(p, T0 + 43).orders == [], "Slurm gave up on the resume at the same time: nothing to make"
    resume(p, "cloud1", now=T0 + 50)
    ((_, again),) = round_(p, T0 + 51).orders
    assert again.names == ["cloud1"], "a new resume of one of them orders it, and only it"
