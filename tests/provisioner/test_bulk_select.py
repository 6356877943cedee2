"""Which hosts a bulk action picks, and the orders it writes for them."""

from __future__ import annotations

import pytest

from messages.facts import InstanceChanged, InstanceSeen, RequestPlanned
from provisioner.surface.bulk import BulkFilter, NoFilter, orders, select, summary
from state.projection import Projection
from tests.support.policy import T0, feed

HOUR = 3600.0


@pytest.fixture
def hosts() -> Projection:
    p = Projection()
    for provider, machine, name, launched, state in (
            ("aws", "i-1", "gpu-1", T0 - 5 * HOUR, "idle"), ("aws", "i-2", "gpu-2", T0 - 1 * HOUR, "busy"),
            ("aws", "i-3", "cpu-1", T0 - 9 * HOUR, "returning"), ("gcp", "g-1", "gpu-3", T0 - 7 * HOUR, "joined"),
            ("gcp", "g-2", "cpu-2", T0 - 8 * HOUR, "returned")):
        feed(p, provider, RequestPlanned(action="request", supply="hosts", template="t", count=1),
             ids=[f"r-{machine}"], now=launched)
        feed(p, provider, InstanceSeen(machine_id=machine, name=name, request_id=f"r-{machine}", state="running",
                                       launched_at=launched), now=launched)
        path = {"idle": ["joined", "idle"], "busy": ["joined", "busy"], "joined": ["joined"],
                "returning": ["joined", "idle", "return_planned", "returning"],
                "returned": ["joined", "idle", "return_planned", "returning", "returned"]}[state]
        for s in path:
            feed(p, provider, InstanceChanged(kind=f"instance_{s}", machine_id=machine, state=s), now=launched)
    return p


def keys(sel) -> list[str]:
    return [i.key for i in sel.hosts]


def test_filters_combine_and_hosts_on_their_way_back_are_left_alone(hosts):
    every = select(hosts.instances.values(), BulkFilter(all=True), T0)
    assert keys(every) == ["gcp/g-1", "aws/i-1", "aws/i-2"] and every.skipped == {"being returned already": 1}
    assert keys(select(hosts.instances.values(), BulkFilter(provider="aws"), T0)) == ["aws/i-1", "aws/i-2"]
    assert keys(select(hosts.instances.values(), BulkFilter(name="gpu-*", older_than="2h"), T0)) == [
        "gcp/g-1", "aws/i-1"]
    assert keys(select(hosts.instances.values(), BulkFilter(state="busy"), T0)) == ["aws/i-2"]


def test_no_filter_is_refused_and_a_state_that_cannot_go_back_is_an_error(hosts):
    with pytest.raises(NoFilter, match="give --state, --provider, --older-than or --name, or --all"):
        select(hosts.instances.values(), BulkFilter(), T0)
    with pytest.raises(ValueError, match="cannot be returned or drained; one of: provisioning, running, joined"):
        BulkFilter(state="returned")


def test_return_is_one_order_per_provider_and_drain_one_per_host_waiting_for_idle(hosts):
    sel = select(hosts.instances.values(), BulkFilter(all=True), T0)
    ret = orders("return", sel.hosts, "operator: x (by ops)")
    assert [(p, o.machines, o.count, o.when_idle) for p, o in ret] == [
        ("aws", ["i-1", "i-2"], 2, False), ("gcp", ["g-1"], 1, False)]
    drain = orders("drain", sel.hosts, "operator: x (by ops)")
    assert [(p, o.machines, o.when_idle) for p, o in drain] == [
        ("gcp", ["g-1"], True), ("aws", ["i-1"], True), ("aws", ["i-2"], True)]
    assert summary("drain", sel, dry_run=True) == "would drain 3 hosts (aws: 2, gcp: 1); left alone: 1 being " \
                                                   "returned already"
