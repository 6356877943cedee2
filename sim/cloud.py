"""A simulated provider's own world: its machines and grants, and how its calls answer.

This is the provider's side only: what a ``request`` or ``return`` call
answers, what ``status`` would list at a given time, what it takes back.
Each machine's or grant's future (when it is up, whether it fails, when a
spot reclaim takes it) is drawn when it is created, from the provider's own
seeded random stream, so a run is reproducible. A repeated token answers
like the first call and creates nothing (as a v2 provider dedupes).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from messages.description import ProviderDescription
from sim.config import Fault, SimProvider

#: Script exit codes as outcomes, as the script runner names them.
OUTCOMES = {1: "failed", 69: "capacity", 75: "transient"}


@dataclass
class Machine:
    machine_id: str
    name: str
    template: str
    request_id: str
    launched_at: float
    ready_at: float
    failed: bool = False
    #: When a spot reclaim takes it (None: never).
    reclaim_at: float | None = None
    #: When its return is done (None: not being returned).
    gone_at: float | None = None

    def result(self, now: float) -> str:
        """``executing``, ``succeed`` or ``fail``, as a status call lists it."""
        if self.failed:
            return "fail" if now >= self.ready_at else "executing"
        return "succeed" if now >= self.ready_at else "executing"

    def held(self, now: float) -> bool:
        """Still occupying capacity (and billed at the provider)."""
        if self.failed and now >= self.ready_at:
            return False
        if self.reclaim_at is not None and now >= self.reclaim_at:
            return False
        return self.gone_at is None or now < self.gone_at


@dataclass
class Call:
    """A request or return the provider accepted."""

    provider_request_id: str
    action: str
    count: int
    what: str
    machines: list[str] = field(default_factory=list)
    grants: list[str] = field(default_factory=list)
    #: Units: when granted / given back, and how many.
    ready_at: float = 0.0
    granted: int = 0
    shortfall: int = 0


@dataclass(frozen=True)
class Answer:
    outcome: str  # ok, failed, transient, capacity
    provider_request_id: str = ""
    reason: str = ""


@dataclass(frozen=True)
class MachineStatus:
    machine_id: str
    name: str
    template: str
    result: str
    launched_at: float


@dataclass(frozen=True)
class CallStatus:
    status: str  # running, complete, complete_with_error
    machines: tuple[MachineStatus, ...] = ()
    granted: int = 0
    message: str = ""


class Cloud:
    def __init__(self, sp: SimProvider, seed: int) -> None:
        self.sp = sp
        self.desc: ProviderDescription = sp.description
        self.behaviour = sp.behaviour
        self.rng = random.Random(f"{seed}:{sp.name}")
        self.lead_time = sp.lead_time()
        self.faults: list[list] = [[f, f.times] for f in self.behaviour.faults]
        self.calls: dict[str, Call] = {}
        self.by_token: dict[str, str] = {}
        self.machines: dict[str, Machine] = {}
        #: Machines that may still hold capacity: ``room`` only walks these.
        self.live: dict[str, Machine] = {}
        #: grant token -> (resource, count held)
        self.lent: dict[str, tuple[str, int]] = {}
        self.n = 0

    # --- what a call answers -----------------------------------------------------------

    def _fault(self, action: str) -> Fault | None:
        for entry in self.faults:
            fault, left = entry
            if fault.action == action and left > 0:
                entry[1] = left - 1
                return fault
        return None

    def _fails(self, action: str) -> Answer | None:
        fault = self._fault(action)
        if fault is not None:
            return Answer(OUTCOMES[fault.exit], reason=f"scripted fault: exit {fault.exit}")
        b = self.behaviour
        if b.transient_rate and self.rng.random() < b.transient_rate:
            return Answer("transient", reason="exit 75: try again later")
        if b.fail_rate and self.rng.random() < b.fail_rate:
            return Answer("failed", reason="exit 1: the provider failed the call")
        if action == "request" and b.capacity_error_rate and self.rng.random() < b.capacity_error_rate:
            return Answer("capacity", reason="exit 69: capacity unavailable")
        return None

    def request(self, token: str, what: str, count: int, now: float) -> Answer:
        """A ``request`` call for ``count`` hosts of template (or units of resource) ``what``."""
        if token in self.by_token:
            return Answer("ok", self.by_token[token])
        failed = self._fails("request")
        if failed is not None:
            return failed
        fits = min(count, self.room(what, now))
        if fits <= 0:
            return Answer("capacity", reason=f"exit 69: no capacity for {what}")
        self.n += 1
        call = Call(provider_request_id=f"{self.desc.name}-r{self.n}", action="request", count=count, what=what,
                    shortfall=count - fits)
        if self.desc.kind == "hosts":
            for _ in range(fits):
                call.machines.append(self._launch(what, token, now).machine_id)
        else:
            call.ready_at = now + self.lead_time.draw(self.rng)
            call.granted = fits
            self.lent[token] = (what, fits)
        self.calls[call.provider_request_id] = call
        self.by_token[token] = call.provider_request_id
        return Answer("ok", call.provider_request_id)

    def _launch(self, template: str, token: str, now: float) -> Machine:
        self.n += 1
        ready = now + self.lead_time.draw(self.rng)
        b = self.behaviour
        failed = bool(b.machine_fail_rate) and self.rng.random() < b.machine_fail_rate
        reclaim = None
        if b.reclaim_rate and not failed:
            reclaim = ready + self.rng.expovariate(b.reclaim_rate / 3600.0)
        m = Machine(machine_id=f"i-{self.desc.name}-{self.n:06d}", name=f"{self.desc.name}-{self.n}",
                    template=template, request_id=token, launched_at=now, ready_at=ready, failed=failed,
                    reclaim_at=reclaim)
        self.machines[m.machine_id] = m
        self.live[m.machine_id] = m
        return m

    def give_back(self, token: str, machines: list[str], grants: dict[str, int], now: float) -> Answer:
        """A ``return`` call: machines by id, or units of grants (grant token -> count)."""
        if token in self.by_token:
            return Answer("ok", self.by_token[token])
        failed = self._fails("return")
        if failed is not None:
            return failed
        self.n += 1
        call = Call(provider_request_id=f"{self.desc.name}-r{self.n}", action="return",
                    count=len(machines) or sum(grants.values()), what="", machines=list(machines),
                    grants=list(grants))
        done = now + self.behaviour.return_time.draw(self.rng)
        for mid in machines:
            m = self.machines.get(mid)
            if m is not None and m.gone_at is None:
                m.gone_at = done
        for token_, n in grants.items():
            resource, held = self.lent.get(token_, ("", 0))
            if held - n > 0:
                self.lent[token_] = (resource, held - n)
            else:
                self.lent.pop(token_, None)
        call.ready_at = done
        self.calls[call.provider_request_id] = call
        self.by_token[token] = call.provider_request_id
        return Answer("ok", call.provider_request_id)

    # --- what it holds --------------------------------------------------------------------

    def room(self, what: str, now: float) -> int:
        desc, b = self.desc, self.behaviour
        if desc.kind == "hosts":
            for mid in [mid for mid, m in self.live.items() if not m.held(now)]:
                del self.live[mid]
            t = desc.template(what)
            free = (t.max_number if t else 0) - sum(1 for m in self.live.values() if m.template == what)
            total = len(self.live)
        else:
            pool = desc.pool(what)
            total = sum(n for _, n in self.lent.values())
            free = (pool.capacity if pool else 0) - sum(n for r, n in self.lent.values() if r == what)
        for cap in (desc.capacity, b.capacity):
            if cap is not None:
                free = min(free, cap - total)
        return max(0, free)

    def status(self, provider_request_id: str, now: float) -> CallStatus | None:
        call = self.calls.get(provider_request_id)
        if call is None:
            return None
        if call.action == "return":
            done = now >= call.ready_at
            machines = tuple(self.listed(self.machines[m], "succeed" if done else "executing")
                             for m in call.machines if m in self.machines)
            return CallStatus("complete" if done else "running", machines)
        if self.desc.kind == "units":
            if now < call.ready_at:
                return CallStatus("running")
            short = f"{call.shortfall} of {call.count} did not fit" if call.shortfall else ""
            return CallStatus("complete_with_error" if call.shortfall else "complete", granted=call.granted,
                              message=short)
        listed = tuple(self.listed(self.machines[m], self.machines[m].result(now)) for m in call.machines)
        if any(m.result == "executing" for m in listed):
            return CallStatus("running", listed)
        bad = call.shortfall or any(m.result == "fail" for m in listed)
        return CallStatus("complete_with_error" if bad else "complete", listed,
                          message="insufficient capacity for this template" if call.shortfall else "")

    @staticmethod
    def listed(m: Machine, result: str) -> MachineStatus:
        return MachineStatus(m.machine_id, m.name, m.template, result, m.launched_at)

    def reclaim(self, machine_ids: list[str], now: float) -> list[str]:
        """Take the named machines back now (a trace's ``lost`` event); returns those it held."""
        taken = []
        for mid in machine_ids:
            m = self.machines.get(mid)
            if m is not None and m.held(now):
                m.reclaim_at = now
                taken.append(mid)
        return taken

    def machines_of(self, token: str) -> list[Machine]:
        """What a request token created (the orphan search's view)."""
        pid = self.by_token.get(token)
        call = self.calls.get(pid) if pid else None
        return [self.machines[m] for m in call.machines] if call else []
