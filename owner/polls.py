"""Status polls: what is asked of the provider about requests under way, and what its answer records."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from messages.facts import Payload
from messages.scripts import ScriptResult, StatusReport
from messages.states import COMING, POLLED
from owner.calls import Call, Poll
from owner.effects import NOTHING, Effects, Notes, note, write
from owner.settings import OwnerSettings
from owner.status import status_facts
from owner.units import with_totals
from state.projection import Projection


def poll(p: Projection, s: OwnerSettings, busy: Collection[object]) -> Effects:
    """One ``status`` call about every request the provider works on, and every machine still coming.

    A request that finished may still have machines on their way up: they are followed through it.
    None while the last answer's facts are being written: read against a projection without them, the
    next answer would record the same edges again (a part of a grant given back twice).
    """
    if Notes("status") in busy:
        return NOTHING
    ids: dict[str, str] = {}
    for req in p.open(s.name).requests:
        if req.provider_request_id and req.state in POLLED:
            ids[req.provider_request_id] = req.id
    for inst in p.instances_in(*COMING, provider=s.name):
        its = p.requests.get(inst.request_id)
        if its is not None and its.provider_request_id:
            ids[its.provider_request_id] = its.id
    if not ids:
        return NOTHING
    return Effects(calls=(Call(Poll(ids), "status", {"requests": [{"requestId": pid} for pid in ids]}),))


def polled(p: Projection, s: OwnerSettings, ids: Mapping[str, str], result: ScriptResult,
           busy: Collection[object] = ()) -> Effects:
    """What each request's status says, as facts (``owner.status``)."""
    if not result.ok or not isinstance(result.output, StatusReport):
        return note("warning", f"provider {s.name}: status failed: {result.reason}", repeats="status")
    payloads: list[Payload] = []
    for st in result.output.requests:
        req = p.requests.get(ids.get(st.request_id, ""))
        if req is None:
            continue
        payloads += status_facts(s.name, p.instances, p.grants, req, st.status, st.message, st.machines, st.granted)
    return write(Notes("status"), with_totals(p, s, payloads, busy))
