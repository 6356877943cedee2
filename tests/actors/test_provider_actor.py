"""The live owner through its messages: a real journal on SQLite, a scripted provider behind its port."""

from __future__ import annotations

from actors.base import Ping
from actors.lease import Revocation
from actors.pacing import FirstScans
from actors.provider import ProviderActor
from config.models import PolicyConfig
from messages.commands import Append, Appended, CaughtUp, HostEvents, Subscribe, SupplyChanged, Tick
from messages.demand import HostEvent, SupplyHost, SupplySnapshot
from messages.facts import InstanceSeen, Order, RequestPlanned, make_fact
from messages.scripts import Holdings, ScriptResult
from owner.scans import SCAN_EVERY_POLLS
from persistence.controller import open_controller
from state.shared import SharedProjection
from tests.support.fakes import Inbox, ScriptedCalls
from tests.support.owner_actor import CFG, T0, owner


def test_a_run_not_started_is_forgotten_and_tried_again_not_taken_for_a_broken_provider(tmp_path):
    """A mandate that lapsed for a moment (a long pause) and was renewed: the owner goes on as before."""
    now = [T0]
    with owner(tmp_path, now) as (ref, journal, calls, shared):
        journal.tell(Append(facts=[make_fact(Order(action="request", supply="hosts", template="t", count=1),
                                             provider="p", fact_id="o", now=T0)]))
        first = calls.next("request")
        assert first.token == "o.1"
        calls.answer(first, ScriptResult(provider="p", action="request", outcome="not_started",
                                         reason="p request: not started: the provider's lease is no longer held"))
        ref.ask(Ping())
        journal.ask(Ping())
        with shared.reading() as p:
            assert p.requests["o.1"].attempts == 0 and p.providers["p"].status == "active"
        now[0] += 1
        ref.tell(Tick(now=now[0]))
        assert calls.next("request").token == "o.1", "the next reconcile runs it again"


def test_a_paced_owner_scans_at_once_and_later_one_period_after_its_phase_never_later_than_two(tmp_path):
    """``scan_after`` no longer holds the first scan back (turns do that): it sets the phase of the later ones."""
    period = PolicyConfig().poll_every * SCAN_EVERY_POLLS

    def scans(scan_after: float, where) -> list[float]:
        now = [T0]
        at = []
        with owner(where, now, scan_after=scan_after) as (ref, _, calls, _shared):
            calls.next("describe")
            ref.ask(Ping())
            while len(at) < 2:
                for call in _drain(calls):
                    if call.action == "list":
                        at.append(now[0] - T0)
                        calls.answer(call, _LISTED)
                now[0] += 1.0
                ref.tell(Tick(now=now[0]))
                ref.ask(Ping())
            return at

    assert scans(0.0, tmp_path / "a") == [0.0, period]
    assert scans(30.0, tmp_path / "b") == [0.0, 30.0 + period]
    assert scans(10 * period, tmp_path / "c") == [0.0, 2 * period]


def test_an_owner_scans_first_at_its_turn_and_gives_the_turn_back_once_the_answer_is_read(tmp_path):
    """A daemon taking up many providers: each owner's first scan waits for a turn (the only one held by
    another owner), and the turn passes on only once the scan's answer is in and read."""
    now = [T0]
    turns = FirstScans(1)
    assert turns.ask("another owner", Inbox())
    with owner(tmp_path, now, turns=turns) as (ref, _, calls, _shared):
        calls.next("describe")
        ref.ask(Ping())
        for _ in range(3):
            now[0] += 100.0  # beyond a scan period: still no scan without a turn
            ref.tell(Tick(now=now[0]))
            ref.ask(Ping())
        assert [c.action for c in _drain(calls)].count("list") == 0
        assert turns.waiting() == 1
        turns.give_back("another owner")
        listing = calls.next("list")
        assert turns.under_way() == 1, "its turn is held while the list is under way"
        now[0] += 1.0
        calls.answer(listing, _LISTED)
        ref.ask(Ping())
        assert turns.under_way() == 0 and turns.waiting() == 0, "answer read: the turn is given back"


def test_an_owner_stopped_while_it_waits_for_its_turn_leaves_the_queue(tmp_path):
    now = [T0]
    turns = FirstScans(1)
    turns.ask("another owner", Inbox())
    with owner(tmp_path, now, turns=turns) as (ref, _, calls, _shared):
        calls.next("describe")
        ref.ask(Ping())
        assert turns.waiting() == 1
    assert turns.waiting() == 0
    turns.give_back("another owner")
    assert turns.under_way() == 0, "nobody is left to hand the turn to"


#: A provider that holds nothing.
_LISTED = ScriptResult(provider="p", action="list", outcome="ok", output=Holdings(machines=[]))


def _drain(calls: ScriptedCalls) -> list:
    out = []
    while not calls.submitted.empty():
        out.append(calls.submitted.get_nowait())
    return out


def test_host_events_wait_for_the_host_events_write_under_way(tmp_path):
    """The scheduler's view says a running host is busy, and its ``joined`` event comes before that write is
    committed. Read against the state the write is changing, the join would be written after the busy, a
    step the instance table refuses (the liar soak found such facts, skipped by every replay): it waits."""
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}", clock=lambda: T0)
    shared = SharedProjection()
    shared.apply_all([make_fact(payload, provider="p", now=T0, fact_id=fid).model_copy(update={"seq": i + 1})
                      for i, (fid, payload) in enumerate([
                          ("r", RequestPlanned(action="request", supply="hosts", template="t", count=1)),
                          (None, InstanceSeen(machine_id="m1", name="node-1", request_id="r", state="running",
                                              template="t"))])])
    journal, calls = Inbox(), ScriptedCalls()
    lease = controller.leases.acquire("provider:p", "a", 3600)
    ref = ProviderActor.start(CFG, lease, Revocation(float("inf")), journal, Inbox(), PolicyConfig(), [],
                              tmp_path, calls.factory, shared, clock=lambda: T0)
    try:
        journal.get(Subscribe)
        ref.tell(CaughtUp(seq=2))
        ref.tell(SupplyChanged(supply=SupplySnapshot(hosts=[SupplyHost(name="node-1", state="busy")], time=T0)))
        ref.tell(HostEvents(events=[HostEvent(seq=1, name="node-1", event="joined", time=T0)]))
        ref.ask(Ping())
        busy = journal.get(Append)
        assert [f.kind for f in busy.facts] == ["instance_busy"]
        assert _appends(journal) == [], "nothing more is decided on the state being changed"
        shared.apply_all([f.model_copy(update={"seq": 3 + i}) for i, f in enumerate(busy.facts)])
        ref.tell(Appended(tag=busy.tag, accepted=[f.id for f in busy.facts]))
        ref.ask(Ping())
        assert _appends(journal) == [], "a busy host does not join again: nothing to write"
        with shared.reading() as p:
            assert p.instances["p/m1"].state == "busy" and not p.anomalies
    finally:
        ref.stop()
        controller.close()


def _appends(journal: Inbox) -> list:
    out = []
    while not journal.q.empty():
        msg = journal.q.get_nowait()
        if isinstance(msg, Append):
            out.append([f.kind for f in msg.facts])
    return out
