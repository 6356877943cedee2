"""A provider's quota left (``quota`` in describe) limits what the planner asks of it (docs/policy.md#quota)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from messages.demand import BundleItem, HostItem
from messages.description import ProviderDescription, Quota, Template
from messages.facts import InstanceChanged, InstanceSeen, Order, ProviderDescribed, RequestPlanned
from policy.planning import PlanSettings, plan
from state.projection import Projection
from tests.support.policy import T0, demand, feed, hosts, view

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def big(name: str = "ec2", vcpus: int = 4, quota: int | None = 12, max_number: int = 10, template_quota=None):
    t = Template(id=f"{name}-t", max_number=max_number, vcpus=vcpus, attributes={"ncpus": vcpus},
                 quota=Quota(vcpus=template_quota) if template_quota is not None else None)
    return hosts(name, priority=10, templates=[t], quota=Quota(vcpus=quota) if quota is not None else None)


def test_the_quota_left_limits_the_count_and_the_rest_spills_to_the_next_provider():
    providers = {"ec2": big(vcpus=4, quota=12), "other": hosts("other", priority=1)}
    out = plan(demand(HostItem(id="d", count=5)), providers, view(Projection()), T0, SETTINGS)
    assert [(p, o.count) for p, o in out.orders] == [("ec2", 3), ("other", 2)]
    took = next(c for c in out.decisions[0].candidates if c.provider == "ec2")
    assert took.count == 3 and took.why == "quota: 12 vCPUs left"


def described(rec, at: float = T0):
    rec.described_at = at  # what the projection records from the description's fact
    return rec


def running(p: Projection, machine: str, rid: str, launched: float) -> None:
    feed(p, "ec2", RequestPlanned(action="request", supply="hosts", template="ec2-t", count=1), ids=[rid],
         now=launched)
    feed(p, "ec2", InstanceSeen(machine_id=machine, name=f"n-{machine}", request_id=rid, state="running",
                                launched_at=launched, template="ec2-t"), now=launched)


def test_hosts_asked_for_and_not_running_count_against_the_quota_and_running_ones_it_counted_do_not():
    p = Projection()
    # An order not taken up yet (1 host) and a request of 2 hosts, one seen running since before the
    # describe (counted in its quota left already), one not seen yet: 2 hosts of 4 vCPUs in flight.
    feed(p, "ec2", Order(action="request", supply="hosts", item_id="x", template="ec2-t", count=1), ids=["o1"])
    feed(p, "ec2", RequestPlanned(action="request", supply="hosts", template="ec2-t", count=2, item_id="x"),
         ids=["r1"], now=T0 - 600)
    feed(p, "ec2", InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="running",
                                launched_at=T0 - 600, template="ec2-t"), now=T0 - 600)
    out = plan(demand(HostItem(id="d", count=5)), {"ec2": described(big(vcpus=4, quota=16))}, view(p), T0 + 5,
               SETTINGS)
    assert [(q, o.count) for q, o in out.orders] == [("ec2", 2)]
    assert "quota: 8 vCPUs left" in [c.why for c in out.decisions[0].candidates]


def test_a_host_seen_but_not_started_yet_counts_against_the_quota():
    p = Projection()
    feed(p, "ec2", RequestPlanned(action="request", supply="hosts", template="ec2-t", count=1), ids=["r1"],
         now=T0 - 600)
    feed(p, "ec2", InstanceSeen(machine_id="m1", name="n1", request_id="r1", state="provisioning",
                                launched_at=T0 - 600, template="ec2-t"), now=T0 - 600)
    out = plan(demand(HostItem(id="d", count=5)), {"ec2": described(big(vcpus=4, quota=12))}, view(p), T0 + 5,
               SETTINGS)
    assert [o.count for _, o in out.orders] == [2]


def test_a_host_launched_after_the_describe_counts_though_running_and_one_ended_since_gives_its_vcpus_back():
    p = Projection()
    running(p, "late", "r1", launched=T0 + 300)  # the describe at T0 did not count it
    out = plan(demand(HostItem(id="d", count=5)), {"ec2": described(big(vcpus=4, quota=12))}, view(p), T0 + 600,
               SETTINGS)
    assert [o.count for _, o in out.orders] == [2]

    p = Projection()
    running(p, "old", "r1", launched=T0 - 3600)  # counted by the describe, then lost: its 4 vCPUs are free again
    feed(p, "ec2", InstanceChanged(kind="instance_lost", machine_id="old", state="lost"), now=T0 + 300)
    running(p, "gone", "r2", launched=T0 - 3600)  # ended before the describe: not in its count, nothing back
    feed(p, "ec2", InstanceChanged(kind="instance_lost", machine_id="gone", state="lost"), now=T0 - 300)
    out = plan(demand(HostItem(id="d", count=5)), {"ec2": described(big(vcpus=4, quota=8))}, view(p), T0 + 600,
               SETTINGS)
    assert [o.count for _, o in out.orders] == [3]
    assert out.decisions[0].candidates[0].why == "quota: 12 vCPUs left"


def test_the_projection_records_when_a_description_was_written():
    p = Projection()
    feed(p, "ec2", ProviderDescribed(description=big().description), now=T0 + 7)
    assert p.provider("ec2").described_at == T0 + 7


def test_no_quota_left_orders_nothing_and_says_why():
    out = plan(demand(HostItem(id="d", count=2)), {"ec2": big(vcpus=4, quota=3)}, view(Projection()), T0, SETTINGS)
    assert out.orders == []
    d = out.decisions[0]
    assert [(r.provider, r.reason) for r in d.rejected] == [("ec2", "quota: 3 vCPUs left (a ec2-t host takes 4)")]
    assert "2 could not be placed" in d.note
    assert out.unplaced[0].reason == "ec2: quota: 3 vCPUs left (a ec2-t host takes 4)"

    out = plan(demand(HostItem(id="d", count=2)), {"ec2": big(quota=0)}, view(Projection()), T0, SETTINGS)
    assert out.orders == [] and out.decisions[0].rejected[0].reason == "quota: 0 vCPUs left"


def test_items_of_one_round_share_the_quota():
    out = plan(demand(HostItem(id="a", count=2), HostItem(id="b", count=2)), {"ec2": big(vcpus=4, quota=12)},
               view(Projection()), T0, SETTINGS)
    assert [(o.item_id, o.count) for _, o in out.orders] == [("a", 2), ("b", 1)]
    assert out.decisions[1].candidates[0].why == "quota: 4 vCPUs left"


def test_a_templates_own_quota_and_the_providers_both_hold_the_tighter_wins():
    providers = {"ec2": big(vcpus=2, quota=100, template_quota=6)}
    out = plan(demand(HostItem(id="d", count=5)), providers, view(Projection()), T0, SETTINGS)
    assert [o.count for _, o in out.orders] == [3]
    assert out.decisions[0].candidates[0].why == "quota: 6 vCPUs left for ec2-t"


def test_without_a_quota_the_plan_is_as_it_was():
    with_vcpus = {"ec2": big(vcpus=4, quota=None)}
    out = plan(demand(HostItem(id="d", count=5)), with_vcpus, view(Projection()), T0, SETTINGS)
    assert [o.count for _, o in out.orders] == [5]
    assert out.decisions[0].candidates[0].why == ""
    plain = plan(demand(HostItem(id="d", count=5)), {"ec2": hosts("ec2", priority=10)}, view(Projection()), T0,
                 SETTINGS)
    assert [o.count for _, o in plain.orders] == [5]


def test_a_quota_over_a_template_that_does_not_say_its_vcpus_is_refused_naming_it():
    with pytest.raises(ValidationError, match=r"templates\[0\] \(t\): vcpus is needed under the provider's quota"):
        ProviderDescription(name="p", kind="hosts", quota=Quota(vcpus=4), templates=[Template(id="t", max_number=1)])
    with pytest.raises(ValidationError, match=r"templates\[0\] \(t\): vcpus is needed under its quota"):
        ProviderDescription(name="p", kind="hosts",
                            templates=[Template(id="t", max_number=1, quota=Quota(vcpus=4))])


def test_a_providers_quota_naming_templates_holds_for_those_only():
    std = Template(id="std", max_number=10, vcpus=4)
    gpu = Template(id="gpu", max_number=10, vcpus=8, cost_per_hour=5.0)  # dearer: std is tried first
    rec = described(hosts("ec2", templates=[std, gpu], quota=Quota(vcpus=8, templates=["std"])))
    out = plan(demand(HostItem(id="a", count=3, select={}), HostItem(id="b", count=3)), {"ec2": rec},
               view(Projection()), T0, SETTINGS)
    took = sorted((o.template, o.count) for _, o in out.orders)
    assert took == [("gpu", 1), ("gpu", 3), ("std", 2)]


def test_a_providers_quota_naming_a_template_it_has_not_is_refused():
    with pytest.raises(ValidationError, match=r"quota.templates: no template 'x'"):
        ProviderDescription(name="p", kind="hosts", quota=Quota(vcpus=4, templates=["x"]),
                            templates=[Template(id="t", max_number=1)])
    with pytest.raises(ValidationError, match=r"templates\[0\] \(t\): quota.templates: only the provider's"):
        ProviderDescription(name="p", kind="hosts", templates=[
            Template(id="t", max_number=1, vcpus=1, quota=Quota(vcpus=4, templates=["t"]))])
    # A template the provider's quota does not name needs no vcpus.
    ProviderDescription(name="p", kind="hosts", quota=Quota(vcpus=4, templates=["t"]),
                        templates=[Template(id="t", max_number=1, vcpus=2), Template(id="u", max_number=1)])


def test_warm_capacity_and_bundles_take_their_hosts_within_the_quota_too():
    from policy.warm import WarmPolicy, WarmRule

    warm = PlanSettings(cooldown=60, join_grace=30, order_timeout=600,
                        warm=WarmPolicy(rules=(WarmRule(provider=None, template=None, min_idle=5),)))
    out = plan(None, {"ec2": described(big(vcpus=4, quota=8))}, view(Projection()), T0, warm)
    assert [(o.item_id, o.count) for _, o in out.orders] == [("warm/*", 2)]
    assert "quota: 8 vCPUs left" in [c.why for c in out.decisions[0].candidates]

    bundles = plan(demand(BundleItem(id="b", count=5, resources={"ncpus": 4})), {"ec2": described(big(quota=8))},
                   view(Projection()), T0, SETTINGS)
    assert sum(o.count for _, o in bundles.orders) == 2
