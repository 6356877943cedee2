"""Host events, join timeouts, units (use and totals), descriptions and disabling, edge by edge."""

from __future__ import annotations

from messages.demand import SupplyHost, SupplySnapshot
from messages.description import ProviderDescription
from messages.facts import GrantChanged, InstanceChanged, InstanceSeen, Order, RequestPlanned
from messages.scripts import Usage
from owner.calls import Describe, ReadUsage
from owner.describe import describe, described, disable
from owner.effects import Notes, OrderTaken, ReturnPlanned, TotalPublished, UsageSeen, write
from owner.hosts import being_returned, host_events, watch_joins
from owner.supply import Unlisted, correct
from owner.units import read_usage, totals, used
from tests.support.facts import T0, commit, kinds, projection
from tests.support.owners import result


def test_edges_running_joined_idle_busy_idle_from_host_events(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="running"))])
    for event in ("joined", "idle", "busy", "idle"):
        commit(p, "p", host_events(hosts, [(p.instances["p/m"], event, None)]), T0 + 9)
        assert p.instances["p/m"].state == event


def test_a_host_still_provisioning_that_reports_busy_joins_first(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="provisioning"))])
    written = commit(p, "p", host_events(hosts, [(p.instances["p/m"], "busy", 7)]), T0 + 9)
    assert kinds(written) == ["instance_joined", "instance_busy"] and p.host_event_seq["p"] == 7


def test_an_event_the_table_does_not_allow_changes_nothing(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="failed"))])
    assert not host_events(hosts, [(p.instances["p/m"], "busy", None)])


def test_edge_running_to_orphaned_when_it_never_joins(hosts):
    p = projection("p", [(None, InstanceSeen(machine_id="m", name="n", state="running"))])
    assert not watch_joins(p, hosts, T0 + hosts.policy.join_timeout)
    commit(p, "p", watch_joins(p, hosts, T0 + hosts.policy.join_timeout + 1), T0)
    assert p.instances["p/m"].state == "orphaned"


def test_use_is_read_per_resource_and_recorded_only_when_it_changed(units):
    (c,) = read_usage(units, busy=()).calls
    assert c.purpose == ReadUsage("vcs") and c.document == {"resource": "vcs"}
    assert not read_usage(units, busy={ReadUsage("vcs").slot})
    p = projection("p", [])
    answer = result("usage", output=Usage(resource="vcs", in_use=3, total=10))
    (w,) = used(p, units, "vcs", answer).writes
    assert w.slot == UsageSeen("vcs")
    commit(p, "p", used(p, units, "vcs", answer), T0)
    assert not used(p, units, "vcs", answer), "the same use again writes nothing"


def test_the_total_is_base_plus_borrowed_written_when_either_changed(units):
    p = projection("p", [("g", RequestPlanned(action="request", supply="units", resource="vcs", count=3))])
    (w,) = totals(p, units, busy=()).writes
    assert w.slot == TotalPublished("vcs", 2, 0), "the base alone, before anything is borrowed"
    commit(p, "p", totals(p, units, busy=()), T0)
    assert not totals(p, units, busy=())
    granted = GrantChanged(kind="grant_granted", grant_id="g", resource="vcs", state="granted", count=3)
    commit(p, "p", write(Notes("status"), [granted]), T0 + 1)
    (w,) = totals(p, units, busy=()).writes
    assert (w.payloads[0].borrowed, w.payloads[0].total) == (3, 5)
    assert not totals(p, units, busy={TotalPublished("vcs", 2, 3)}), "not while the same total is being written"


def test_a_description_is_written_only_when_it_changed(hosts):
    p = projection("p", [])
    assert describe(busy=()).calls[0].purpose == Describe() and not describe(busy={Describe})
    desc = ProviderDescription(name="whatever", kind="hosts", priority=3)
    commit(p, "p", described(p, hosts, result("describe", output=desc)), T0)
    assert p.providers["p"].description.name == "p", "the configured name wins"
    assert not described(p, hosts, result("describe", output=desc))
    assert "describe failed" in described(p, hosts, result("describe", "transient", reason="x")).notes[0].text


def test_exit_77_or_78_or_a_script_that_cannot_start_disables_the_provider_once(hosts):
    p = projection("p", [])
    assert not disable(p, hosts, result("request", "transient"), busy=())
    commit(p, "p", disable(p, hosts, result("status", "credentials", reason="denied"), busy=()), T0)
    assert p.providers["p"].status == "disabled" and p.providers["p"].status_reason == "denied"
    assert not disable(p, hosts, result("status", "config"), busy=())


def test_no_host_event_is_written_for_a_host_a_return_being_written_moves_on(hosts):
    """Read against the idle state a return's write under way leaves, a busy event was written after it, a
    step the instance table refuses (the liar soak found such facts, skipped by every replay)."""
    p = projection("p", [
        ("r", RequestPlanned(action="request", supply="hosts", template="t", count=1)),
        (None, InstanceSeen(machine_id="m1", name="node-1", request_id="r", state="running", template="t")),
        (None, InstanceChanged(kind="instance_idle", machine_id="m1", state="idle")),
        ("o", Order(action="return", supply="hosts", machines=["m1"], count=1, reason="idle")),
    ])
    inst = p.instances["p/m1"]
    assert host_events(hosts, [(inst, "busy", 7)]).writes, "with no return under way, busy is written"
    for busy in ({OrderTaken("o")}, {ReturnPlanned(("m1",))}):
        returning = being_returned(p, busy)
        assert returning == {"m1"}
        assert not host_events(hosts, [(inst, "busy", 7)], being_returned=returning).writes
        view = SupplySnapshot(hosts=[SupplyHost(name="node-1", state="busy")], time=T0 + 10)
        fx, _ = correct(p, hosts, view, T0 + 10, Unlisted(), busy)
        assert not fx.writes
