"""The daemon's one shared projection: fed from two sides, each fact applied once."""

from __future__ import annotations

from actors.base import Ping
from actors.journal import JournalActor
from messages.commands import Append, CaughtUp, Committed, Interest, Subscribe
from messages.facts import UsageObserved, make_fact
from persistence.controller import open_controller
from state.shared import SharedProjection
from tests.support.fakes import Inbox


def _facts(first: int, last: int) -> list:
    return [make_fact(UsageObserved(resource="vcs", in_use=i), provider="units", seq=i, fact_id=f"f{i}")
            for i in range(first, last + 1)]


def test_facts_arriving_twice_are_applied_and_counted_once():
    shared = SharedProjection()
    shared.apply_all(_facts(1, 5))
    shared.apply_all(_facts(3, 8))  # the read model caught up past what the journal then delivers
    shared.apply_all(_facts(2, 4))
    assert shared.seq == 8
    assert shared.counts == {"usage_observed": 8}
    assert shared.fact_id == "f8"
    with shared.reading() as p:
        assert p.resources["vcs"].in_use == 8


def test_facts_without_a_seq_are_always_applied():
    shared = SharedProjection()
    shared.apply_all(_facts(1, 2))
    shared.apply_all([make_fact(UsageObserved(resource="vcs", in_use=42), provider="units")])
    with shared.reading() as p:
        assert p.resources["vcs"].in_use == 42


def test_a_snapshot_older_than_what_it_holds_is_not_restored():
    class Snap:
        def __init__(self, seq: int) -> None:
            self.seq, self.counts, self.fact_id = seq, {"usage_observed": seq}, f"f{seq}"

        def projection(self):
            other = SharedProjection()
            other.apply_all(_facts(1, self.seq))
            return other.projection

    shared = SharedProjection()
    assert shared.restore(Snap(3))
    assert shared.seq == 3 and shared.fact_id == "f3"
    shared.apply_all(_facts(4, 6))
    assert not shared.restore(Snap(5)), "a restore must never take the projection back"
    assert shared.seq == 6 and shared.counts == {"usage_observed": 6}


def test_a_subscriber_of_the_shared_projection_gets_no_facts_and_caught_up_once_it_holds_them(tmp_path):
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    controller.append([make_fact(UsageObserved(resource="vcs", in_use=i), provider="units") for i in range(5)])
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    try:
        inbox = Inbox()
        journal.tell(Subscribe(ref=inbox))
        seen = []
        while not seen or not isinstance(seen[-1], CaughtUp):
            seen.append(inbox.get(object))
        assert not any(isinstance(m, Committed) for m in seen), "facts are read from the shared projection"
        assert seen[-1].seq == 5 and shared.seq == 5 and shared.caught_up == 5
        with shared.reading() as p:
            assert p.resources["vcs"].in_use == 4
    finally:
        journal.stop()
        controller.close()


def test_an_owner_of_the_shared_projection_gets_no_history_then_its_share_of_each_batch(tmp_path):
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}")
    controller.append([make_fact(UsageObserved(resource="vcs", in_use=1), provider="a")])
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    try:
        owner, planner = Inbox(), Inbox()
        journal.tell(Subscribe(ref=owner, providers=["a"]))
        journal.tell(Subscribe(ref=planner, wants=frozenset({Interest.DEMAND})))
        assert owner.get(CaughtUp).seq == 1 and planner.get(CaughtUp).seq == 1
        journal.tell(Append(facts=[make_fact(UsageObserved(resource="vcs", in_use=2), provider="b"),
                                   make_fact(UsageObserved(resource="vcs", in_use=3), provider="a")]))
        news = owner.get(Committed)
        assert [f.seq for f in news.facts] == [3], "history is read from the projection; news is its share only"
        assert shared.seq == 3, "the projection held the batch before the owner heard of it"
        journal.ask(Ping())
        assert not any(isinstance(m, Committed) for m in _drain(planner)), "a reader of every fact needs no news"
    finally:
        journal.stop()
        controller.close()


def _drain(inbox: Inbox) -> list:
    out = []
    while not inbox.q.empty():
        out.append(inbox.q.get_nowait())
    return out
