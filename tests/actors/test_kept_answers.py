"""An answered call is never made again because its record failed (issue 28, case 1).

The controller here is a real SQLite file that another connection holds
locked, as another process would: every write the owner's journal tries
fails ("database is locked") until the lock goes. The owner must keep the
answer, call nothing again, and record it once the controller takes it,
also when it lost its lease meanwhile and this process took the lease back.
"""

from __future__ import annotations

import queue
import sqlite3
from contextlib import contextmanager

from actors.answers import KeptAnswers
from actors.base import Ping
from actors.journal import JournalActor
from actors.lease import Revocation
from actors.provider import ProviderActor
from config.models import PolicyConfig, ProviderConfig
from messages.commands import Append, Tick
from messages.facts import RequestPlanned, make_fact
from persistence.replay import replay
from persistence.sqlite import SqliteController
from state.shared import SharedProjection
from tests.support.daemons import wait_until
from tests.support.fakes import Inbox, ScriptedCalls
from tests.support.owner_actor import T0, owner
from tests.support.owners import accepted

LSF = ProviderConfig.model_validate({"name": "p", "kind": "hosts", "script": {"style": "lsf", "path": "x"}})
V2 = ProviderConfig.model_validate({"name": "p", "kind": "hosts", "script": {"style": "v2", "path": "x"}})


@contextmanager
def locked(path):
    """Another process's write transaction on the controller's file: every write waits, then fails."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def settle(ref, journal) -> None:
    for _ in range(2):
        ref.ask(Ping())
        journal.ask(Ping())


def intent(request_id: str = "r1") -> Append:
    return Append(facts=[make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=4),
                                   provider="p", fact_id=request_id, now=T0)])


def no_more_calls(calls: ScriptedCalls, action: str) -> list:
    made = []
    while True:
        try:
            call = calls.submitted.get_nowait()
        except queue.Empty:
            return made
        if call.action == action:
            made.append(call)


def passes(ref, journal, now: list[float], n: int, every: float = 5.0) -> None:
    """``n`` of the owner's passes, time moving on, the controller refusing every write meanwhile."""
    for _ in range(n):
        now[0] += every
        ref.tell(Tick(now=now[0]))
        settle(ref, journal)


def test_an_lsf_request_answered_while_the_controller_refuses_writes_is_not_called_again(tmp_path):
    now = [T0]
    db = tmp_path / "c.db"
    with owner(tmp_path, now, cfg=LSF, busy_timeout=0.05) as (ref, journal, calls, shared):
        settle(ref, journal)
        journal.tell(intent())
        call = calls.next("request")
        with locked(db):
            calls.answer(call, accepted("lsf-42"))
            passes(ref, journal, now, 8)
            wait_until(lambda: journal.proxy().refusals.get().failures >= 2, 10, "the journal to try again")
            assert no_more_calls(calls, "request") == [], "the answered call was made again"
            with shared.reading() as p:
                assert p.requests["r1"].state == "planned"
        # The controller takes writes again: the kept answer is recorded, the call still made once.
        wait_until(lambda: shared.projection.requests["r1"].state == "submitted", 10, "the answer to be recorded")
        passes(ref, journal, now, 3)
        assert no_more_calls(calls, "request") == []
        req = replay(SqliteController(str(db))).requests["r1"]
        assert (req.state, req.provider_request_id) == ("submitted", "lsf-42")


def test_a_v2_request_answered_while_the_controller_refuses_writes_is_called_once_not_at_every_pass(tmp_path):
    now = [T0]
    with owner(tmp_path, now, cfg=V2, busy_timeout=0.05) as (ref, journal, calls, shared):
        settle(ref, journal)
        journal.tell(intent())
        call = calls.next("request")
        with locked(tmp_path / "c.db"):
            calls.answer(call, accepted("ec2-7"))
            passes(ref, journal, now, 8)
            assert no_more_calls(calls, "request") == []
        wait_until(lambda: shared.projection.requests["r1"].state == "submitted", 10, "the answer to be recorded")
        assert shared.projection.requests["r1"].provider_request_id == "ec2-7"


def test_a_kept_answer_survives_a_lost_and_retaken_lease_in_the_same_process(tmp_path):
    """The owner loses its lease while the answer is unrecorded; the next owner this process starts (a new
    fence) records it instead of failing the request as an unknown outcome, and calls nothing."""
    now = [T0]
    db = tmp_path / "c.db"
    controller = SqliteController(str(db), clock=lambda: now[0], busy_timeout=0.05)
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    answers = KeptAnswers()

    def start_owner(lease):
        calls = ScriptedCalls()
        ref = ProviderActor.start(LSF, lease, Revocation(float("inf")), journal, Inbox(), PolicyConfig(), [],
                                  tmp_path, calls.factory, shared, clock=lambda: now[0], answers=answers)
        return ref, calls

    try:
        first = controller.leases.acquire("provider:p", "a", 3600)
        ref, calls = start_owner(first)
        settle(ref, journal)
        journal.tell(intent())
        call = calls.next("request")
        with locked(db):
            calls.answer(call, accepted("lsf-9"))
            passes(ref, journal, now, 3)
            ref.stop()  # the lease lapsed: its actor stops, as the lease actor stops it
        assert answers.count() == {"p": 1}
        controller.leases.release(first)
        second = controller.leases.acquire("provider:p", "a", 3600)
        assert second.fence > first.fence
        ref, calls = start_owner(second)
        wait_until(lambda: shared.projection.requests["r1"].state != "planned", 10, "the new owner to act")
        req = shared.projection.requests["r1"]
        assert (req.state, req.provider_request_id) == ("submitted", "lsf-9"), req.reason
        passes(ref, journal, now, 2)
        assert no_more_calls(calls, "request") == []
        assert answers.count() == {}
        ref.stop()
    finally:
        journal.stop()
        controller.close()
