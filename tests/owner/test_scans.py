"""The orphan search and the reclaims check: what the provider holds against what the facts say."""

from __future__ import annotations

from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, RequestChanged, RequestPlanned
from messages.scripts import HeldGrant, Holdings, Machine, Reclaim, Reclaims, RequestStatus, StatusReport
from owner.calls import CheckReclaims, List, ScanStatus
from owner.requests import replan_returns
from owner.scans import Sightings, listed, reclaimed, scan, scanned
from tests.support.facts import T0, commit, kinds, projection
from tests.support.owners import result, settings

JOINED = [(None, InstanceSeen(machine_id="m", name="node-1", state="running")),
          (None, InstanceChanged(kind="instance_joined", machine_id="m", state="joined"))]


def holdings(*machines: str, grants=()) -> object:
    return result("list", output=Holdings(machines=[Machine(machine_id=m, name=m, result="succeed")
                                                    for m in machines], grants=list(grants)))


def test_a_v2_scan_lists_and_checks_reclaims_of_the_hosts_held(hosts):
    p = projection("p", JOINED)
    calls = scan(p, hosts, T0 + 9, busy=()).calls
    assert [c.purpose for c in calls] == [List(T0 + 9), CheckReclaims()]
    assert calls[0].document == {"tags": {"provisioner-provider": "p"}}
    assert calls[1].document == {"machines": [{"name": "node-1", "machineId": "m"}]}
    assert [c.purpose for c in scan(p, hosts, T0 + 9, busy={List, CheckReclaims}).calls] == []


def test_an_lsf_scan_asks_every_request_it_knows_for_its_machines():
    lsf = settings(style="lsf")
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=1)),
                         (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                                               provider_request_id="req-1")),
                         (None, RequestChanged(kind="request_completed", request_id="r", state="complete"))])
    (c, *_) = scan(p, lsf, T0 + 9, busy=()).calls
    assert c.purpose == ScanStatus({"req-1": "r"}) and c.action == "status"


def test_a_held_machine_is_lost_only_once_missing_from_several_lists_over_lost_after(hosts):
    """A cloud's list may miss a machine for a while (eventual consistency): two empty lists are not a loss."""
    p = projection("p", JOINED)
    seen = Sightings()
    for t in (10, 20, 30):  # missing from three lists, but only for 20 s
        fx, seen = listed(p, hosts, T0 + t, holdings(), T0 + t, seen)
        assert not fx.writes
    fx, seen = listed(p, hosts, T0 + 40, holdings("m"), T0 + 40, seen)
    assert not fx.writes and seen.missing == {}, "listed again: absence is judged afresh"
    later = T0 + 50 + hosts.policy.lost_after
    fx, seen = listed(p, hosts, T0 + 50, holdings(), T0 + 50, seen)
    fx, seen = listed(p, hosts, later - 1, holdings(), later - 1, seen)
    assert not fx.writes, "missing from two lists, but not for lost_after yet"
    fx, seen = listed(p, hosts, later, holdings(), later, seen)
    assert kinds(commit(p, "p", fx, later)) == ["instance_lost"]


def test_a_lost_machine_listed_again_is_adopted_back_when_the_scheduler_uses_it_else_an_orphan(hosts):
    for in_cluster, state in ((("node-1",), "joined"), ((), "orphaned")):
        p = projection("p", [*JOINED, (None, InstanceChanged(kind="instance_lost", machine_id="m", state="lost"))])
        fx, _ = listed(p, hosts, T0 + 99, holdings("m"), T0 + 99, Sightings(), in_cluster=in_cluster)
        commit(p, "p", fx, T0 + 99)
        assert p.instances["p/m"].state == state
        assert [i.key for i in p.open("p").instances] == ["p/m"], "live again: it costs, and is watched"


def test_a_machine_still_listed_return_grace_after_its_return_completed_is_an_orphan_again(hosts):
    p = projection("p", [*JOINED,
                         ("r", RequestPlanned(action="return", supply="hosts", count=1, machines=["m"])),
                         (None, InstanceChanged(kind="instance_return_planned", machine_id="m", state="return_planned",
                                                request_id="r")),
                         (None, InstanceChanged(kind="instance_returned", machine_id="m", state="returned",
                                                request_id="r"))])
    ended = p.instances["p/m"].ended_at
    fx, _ = listed(p, hosts, ended + 10, holdings("m"), ended + 10, Sightings())
    assert not fx.writes, "a return may take a moment to show"
    late = ended + hosts.policy.return_grace
    fx, _ = listed(p, hosts, late, holdings("m"), late, Sightings())
    commit(p, "p", fx, late)
    inst = p.instances["p/m"]
    assert inst.state == "orphaned" and "disagree" in inst.reason
    (w,) = replan_returns(p, hosts, late + 1, busy=()).writes
    assert w.payloads[0].machines == ["m"] and w.ids[0] != "r", "returned again, under a new token"


def test_a_machine_recorded_after_the_list_was_taken_is_not_missing(hosts):
    p = projection("p", JOINED)
    fx, seen = listed(p, hosts, T0, holdings(), T0 + 9, Sightings())
    assert not fx.writes and seen.missing == {}


def test_an_unknown_machine_waits_while_a_request_is_unresolved_then_is_an_orphan(hosts):
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=1))])
    fx, seen = listed(p, hosts, T0 + 5, holdings("x"), T0 + 5, Sightings())
    assert not fx.writes and seen.unknown_since == {"x": T0 + 5}
    later = T0 + 5 + hosts.policy.request_timeout
    fx, seen = listed(p, hosts, later, holdings("x"), later, seen)
    commit(p, "p", fx, later)
    assert p.instances["p/x"].state == "orphaned"


def test_a_machine_recorded_failed_but_listed_is_an_orphan(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="failed"))])
    fx, _ = listed(p, hosts, T0 + 5, holdings("m"), T0 + 5, Sightings())
    commit(p, "p", fx, T0 + 5)
    assert p.instances["p/m"].state == "orphaned"


def test_an_unknown_grant_and_a_grant_recorded_failed_are_orphans(units):
    p = projection("p", [("g", RequestPlanned(action="request", supply="units", resource="vcs", count=2)),
                         (None, GrantChanged(kind="grant_failed", grant_id="g", resource="vcs", state="failed"))])
    held = [HeldGrant(token="g", resource="vcs", count=2), HeldGrant(token="zz", resource="vcs", count=3)]
    fx, _ = listed(p, units, T0 + 5, holdings(grants=held), T0 + 5, Sightings())
    commit(p, "p", fx, T0 + 5)
    assert p.grants["g"].state == "orphaned" and p.grants["zz"].count == 3, "named as the provider knows it"


def test_the_orphan_search_by_status_finds_machines_of_our_requests_unknown_to_the_facts():
    lsf = settings(style="lsf")
    p = projection("p", [("r", RequestPlanned(action="request", supply="hosts", template="t", count=1)),
                         (None, RequestChanged(kind="request_submitted", request_id="r", state="submitted",
                                               provider_request_id="req-1")),
                         (None, RequestChanged(kind="request_completed", request_id="r", state="complete"))])
    answer = result("status", output=StatusReport(requests=[RequestStatus(
        request_id="req-1", status="complete", machines=[Machine(machine_id="y", name="y", result="succeed")])]))
    fx, _ = scanned(p, lsf, answer, T0 + 9, Sightings())
    commit(p, "p", fx, T0 + 9)
    assert p.instances["p/y"].state == "orphaned"


def test_a_host_the_provider_takes_back_is_lost_by_id_or_by_name(hosts):
    for taken in (Reclaim(machine_id="m"), Reclaim(name="node-1")):
        p = projection("p", JOINED)
        commit(p, "p", reclaimed(p, hosts, result("reclaims", output=Reclaims(machines=[taken]))), T0 + 9)
        assert p.instances["p/m"].state == "lost"
