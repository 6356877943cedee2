"""The JournalActor's feed to a joining subscriber: history, then the demand, then CaughtUp."""

from __future__ import annotations

from actors.journal import JournalActor
from messages.commands import CaughtUp, Committed, DemandChanged, Subscribe
from messages.demand import DemandSnapshot, UnitItem
from messages.facts import UsageObserved, make_fact
from persistence.controller import open_controller
from tests.fakes import Inbox


def test_a_joining_subscriber_has_the_demand_before_it_is_told_it_caught_up(tmp_path):
    """A planner that plans on CaughtUp must already know what is wanted, or it returns what is in use."""
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    controller.append([make_fact(UsageObserved(resource="vcs", in_use=1), provider="units")])
    controller.put_demand(DemandSnapshot(items=[UnitItem(id="d", resource="vcs", count=3)]))
    journal = JournalActor.start(controller)
    try:
        inbox = Inbox()
        journal.tell(Subscribe(ref=inbox))
        seen = []
        while not seen or not isinstance(seen[-1], CaughtUp):
            seen.append(inbox.get(object))
        kinds = [type(m) for m in seen]
        assert Committed in kinds
        assert DemandChanged in kinds, "the demand never reached the joining subscriber before CaughtUp"
        demand = next(m for m in seen if isinstance(m, DemandChanged)).demand
        assert [i.id for i in demand.items] == ["d"]
    finally:
        journal.stop()
        controller.close()
