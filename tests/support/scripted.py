"""A provider whose answers follow from the calls alone, for driving owners the same way through any port.

``ScriptedProvider.answer(call)`` is what a provider script would print: a
request or return is accepted under an id made from its token; ``status``
says each accepted call is complete, with the machines or units it made
(``count`` machines named after the token, or ``count`` units); ``list``
shows exactly what is still held; nothing is ever taken back; use is 0.
Two instances given the same calls give the same answers, so an owner
driven live and one driven by the simulator see the same world.
"""

from __future__ import annotations

from typing import Any

from messages.description import ProviderDescription
from messages.scripts import (
    Accepted,
    HeldGrant,
    Holdings,
    Machine,
    Reclaims,
    RequestStatus,
    ScriptResult,
    StatusReport,
    Usage,
)
from owner.calls import Call, CallDone, OnDone


class ScriptedProvider:
    def __init__(self, description: ProviderDescription) -> None:
        self.description = description
        #: provider request id -> (action, the call's document)
        self.accepted: dict[str, tuple[str, dict[str, Any]]] = {}
        #: machine id -> name, of machines made and not returned
        self.held: dict[str, str] = {}
        #: grant token -> (resource, units still lent)
        self.lent: dict[str, tuple[str, int]] = {}

    def answer(self, call: Call) -> ScriptResult:
        output: Any
        doc = call.document
        if call.action in ("request", "return"):
            pid = f"pid-{doc['token']}"
            if pid not in self.accepted:
                self.accepted[pid] = (call.action, doc)
                self._carry(call.action, doc)
            output = Accepted(provider_request_id=pid)
        elif call.action == "status":
            output = StatusReport(requests=[self._status(r["requestId"]) for r in doc["requests"]
                                            if r["requestId"] in self.accepted])
        elif call.action == "list":
            output = Holdings(machines=[Machine(machine_id=m, name=n, result="succeed") for m, n in self.held.items()],
                              grants=[HeldGrant(token=t, resource=r, count=n) for t, (r, n) in self.lent.items()])
        elif call.action == "reclaims":
            output = Reclaims()
        elif call.action == "usage":
            output = Usage(resource=doc["resource"], in_use=0)
        else:
            output = self.description
        return ScriptResult(provider=self.description.name, action=call.action, outcome="ok", output=output,
                            token=call.token)

    def _carry(self, action: str, doc: dict[str, Any]) -> None:
        token = doc["token"]
        if action == "request" and "template" in doc:
            for i in range(doc["count"]):
                self.held[f"{token}-m{i}"] = f"{token}-h{i}"
        elif action == "request":
            self.lent[token] = (doc["resource"], doc["count"])
        elif "machines" in doc:
            for m in doc["machines"]:
                self.held.pop(m["machineId"], None)
        else:
            for g in doc["grants"]:
                gid, n = (g["token"], g["count"]) if isinstance(g, dict) else (g, self.lent.get(g, ("", 0))[1])
                resource, held = self.lent.get(gid, ("", 0))
                if held - n > 0:
                    self.lent[gid] = (resource, held - n)
                else:
                    self.lent.pop(gid, None)

    def _status(self, pid: str) -> RequestStatus:
        action, doc = self.accepted[pid]
        token = doc["token"]
        if action == "request" and "template" in doc:
            machines = [Machine(machine_id=f"{token}-m{i}", name=f"{token}-h{i}", result="succeed")
                        for i in range(doc["count"])]
            return RequestStatus(request_id=pid, status="complete", machines=machines)
        if action == "request":
            return RequestStatus(request_id=pid, status="complete", granted=doc["count"])
        return RequestStatus(request_id=pid, status="complete")


class AnsweringCalls:
    """A ``ProviderCalls`` that hands each call to a scripted provider and its answer straight back."""

    def __init__(self, provider: ScriptedProvider, on_done: OnDone) -> None:
        self.provider = provider
        self.on_done = on_done

    def submit(self, call: Call) -> None:
        self.on_done(CallDone(call, self.provider.answer(call)))

    def stop(self) -> None:
        """Nothing runs between a submit and its answer."""

    def health(self) -> str:
        return ""
