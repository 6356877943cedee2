"""The simulator's ``ProviderCalls``: a simulated provider answers each call as its script would.

The owner's calls reach the provider's own world (``sim.cloud``) with the
very documents a script gets, and come back as the ``ScriptResult`` a
script run would give, after the provider's call time (requests and
returns) or at once (everything else). A failover stops the port: answers
of calls made before it are lost, as a killed script's are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from messages.base import made
from messages.scripts import (
    Accepted,
    HeldGrant,
    Holdings,
    Machine,
    Reclaim,
    Reclaims,
    RequestStatus,
    ScriptOutput,
    ScriptResult,
    StatusReport,
    Usage,
)
from owner.calls import Call, CallDone, OnDone
from sim.cloud import Cloud, MachineStatus


@dataclass(frozen=True)
class News:
    """When what the provider shows of one accepted call will change: the moments a status poll would
    see something new, and the hosts it will take back (machine id, when)."""

    polls: tuple[float, ...] = ()
    reclaims: tuple[tuple[str, float], ...] = ()


#: The exit code a simulated failure stands for, as the runner reports it.
EXIT = {"failed": 1, "transient": 75, "capacity": 69}


class SimCalls:
    """``at(t, fn, *args)`` schedules on the simulator's clock; ``now()`` reads it; ``in_use(resource)``
    is what the license server would say is in use."""

    def __init__(self, cloud: Cloud, now: Callable[[], float], at: Callable[..., None], on_done: OnDone,
                 in_use: Callable[[str], int]) -> None:
        self.cloud = cloud
        self.now = now
        self.at = at
        self.on_done = on_done
        self.in_use = in_use
        #: Bumped by every stop: answers of calls made before it are lost.
        self.epoch = 0
        #: (machine id, result) -> the machine as a status or list answer shows it: a machine is listed at
        #: every poll of its request, and changes result at most twice.
        self._shown: dict[tuple[str, str], Machine] = {}

    def submit(self, call: Call) -> None:
        now = self.now()
        result, took = self._answer(call, now)
        self.at(now + took, self._deliver, CallDone(call, result), self.epoch)

    def stop(self) -> None:
        self.epoch += 1

    def health(self) -> str:
        """A simulated provider has no process to keep: never degraded."""
        return ""

    def news(self, provider_request_id: str, action: str) -> News:
        """What the simulator may know and a live owner cannot: when an accepted call's status changes.

        The simulator polls only then, at the moment the live owner's periodic poll would see it.
        """
        call = self.cloud.calls.get(provider_request_id)
        if call is None:
            return News()
        polls = [call.ready_at] if action == "return" or self.cloud.desc.kind == "units" else []
        reclaims = []
        if action == "request":
            for mid in call.machines:
                m = self.cloud.machines[mid]
                polls.append(m.ready_at)
                if m.reclaim_at is not None:
                    reclaims.append((mid, m.reclaim_at))
        return News(tuple(polls), tuple(reclaims))

    def _deliver(self, done: CallDone, epoch: int) -> None:
        if epoch == self.epoch:
            self.on_done(done)

    # --- the provider's side of each action -------------------------------------------------

    def _answer(self, call: Call, now: float) -> tuple[ScriptResult, float]:
        cloud, doc = self.cloud, call.document
        if call.action in ("request", "return"):
            took = cloud.behaviour.call_time.draw(cloud.rng)
            if call.action == "request":
                what = doc.get("template") or doc.get("resource") or ""
                answer = cloud.request(doc["token"], what, doc["count"], now)
            else:
                answer = cloud.give_back(doc["token"], [m["machineId"] for m in doc.get("machines", ())],
                                         self._grants(doc), now)
            if answer.outcome != "ok":
                return self._result(call, answer.outcome, reason=answer.reason, exit_code=EXIT[answer.outcome]), took
            return self._result(call, "ok", made(Accepted, provider_request_id=answer.provider_request_id,
                                                                     message="")), took
        if call.action == "status":
            return self._result(call, "ok", self._status([r["requestId"] for r in doc["requests"]], now)), 0.0
        if call.action == "reclaims":
            taken = [made(Reclaim, name=m.name, machine_id=m.machine_id, grace_period=0)
                     for r in doc["machines"] if (m := cloud.machines.get(r["machineId"])) is not None
                     and m.reclaim_at is not None and m.reclaim_at <= now]
            return self._result(call, "ok", made(Reclaims, machines=taken)), 0.0
        if call.action == "list":
            return self._result(call, "ok", self._holdings(now)), 0.0
        if call.action == "usage":
            resource = doc["resource"]
            return self._result(call, "ok", made(Usage, resource=resource, in_use=self.in_use(resource),
                                                                  total=None)), 0.0
        return self._result(call, "ok", cloud.desc), 0.0  # describe

    def _grants(self, doc: dict[str, Any]) -> dict[str, int]:
        """A units return's grants as token -> units, as a script reads them (a plain token: all of it)."""
        out: dict[str, int] = {}
        for g in doc.get("grants", ()):
            if isinstance(g, dict):
                out[g["token"]] = g["count"]
            else:
                out[g] = self.cloud.lent.get(g, ("", 0))[1]
        return out

    def _status(self, ids: list[str], now: float) -> StatusReport:
        states = []
        for pid in ids:
            st = self.cloud.status(pid, now)
            if st is None:
                continue
            states.append(made(
                RequestStatus, request_id=pid, status=st.status, message=st.message,
                machines=[self._machine(m) for m in st.machines],
                granted=st.granted if self.cloud.desc.kind == "units" else None))
        return made(StatusReport, requests=states)

    def _holdings(self, now: float) -> Holdings:
        machines = [self._machine(self.cloud.listed(m, m.result(now))) for m in self.cloud.live.values()
                    if m.held(now)]
        grants = [made(HeldGrant, token=token, request_id="", resource=resource, count=n)
                  for token, (resource, n) in self.cloud.lent.items() if n > 0]
        return made(Holdings, machines=machines, grants=grants)

    def _result(self, call: Call, outcome: str, output: ScriptOutput | None = None, reason: str = "",
                exit_code: int | None = 0) -> ScriptResult:
        return made(
            ScriptResult, provider=self.cloud.desc.name, action=call.action, outcome=outcome, exit_code=exit_code,
            reason=reason, duration_s=0.0, token=call.token, output=output, stderr_tail="")

    def _machine(self, m: MachineStatus) -> Machine:
        shown = self._shown.get((m.machine_id, m.result))
        if shown is None:
            shown = self._shown[(m.machine_id, m.result)] = made(
                Machine, machine_id=m.machine_id, name=m.name, result=m.result, status="", private_ip=None,
                public_ip=None, launched_at=m.launched_at, message="", template=m.template)
        return shown
