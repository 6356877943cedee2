"""One owner, two drivers: the live actor and the simulator's owner write the same facts for the same world.

The same scripted sequence (orders, then host events, then return orders)
goes through the live ``ProviderActor`` (a real journal on SQLite, ticks)
and through the simulator's ``Owner`` (a real engine on its virtual clock),
each with its own copy of a scripted provider behind its port. What each
writes about requests, hosts, grants and resource totals must be the same,
fact for fact, in the same order per record.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager

import pytest

from actors.base import Ping
from actors.journal import JournalActor
from actors.lease import Revocation
from actors.provider import ProviderActor
from config.models import PolicyConfig, ProviderConfig, ResourceConfig
from messages.commands import Append, HostEvents, Tick
from messages.demand import HostEvent
from messages.description import ProviderDescription
from messages.facts import Fact, Order, make_fact
from persistence.controller import open_controller
from sim.calls import News
from sim.config import SimConfig
from sim.engine import Engine
from sim.trace import Trace
from state.shared import SharedProjection
from tests.support.scripted import AnsweringCalls, ScriptedProvider

T0 = 1_700_000_000.0
POLICY = {"poll_every": 5.0, "idle_time": 86400.0, "join_timeout": 86400.0, "request_timeout": 3600.0}
HOSTS = ProviderDescription(name="hosts", kind="hosts", cost_per_hour=1.0,
                            templates=[{"id": "t", "max_number": 10, "attributes": {"ncpus": 8}}])
UNITS = ProviderDescription(name="lic", kind="units", cost_per_hour=2.0,
                            pools=[{"resource": "vcs", "capacity": 10}])
RESOURCES = [{"name": "vcs", "elastic": True, "base": 2, "provider": "lic"}]

#: (provider, order id, order) to write first; the host events; then the return orders.
ORDERS = [("hosts", "o1", Order(action="request", supply="hosts", template="t", count=2, item_id="batch")),
          ("lic", "o2", Order(action="request", supply="units", resource="vcs", count=3, item_id="lic"))]
EVENTS = [("o1.1-h0", "joined"), ("o1.1-h1", "joined"), ("o1.1-h0", "idle"), ("o1.1-h1", "busy")]
RETURNS = [("hosts", "o3", Order(action="return", supply="hosts", machines=["o1.1-m0"], count=1, reason="idle")),
           ("lic", "o4", Order(action="return", supply="units", resource="vcs", grants=["o2.1"], count=1,
                               reason="idle"))]

#: The facts an owner writes about what it holds, by the record they concern.
KINDS = ("request_", "instance_", "grant_", "resource_total_changed")


def by_record(facts: list[Fact]) -> dict[tuple[str, str, str], list[dict]]:
    """Each owner-written fact's payload, grouped by the record it concerns, in the order written.

    A host event's seq in the controller's event stream is left out: the simulator has no such stream.
    """
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for f in facts:
        if not f.kind.startswith(KINDS):
            continue
        p = f.payload.model_dump(exclude={"event_seq"})
        family = f.kind.split("_")[0]
        if f.kind == "request_planned":
            record = f.id
        else:
            record = p[{"request": "request_id", "instance": "machine_id", "grant": "grant_id"}.get(family, "resource")]
        out[(f.provider, family, record)].append(p)
    return dict(out)


# --- the live driver -----------------------------------------------------------------------------


@contextmanager
def live_owners(tmp_path, now: list[float]):
    controller = open_controller(f"sqlite:///{tmp_path / 'c.db'}", clock=lambda: now[0])
    shared = SharedProjection()
    journal = JournalActor.start(controller, shared=shared)
    refs = []
    for desc in (HOSTS, UNITS):
        cfg = ProviderConfig.model_validate({"name": desc.name, "kind": desc.kind,
                                             "script": {"style": "v2", "path": "x"}})
        provider = ScriptedProvider(desc)
        lease = controller.leases.acquire(f"provider:{desc.name}", "a", 86400)
        refs.append(ProviderActor.start(
            cfg, lease, Revocation(float("inf")), journal, _Nobody(), PolicyConfig(**POLICY),
            [ResourceConfig(**r) for r in RESOURCES], tmp_path,
            lambda _c, _w, on_done, _m, provider=provider: AnsweringCalls(provider, on_done), shared,
            clock=lambda: now[0]))
    try:
        yield controller, journal, refs
    finally:
        for ref in refs:
            ref.stop()
        journal.stop()
        controller.close()


class _Nobody:
    def tell(self, _msg) -> None:
        """No lease is lost in this test."""


def drive_live(tmp_path) -> list[Fact]:
    now = [T0]

    def settle(seconds: int) -> None:
        for _ in range(seconds):
            now[0] += 1.0
            for ref in refs:
                ref.tell(Tick(now=now[0]))
            for ref in refs:
                ref.ask(Ping())
            journal.ask(Ping())
            for ref in refs:
                ref.ask(Ping())

    with live_owners(tmp_path, now) as (controller, journal, refs):
        settle(2)
        journal.tell(Append(facts=[make_fact(o, provider=p, fact_id=oid, now=now[0]) for p, oid, o in ORDERS]))
        settle(30)
        refs[0].tell(HostEvents(events=[HostEvent(name=name, event=event, time=now[0], seq=i + 1)
                                        for i, (name, event) in enumerate(EVENTS)]))
        settle(10)
        journal.tell(Append(facts=[make_fact(o, provider=p, fact_id=oid, now=now[0]) for p, oid, o in RETURNS]))
        settle(30)
        return controller.read(limit=100_000)


# --- the simulator's driver ----------------------------------------------------------------------


class _SimAnswering:
    """The scripted provider behind a simulated owner's port: answers delivered on the simulator's clock."""

    def __init__(self, provider: ScriptedProvider, world, on_done) -> None:
        self.calls = AnsweringCalls(provider, lambda done: world.at(world.now, on_done, done))

    def submit(self, call) -> None:
        self.calls.submit(call)

    def stop(self) -> None:
        self.calls.stop()

    def health(self) -> str:
        return self.calls.health()

    def news(self, provider_request_id: str, action: str) -> News:
        return News()  # everything is complete at the first poll


def drive_simulated() -> list[Fact]:
    cfg = SimConfig.model_validate({
        "policy": POLICY, "resources": RESOURCES,
        # The scheduler plays no part: the test sends the host events.
        "scheduler": {"join_delay": "2d"},
        "providers": [{"description": HOSTS.model_dump()}, {"description": UNITS.model_dump()}],
    })
    providers = {d.name: ScriptedProvider(d) for d in (HOSTS, UNITS)}
    facts: list[Fact] = []
    engine = Engine(cfg, Trace(file="-", start=T0, steps=()), on_fact=facts.append,
                    calls=lambda cloud, world, on_done: _SimAnswering(providers[cloud.desc.name], world, on_done))
    engine.begin()
    engine.advance(T0 + 2)
    engine.write_each([(p, o) for p, _, o in ORDERS], ids=[oid for _, oid, _ in ORDERS], lease=("planner", 1))
    engine.advance(T0 + 32)
    for name, event in EVENTS:
        key = next(k for k, i in engine.p.instances.items() if i.name == name)
        engine.owners["hosts"].host_event(key, event)
    engine.advance(T0 + 42)
    engine.write_each([(p, o) for p, _, o in RETURNS], ids=[oid for _, oid, _ in RETURNS], lease=("planner", 1))
    engine.advance(T0 + 72)
    return facts


@pytest.mark.slow
def test_the_live_actor_and_the_simulators_owner_write_the_same_facts(tmp_path):
    live = by_record(drive_live(tmp_path))
    simulated = by_record(drive_simulated())
    assert live == simulated
    # The sequence reached everything it was meant to: both owners did the whole round trip.
    host = [p["state"] for p in live[("hosts", "instance", "o1.1-m0")]]
    assert host == ["running", "joined", "idle", "return_planned", "returning", "returned"]
    totals = [(p["base"], p["borrowed"], p["total"]) for p in live[("lic", "resource", "vcs")]]
    assert totals == [(2, 0, 2), (2, 3, 5), (2, 2, 4)]
    grant = [p["kind"] for p in live[("lic", "grant", "o2.1")]]
    assert grant[:2] == ["grant_granted", "grant_return_planned"] and grant[-1] == "grant_part_returned"
