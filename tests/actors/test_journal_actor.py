"""The JournalActor's feed to a joining subscriber: history, then the demand, then CaughtUp."""

from __future__ import annotations

import pytest

from actors.journal import JournalActor
from actors.planner import PlannerActor
from actors.provider import ProviderActor
from messages.commands import (
    TOLD,
    Append,
    Appended,
    CaughtUp,
    Committed,
    DemandChanged,
    HostEvents,
    Interest,
    Subscribe,
    SupplyChanged,
)
from messages.demand import DemandSnapshot, HostEvent, SupplyHost, SupplySnapshot, UnitItem
from messages.facts import InstanceSeen, RequestPlanned, UsageObserved, make_fact
from persistence.controller import open_controller
from state.shared import SharedProjection
from tests.support.fakes import Inbox


def test_a_joining_subscriber_has_the_demand_before_it_is_told_it_caught_up(tmp_path):
    """A planner that plans on CaughtUp must already know what is wanted, or it returns what is in use."""
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    controller.append([make_fact(UsageObserved(resource="vcs", in_use=1), provider="units")])
    controller.put_demand(DemandSnapshot(items=[UnitItem(id="d", resource="vcs", count=3)]))
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    try:
        inbox = Inbox()
        journal.tell(Subscribe(ref=inbox))
        seen = []
        while not seen or not isinstance(seen[-1], CaughtUp):
            seen.append(inbox.get(object))
        kinds = [type(m) for m in seen]
        assert shared.seq == 1, "the history is in the shared projection, not sent"
        assert DemandChanged in kinds, "the demand never reached the joining subscriber before CaughtUp"
        demand = next(m for m in seen if isinstance(m, DemandChanged)).demand
        assert [i.id for i in demand.items] == ["d"]
    finally:
        journal.stop()
        controller.close()


def test_each_subscriber_gets_its_providers_facts_and_the_common_ones_in_log_order():
    """The journal splits a batch once; every share must equal filtering the batch fact by fact."""
    import random

    from actors.journal import _Shares

    rng = random.Random(7)
    names = ["", "a", "b", "c", "d"]
    facts = [make_fact(UsageObserved(resource="r", in_use=i), provider=rng.choice(names), seq=i + 1)
             for i in range(300)]
    shares = _Shares(facts)
    for wanted in (None, frozenset(), frozenset({"a"}), frozenset({"b", "d"}), frozenset({"x"}),
                   frozenset({"a", "b", "c", "d", "x", "y"})):
        expected = [f for f in facts if wanted is None or not f.provider or f.provider in wanted]
        assert shares.of(wanted) == expected, wanted
    only_a = [f for f in facts if f.provider == "a"]
    assert _Shares(only_a).of(frozenset({"a"})) == only_a
    assert _Shares(only_a).of(frozenset({"b"})) == []


@pytest.mark.parametrize("actor", [PlannerActor, ProviderActor], ids=lambda cls: cls.__name__)
def test_every_subscriber_handles_what_it_wants_and_nothing_it_does_not(actor):
    """An actor is told only what it subscribed to, so it handles each of those and keeps no empty handler
    for another's business (a message it has no handler for is logged and dropped)."""
    told = {TOLD[i] for i in actor.WANTS}
    assert told <= set(actor._handlers)
    assert not {TOLD[i] for i in Interest if i not in actor.WANTS} & set(actor._handlers)
    assert CaughtUp in actor._handlers


def test_a_subscriber_is_told_only_what_it_wants(tmp_path):
    """The planner wants the demand, not the scheduler's hosts; an owner the reverse, and only its own hosts."""
    from actors.journal import Feed
    from persistence.port import Changes, Cursor

    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    controller.append([make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1),
                                 provider="a", fact_id="r"),
                       make_fact(InstanceSeen(machine_id="m1", name="node-1", request_id="r", state="running"),
                                 provider="a")])
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    try:
        planner, owner = Inbox(), Inbox()
        journal.tell(Subscribe(ref=planner, wants=PlannerActor.WANTS))
        journal.tell(Subscribe(ref=owner, providers=["a"], wants=ProviderActor.WANTS))
        planner.get(CaughtUp)
        owner.get(CaughtUp)
        journal.tell(Feed(changes=Changes(
            cursor=Cursor(), demand=DemandSnapshot(seq=1, items=[UnitItem(id="d", resource="vcs", count=3)]),
            supply=SupplySnapshot(seq=1, hosts=[SupplyHost(name="node-1", state="idle")], time=1.0),
            host_events=[HostEvent(seq=1, name="node-1", event="joined", time=1.0)])))
        writer = Inbox()
        journal.tell(Append(facts=[make_fact(UsageObserved(resource="vcs", in_use=1), provider="a")],
                            reply_to=writer))
        writer.get(Appended)  # after the subscribers were told of the commit
        assert [type(m) for m in _drain(planner)] == [DemandChanged]
        assert [type(m) for m in _drain(owner)] == [SupplyChanged, HostEvents, Committed]
    finally:
        journal.stop()
        controller.close()


def _drain(inbox: Inbox) -> list:
    out = []
    while not inbox.q.empty():
        out.append(inbox.q.get_nowait())
    return out


def _usage(n: int):
    return make_fact(UsageObserved(resource="vcs", in_use=n), provider="units", now=float(n))


def test_subscribers_hear_of_a_commit_before_its_hook_and_the_writer_after_it(tmp_path):
    """The hook (the mark, the audit log) runs once subscribers were told, and before the writer's reply."""
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    subscriber, writer = Inbox(), Inbox()
    at_hook: list[tuple[bool, bool]] = []

    def hook(facts, _seconds):
        at_hook.append((not subscriber.q.empty(), writer.q.empty()))

    journal = JournalActor.start(controller, on_commit=hook, shared=SharedProjection())
    try:
        journal.tell(Subscribe(ref=subscriber))
        subscriber.get(CaughtUp)
        journal.tell(Append(facts=[_usage(1)], reply_to=writer, tag="w"))
        assert writer.get(Appended).accepted
        assert at_hook == [(True, True)]
    finally:
        journal.stop()
        controller.close()


def test_a_commit_is_fed_with_the_facts_another_writer_committed_before_it_in_log_order(tmp_path):
    """A commit that follows on from what was fed is fed as written; one after another writer's facts is
    fed from the log, those facts first (no tailer here tells the journal of them)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    controller, other = open_controller(url), open_controller(url)
    subscriber, writer = Inbox(), Inbox()
    journal = JournalActor.start(controller, shared=SharedProjection())
    try:
        journal.tell(Subscribe(ref=subscriber))
        subscriber.get(CaughtUp)
        first = _usage(1)
        journal.tell(Append(facts=[first], reply_to=writer, tag="w"))
        writer.get(Appended)
        theirs = other.append([_usage(2)]).accepted
        mine = _usage(3)
        journal.tell(Append(facts=[mine], reply_to=writer, tag="w"))
        writer.get(Appended)
        fed = []
        while not subscriber.q.empty():
            msg = subscriber.q.get_nowait()
            if isinstance(msg, Committed):
                fed += msg.facts
        assert [(f.id, f.seq) for f in fed] == [(first.id, 1), (theirs[0].id, 2), (mine.id, 3)]
        assert fed == controller.read(after=0)
    finally:
        journal.stop()
        controller.close()
        other.close()


class _Refusing:
    """A controller whose disk is full: every append fails, each counted."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self.tries = 0
        self.full = True

    def append(self, facts):
        from messages.errors import ControllerUnavailable

        self.tries += 1
        if self.full:
            raise ControllerUnavailable("controller database c.db: database or disk is full")
        return self.controller.append(facts)

    def __getattr__(self, name):
        return getattr(self.controller, name)


class _Insistent:
    """A writer that sends its facts again the moment it hears they were not committed, as owners do."""

    def __init__(self, journal, facts) -> None:
        self.journal, self.facts, self.replies = journal, facts, []

    def tell(self, msg) -> None:
        self.replies.append(msg)
        if msg.error:
            self.journal.tell(Append(facts=self.facts, reply_to=self, tag="w"))


def test_a_controller_that_refuses_writes_is_tried_after_a_growing_wait_not_at_every_resend(tmp_path, caplog):
    """Issue 28: a full or locked controller was tried again at every writer's pass (every 75 ms)."""
    import time

    from tests.support.daemons import wait_until

    controller = _Refusing(open_controller(f"sqlite:///{tmp_path / 'c.db'}"))
    journal = JournalActor.start(controller, shared=SharedProjection())
    try:
        writer = _Insistent(journal, [_usage(1)])
        journal.tell(Append(facts=writer.facts, reply_to=writer, tag="w"))
        started = time.monotonic()
        wait_until(lambda: controller.tries >= 3, 10, "three tries")
        # Tries at 0, 0.25 and 0.75 s; the fourth not before 1.75 s.
        assert time.monotonic() - started >= 0.7
        tries = controller.tries
        assert tries <= 4, f"{tries} tries"
        said = [r.getMessage() for r in caplog.records if "not committed" in r.getMessage()
                or "still refuses" in r.getMessage()]
        assert len(said) == 1 and "database or disk is full" in said[0], said
        controller.full = False
        wait_until(lambda: writer.replies and not writer.replies[-1].error, 10, "the facts to be committed")
        assert [f.kind for f in controller.controller.read()] == ["usage_observed"]
        assert any("takes writes again" in r.getMessage() for r in caplog.records)
    finally:
        journal.stop()
        controller.controller.close()
