"""The scheduler's inputs placed by host name, refusals counted once, each subscriber told what it wants."""

from __future__ import annotations

from actors.inputs import SchedulerInputs
from messages.commands import HostEvents, Interest, SupplyChanged
from messages.demand import DemandSnapshot, HostEvent, SupplyHost, SupplySnapshot, UnitItem
from messages.facts import InstanceSeen, RequestPlanned, make_fact
from persistence.controller import open_controller
from tests.support.facts import shared_of


def _hosts():
    """node-1 live at providers a and b, node-2 at a only."""
    rows = []
    for provider, machines in (("a", ["node-1", "node-2"]), ("b", ["node-1"])):
        rows.append(make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=len(machines)),
                              provider=provider, fact_id=f"r{provider}"))
        rows += [make_fact(InstanceSeen(machine_id=f"{provider}{i}", name=name, request_id=f"r{provider}",
                                        state="running"), provider=provider) for i, name in enumerate(machines)]
    return [f.model_copy(update={"seq": i + 1}) for i, f in enumerate(rows)]


EVENTS = [HostEvent(seq=1, name="node-2", event="joined", time=1.0),
          HostEvent(seq=2, name="node-1", event="joined", time=1.0),
          HostEvent(seq=3, name="node-9", event="joined", time=1.0),
          HostEvent(seq=4, name="node-1", provider="b", event="joined", time=1.0)]


def test_fresh_events_are_placed_and_the_refused_counted(caplog):
    inputs = SchedulerInputs(shared_of(_hosts()))
    placed = inputs.fresh(None, None, EVENTS)
    assert [(e.seq, e.provider) for e in placed.events] == [(1, "a"), (4, "b")]
    assert inputs.refused == {"unknown": 1, "ambiguous": 1}
    assert "node-9" in caplog.text and "live at providers a, b" in caplog.text


def test_events_read_again_for_a_joining_subscriber_are_placed_but_not_counted_again(tmp_path):
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        for ev in EVENTS:
            controller.post_host_event(ev.name, ev.event, ev.time, provider=ev.provider)
        controller.put_demand(DemandSnapshot(items=[UnitItem(id="d", resource="vcs", count=3)]))
        controller.put_supply(SupplySnapshot(hosts=[SupplyHost(name="node-2", state="idle"),
                                                    SupplyHost(name="node-1", state="busy")], time=1.0))
        inputs = SchedulerInputs(shared_of(_hosts()))
        now = inputs.current(controller)
        assert [(e.name, e.provider) for e in now.events] == [("node-2", "a"), ("node-1", "b")]
        assert [(h.name, h.provider) for h in now.supply.hosts] == [("node-2", "a")], "node-1 is live at two"
        assert now.demand is not None and [i.id for i in now.demand.items] == ["d"]
        assert not inputs.refused
    finally:
        controller.close()


def test_each_subscriber_is_told_what_it_wants_and_an_owner_only_its_hosts():
    placed = SchedulerInputs(shared_of(_hosts())).fresh(
        DemandSnapshot(seq=1), SupplySnapshot(seq=1, hosts=[SupplyHost(name="node-2", state="idle")], time=1.0),
        EVENTS)
    planner = {Interest.DEMAND}
    owner = {Interest.FACTS, Interest.SUPPLY, Interest.HOST_EVENTS}
    assert placed.demand_for(planner) is not None and placed.demand_for(owner) is None
    assert placed.supply_for(planner) is None and isinstance(placed.supply_for(owner), SupplyChanged)
    assert placed.events_for(planner, None) is None
    told = placed.events_for(owner, frozenset({"a"}))
    assert isinstance(told, HostEvents) and [e.seq for e in told.events] == [1]
    assert placed.events_for(owner, frozenset({"c"})) is None, "no events of its hosts: nothing told"
