"""The live owner through its messages: a real journal on SQLite, a scripted provider behind its port."""

from __future__ import annotations

from actors.base import Ping
from actors.lease import Revocation
from actors.provider import ProviderActor
from config.models import PolicyConfig
from messages.commands import Append, Appended, CaughtUp, HostEvents, Subscribe, SupplyChanged, Tick
from messages.demand import HostEvent, SupplyHost, SupplySnapshot
from messages.facts import InstanceSeen, Order, RequestPlanned, make_fact
from messages.scripts import ScriptResult
from owner.scans import SCAN_EVERY_POLLS
from persistence.controller import open_controller
from persistence.shared import SharedProjection
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


def test_a_paced_owner_scans_its_provider_first_after_its_delay_and_never_later_than_a_period(tmp_path):
    period = PolicyConfig().poll_every * SCAN_EVERY_POLLS

    def first_scan(scan_after: float, where) -> float:
        now = [T0]
        with owner(where, now, scan_after=scan_after) as (ref, _, calls, _shared):
            # Caught up: its first reconcile describes the provider (and, unpaced, lists it too).
            first = [calls.next("describe")] + _drain(calls)
            while not any(c.action == "list" for c in first):
                now[0] += 1.0
                ref.tell(Tick(now=now[0]))
                ref.ask(Ping())
                first = _drain(calls)
            return now[0] - T0

    assert first_scan(0.0, tmp_path / "a") == 0.0, "unpaced: at once"
    assert first_scan(30.0, tmp_path / "b") == 30.0
    assert first_scan(10 * period, tmp_path / "c") == period


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
