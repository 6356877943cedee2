"""A request's reason is its current state's: a completed request no longer says its machines are launching
(issue 20, item 4)."""

from __future__ import annotations

from messages.facts import RequestChanged, RequestPlanned
from provisioner.read.views import requests
from state.projection import Projection
from tests.support.policy import T0, feed


def test_a_completed_request_drops_the_reason_of_its_launching_state():
    p = Projection()
    feed(p, "sim-hosts", RequestPlanned(action="request", supply="hosts", template="t", count=4), ids=["r1"])
    feed(p, "sim-hosts", RequestChanged(kind="request_submitted", request_id="r1", state="submitted",
                                        provider_request_id="x"))
    feed(p, "sim-hosts", RequestChanged(kind="request_status", request_id="r1", state="running",
                                        reason="4 of 4 machines launching"))
    assert [r["reason"] for r in requests(p)] == ["4 of 4 machines launching"]
    feed(p, "sim-hosts", RequestChanged(kind="request_completed", request_id="r1", state="complete"), now=T0 + 60)
    assert [(r["state"], r["reason"]) for r in requests(p)] == [("complete", "")]


def test_a_note_on_the_same_state_without_a_reason_keeps_the_reason():
    p = Projection()
    feed(p, "a", RequestPlanned(action="request", supply="hosts", template="t", count=1), ids=["r1"])
    feed(p, "a", RequestChanged(kind="request_status", request_id="r1", state="planned", outcome="transient",
                                reason="throttled, trying again"))
    feed(p, "a", RequestChanged(kind="request_status", request_id="r1", state="planned", outcome="transient"))
    assert [r["reason"] for r in requests(p)] == ["throttled, trying again"]
