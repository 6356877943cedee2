"""Operators' actions and the orphan and paging views, on a controller fed with hand-written facts."""

from __future__ import annotations

import pytest

from messages.description import Pool, ProviderDescription, Template
from messages.facts import (
    GrantChanged,
    InstanceChanged,
    InstanceSeen,
    Order,
    ProviderDescribed,
    RequestChanged,
    RequestPlanned,
    make_fact,
)
from persistence.controller import open_controller
from provisioner.read import views
from provisioner.read.model import ReadModel
from provisioner.surface.operations import Conflict, NotFound, Operations

pytestmark = pytest.mark.slow

NOW = 1_800_000_000.0


@pytest.fixture
def cluster(tmp_path):
    c = open_controller(f"sqlite:///{tmp_path / 'state.db'}")
    written: list = []

    def commit(facts):
        result = c.append(facts)
        written.extend(result.accepted)
        return result.accepted

    def add(payload, provider="cloud", fact_id=None, at=NOW - 600):
        c.append([make_fact(payload, provider=provider, fact_id=fact_id, now=at)])

    hosts = ProviderDescription(name="cloud", kind="hosts", cost_per_hour=1.0,
                                templates=[Template(id="big", max_number=9, cost_per_hour=2.0)])
    units = ProviderDescription(name="lic", kind="units", pools=[Pool(resource="vcs", capacity=9,
                                                                      cost_per_unit_hour=3.0)])
    add(ProviderDescribed(description=hosts))
    add(ProviderDescribed(description=units), provider="lic")
    add(RequestPlanned(action="request", supply="hosts", template="big", count=3), fact_id="req-1")
    for machine, name in (("m1", "node-a"), ("m2", "node-b"), ("m3", "node-a")):
        add(InstanceSeen(machine_id=machine, name=name, request_id="req-1", state="running", launched_at=NOW - 3600))
    add(InstanceChanged(kind="instance_busy", machine_id="m2", state="busy"))
    add(InstanceChanged(kind="instance_orphan_found", machine_id="m3", state="orphaned", reason="never joined"))
    add(RequestPlanned(action="request", supply="units", resource="vcs", count=2), provider="lic", fact_id="req-2")
    add(GrantChanged(kind="grant_granted", grant_id="req-2", resource="vcs", state="granted", count=2),
        provider="lic", at=NOW - 1800)
    add(RequestPlanned(action="request", supply="units", resource="vcs", count=1), provider="lic", fact_id="req-3")
    add(RequestChanged(kind="request_timed_out", request_id="req-3", state="timed_out", reason="no answer"),
        provider="lic")
    ops = Operations(ReadModel(c), c, commit, audit=None, clock=lambda: NOW)
    yield ops, written
    c.close()


def test_orphans_list_hosts_grants_and_requests_of_unknown_outcome(cluster):
    ops, _ = cluster
    rows, nxt = ops.list("orphans")
    assert nxt is None
    assert [(r["kind"], r["id"]) for r in rows] == [("instance", "cloud/m3"), ("request", "req-3")]
    assert rows[0]["reason"] == "never joined" and rows[0]["cost_so_far"] == 2.0  # an hour of "big"
    assert rows[1]["resource"] == "vcs" and rows[1]["state"] == "timed_out"


def test_costs_per_provider(cluster):
    ops, _ = cluster
    rows, _ = ops.list("costs")
    assert rows == [{"provider": "cloud", "cost_so_far": 6.0, "cost_per_hour_now": 6.0},
                    {"provider": "lic", "cost_so_far": 3.0, "cost_per_hour_now": 6.0}]


def test_return_an_instance_by_key_machine_id_or_unique_name(cluster):
    ops, written = cluster
    done = ops.return_instance("cloud/m1", "disk errors", "ops")
    assert done["provider"] == "cloud" and done["kind"] == "order"
    order = written[-1]
    assert order.lease == "" and order.provider == "cloud"
    assert order.payload == Order(action="return", supply="hosts", machines=["m1"], count=1,
                                  reason="operator: disk errors (by ops)")
    busy = ops.return_instance("node-b", "", "ops")
    assert "now, busy as it is" in busy["message"], "an operator's return takes a busy host at once"
    assert written[-1].payload.reason == "operator: return by an operator (by ops)"
    with pytest.raises(Conflict, match="names 2 instances"):
        ops.return_instance("node-a", "", "ops")
    with pytest.raises(NotFound):
        ops.return_instance("m9", "", "ops")


def test_return_orphans_of_each_kind(cluster):
    ops, written = cluster
    ops.return_orphan("cloud/m3", "", "ops")
    assert written[-1].payload.machines == ["m3"]
    with pytest.raises(Conflict, match="unknown outcome: nothing known to return"):
        ops.return_orphan("req-3", "", "ops")
    with pytest.raises(NotFound, match="no orphan"):
        ops.return_orphan("cloud/m1", "", "ops")


def test_return_an_orphaned_grant(cluster, tmp_path):
    ops, written = cluster
    ops.controller.append([make_fact(GrantChanged(kind="grant_orphan_found", grant_id="lost-1", resource="vcs",
                                                  state="orphaned", count=4), provider="lic", now=NOW - 60)])
    ops.return_orphan("lost-1", "held for nothing", "ops")
    assert written[-1].provider == "lic"
    assert written[-1].payload == Order(action="return", supply="units", grants=["lost-1"], resource="vcs", count=4,
                                        reason="operator: held for nothing (by ops)")


def test_steer_needs_a_known_provider(cluster):
    ops, written = cluster
    assert ops.steer("lic", "drain", "", "ops")["kind"] == "provider_drained"
    assert written[-1].payload.reason == "operator: drain by an operator (by ops)"
    with pytest.raises(NotFound):
        ops.steer("nowhere", "pause", "", "ops")


def test_paging_places_the_cursor_before_filtering():
    rows = [{"id": str(i), "state": "a" if i % 2 else "b"} for i in range(7)]
    assert views.page(rows, "id", limit=3) == (rows[:3], "2")
    assert views.page(rows, "id", after="2", limit=3) == (rows[3:6], "5")
    assert views.page(rows, "id", after="5", limit=3) == (rows[6:], None)
    assert views.page(rows, "id", after="2", where={"state": "a"}) == ([rows[3], rows[5]], None)
    assert views.page(rows, "id", after="1", where={"state": "a"}, limit=1) == ([rows[3]], "3")
    assert views.page(rows, "id", where={"state": None}) == (rows, None)
    with pytest.raises(views.BadCursor, match="after: no row with id '9'"):
        views.page(rows, "id", after="9")
