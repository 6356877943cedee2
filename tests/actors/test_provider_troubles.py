"""A provider in trouble, as an operator sees it (issue 20, item 4): a describe that keeps failing shows
``degraded`` with why, and recovers; a failure repeating at every poll is one WARNING a minute, with a count."""

from __future__ import annotations

import logging

from actors.base import Ping
from messages.commands import Append, Tick
from messages.description import ProviderDescription, Template
from messages.facts import RequestChanged, RequestPlanned, make_fact
from messages.scripts import ScriptResult
from provisioner.read.views import provider_details
from tests.support.owner_actor import T0, owner

BAD = "p describe: exit 1: cannot reach the cloud API"


def failed(action: str, reason: str) -> ScriptResult:
    return ScriptResult(provider="p", action=action, outcome="failed", exit_code=1, reason=reason)


def settle(ref, journal) -> None:
    ref.ask(Ping())
    journal.ask(Ping())
    ref.ask(Ping())
    journal.ask(Ping())


def test_a_describe_that_keeps_failing_shows_degraded_with_the_reason_and_recovers(tmp_path):
    now = [T0]
    with owner(tmp_path, now) as (ref, journal, calls, shared):
        for n in range(3):
            call = calls.next("describe")
            calls.answer(call, failed("describe", BAD))
            settle(ref, journal)
            with shared.reading() as p:
                (row,) = provider_details(p, [], now[0])
            if n < 2:
                assert row["status"] == "active", "one failure is no trouble yet"
            now[0] += 120  # past any backoff: describe is due again
            ref.tell(Tick(now=now[0]))
        assert (row["status"], row["status_reason"]) == ("degraded", f"describe keeps failing: {BAD}")
        call = calls.next("describe")
        desc = ProviderDescription(name="p", kind="hosts", templates=[Template(id="t", max_number=3)])
        calls.answer(call, ScriptResult(provider="p", action="describe", outcome="ok", output=desc))
        settle(ref, journal)
        with shared.reading() as p:
            (row,) = provider_details(p, [], now[0])
        assert row["status"] == "active" and not p.providers["p"].degraded


def test_a_status_failure_at_every_poll_warns_once_a_minute_with_a_count(tmp_path, caplog):
    now = [T0]
    with owner(tmp_path, now) as (ref, journal, calls, shared):
        journal.tell(Append(facts=[
            make_fact(RequestPlanned(action="request", supply="hosts", template="t", count=1), provider="p",
                      fact_id="r1", now=T0),
            make_fact(RequestChanged(kind="request_submitted", request_id="r1", state="submitted",
                                     provider_request_id="x-1"), provider="p", now=T0)]))
        caplog.set_level(logging.WARNING, logger="actors.provider")
        garbage = "p status: bad output: not JSON: 'Traceback (most recent call last)'"
        settle(ref, journal)
        for _ in range(13):  # every 5 s for a minute and 5 s
            now[0] += 5
            ref.tell(Tick(now=now[0]))
            call = calls.next("status")
            calls.answer(call, failed("status", garbage))
            settle(ref, journal)
        said = [r.getMessage() for r in caplog.records if "status failed" in r.getMessage()]
        assert said == [f"provider p: status failed: {garbage}",
                        f"provider p: status failed: {garbage} (11 more like this in the last 60s)"]
