"""The simulator and the live daemon decide the same on the same short trace.

The live side is a real daemon (actors, journal, SQLite controller, script
runner) with the simulated provider scripts; a small harness plays the
scheduler with the very model the simulator uses (``sim.scheduler``): it
joins running hosts, keeps as many busy as the step wants, reports license
use and publishes the unmet need, until nothing moves any more. The
simulator then runs the same steps against the descriptions the live
providers gave of themselves. Per step and item, the providers chosen and
the counts given to each must agree, and so must what was given back.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from config.models import SlurmLicense
from messages.demand import HostItem, UnitItem
from messages.facts import ResourceTotalChanged
from policy.cooldown import cooldowns
from policy.matching import Selector
from sim.config import SimConfig
from sim.engine import Engine
from sim.scheduler import Host, Scheduler, license_use
from slurm.licenses import Seen, decide
from state.projection import Projection
from tests.support.daemons import UNITS_SIM, make_config, sim_call, sim_provider
from tests.support.traces import trace

pytestmark = pytest.mark.slow

ITEM = {"id": "batch", "kind": "hosts", "select": {"ncpus": ">=8"}}
LIC = {"id": "lic", "kind": "units", "resource": "vcs"}
#: What the workload wants at each step: hosts, license units (2 of them owned).
STEPS = [(6, 4), (9, 4), (2, 4), (0, 0)]
GAP = 1800.0
#: Hosts joined this recently still count as in flight. Live steps are seconds apart, simulated ones
#: half an hour: each live step waits out the grace, so both start every step from the same state.
#: Idle supply waits as long before it goes back, so the license server's use is seen first.
GRACE = 3.0
#: A failed request cools its provider down for this long. Within a step the live planner must move the
#: failed need on before the cooldown ends (the simulator does so at once), and each live step waits the
#: cooldown out, as the half-hour simulated gap does.
COOLDOWN = 5.0

A = {"kind": "hosts", "seed": 3, "name_prefix": "a", "priority": 10, "cost_per_hour": 1.0, "lead_time": 0,
     "templates": [{"id": "a8", "max_number": 4, "attributes": {"type": "X86_64", "ncpus": 8}}],
     # The first request finds no capacity: its need must move on to "b" in both worlds.
     "faults": [{"action": "request", "exit": 69}]}
B = {"kind": "hosts", "seed": 3, "name_prefix": "b", "priority": 5, "cost_per_hour": 0.5, "lead_time": 0,
     "templates": [{"id": "b8", "max_number": 10, "attributes": {"type": "X86_64", "ncpus": 8}}]}


#: The license a Slurm cluster would know ``vcs`` by (issue 30).
LICENSE = SlurmLicense(resource="vcs", license="vcs@flex")


def _shown(cfg, p) -> tuple[int, int]:
    """What the Slurm bridge would show Slurm of ``vcs`` from these facts: its total and the units reserved."""
    want = decide(LICENSE, cfg, p, Seen(LICENSE.license, 0, 0, 0), pending=0)
    return want.count, want.reserved


def _step_of(at: float, starts: list[float]) -> int:
    return max(i for i, s in enumerate(starts) if at >= s)


def _summary(orders, decisions, starts: list[float], instances) -> dict:
    """Per step: what each item got from each provider, and what each provider was given back."""
    got: dict[int, Counter] = {}
    back: dict[int, Counter] = {}
    for at, d in decisions:
        for c in d.chosen:
            got.setdefault(_step_of(at, starts), Counter())[(d.item, c.provider, c.template or c.resource)] += c.count
    for o in orders:
        if o.order.action == "return":
            what = o.order.supply
            back.setdefault(_step_of(o.at, starts), Counter())[(o.provider, what)] += o.order.count
    return {"chosen": {k: dict(v) for k, v in got.items()}, "returned": {k: dict(v) for k, v in back.items()},
            "hosts": dict(Counter(i.provider for i in instances))}


class LiveScheduler:
    """The simulator's scheduler model, driving a live controller."""

    def __init__(self, run, units_folder) -> None:
        self.run = run
        self.c = run.controller
        self.units_folder = units_folder
        self.model = Scheduler(self._fits)
        self.p = run.state()
        self.use: int | None = None

    def _fits(self, item: HostItem, host: Host) -> bool:
        desc = self.p.providers[host.provider].description
        t = desc.template(host.template) if host.template else None
        return t is not None and Selector(item).matches(t, desc.zone)

    def settle(self, hosts: int, units: int, timeout: float = 40.0) -> None:
        self.model.want(HostItem(**{**ITEM, "count": hosts}))
        self.model.want(UnitItem(**{**LIC, "count": units}))
        deadline = time.monotonic() + timeout
        quiet_since, last_seq = time.monotonic(), -1
        while time.monotonic() < deadline:
            self.p = p = self.run.state()
            now = time.time()
            for key in list(self.model.hosts):
                if p.instances[key].state not in ("joined", "idle", "busy"):
                    self.model.leave(key)
            joined = []
            for inst in sorted(p.instances.values(), key=lambda i: i.key):
                if inst.state == "running" and inst.key not in self.model.hosts:
                    self.model.join(Host(key=inst.key, name=inst.name, provider=inst.provider,
                                         template=inst.template, item=inst.item_id, joined_at=now))
                    joined.append(inst.name)
            for name in joined:
                self.c.post_host_event(name, "joined", now)
            changes, unmet = self.model.assign()
            for host, event in changes:
                self.c.post_host_event(host.name, event, now)
            vcs = p.resources.get("vcs")
            total = vcs.total if vcs else 0
            use = license_use(units, total)[0]
            if use != self.use:
                sim_call(self.units_folder, "admin", None, "set-in-use", "vcs", str(use))
                self.use = use
            snap = self.model.demand(unmet, {"vcs": total}, now)
            if snap is not None:
                self.c.put_demand(snap)
            orders, requests, _, _ = p.open()
            moving = (orders or requests or p.instances_in("requested", "provisioning", "running")
                      or cooldowns(p.requests.values(), now, COOLDOWN, COOLDOWN))
            if p.seq != last_seq or moving or snap is not None or changes or joined:
                quiet_since, last_seq = time.monotonic(), p.seq
            elif time.monotonic() - quiet_since > GRACE + 0.5:
                return
            time.sleep(0.2)
        p = self.run.state()
        orders, requests, _, _ = p.open()
        asked = [(r.provider, r.action, r.state, r.count, r.template, r.reason) for r in requests]
        raise AssertionError(f"the live run did not settle on step {hosts} hosts, {units} units: "
                             f"orders {[o.order for o in orders]}, requests {asked}, "
                             f"seq {p.seq}, instances {[(i.key, i.state) for i in p.instances.values()]}")


def test_the_simulator_and_the_live_daemon_make_the_same_decisions(tmp_path, start_daemon):
    cfg = make_config(tmp_path, [sim_provider(tmp_path, "a", A), sim_provider(tmp_path, "b", B),
                                 sim_provider(tmp_path, "units", UNITS_SIM)],
                      lease={"ttl": "10s", "renew_every": "2s"},
                      policy={"join_grace": f"{GRACE}s", "idle_time": f"{GRACE}s",
                              "cooldown": f"{COOLDOWN}s", "backoff_max": f"{COOLDOWN}s"})
    run = start_daemon(cfg)
    run.wait_state(lambda s: all(s.providers.get(n) and s.providers[n].description and s.providers[n].owner
                                 for n in ("a", "b", "units")), "the providers described and owned")
    harness = LiveScheduler(run, tmp_path / "units")
    starts = []
    live_totals = []
    live_shown = []
    for hosts, units in STEPS:
        starts.append(time.time())
        harness.settle(hosts, units)
        vcs = run.state().resources["vcs"]
        live_totals.append((vcs.base, vcs.borrowed, vcs.total))
        live_shown.append(_shown(cfg, run.state()))
    p = run.state()
    live = _summary(p.orders.values(), [(d.at, d.decision) for d in p.decisions], starts, p.instances.values())

    sim_cfg = SimConfig.model_validate({
        "seed": 3,
        "policy": cfg.policy.model_dump(),
        "scheduler": {"join_delay": 0.5, "publish_every": 0},
        "providers": [{"description": p.providers[n].description.model_dump(),
                       "behaviour": {"lead_time": 0, "call_time": 0.2, "return_time": 0,
                                     "faults": [{"action": "request", "exit": 69}] if n == "a" else []}}
                      for n in ("a", "b", "units")],
        "resources": [r.model_dump() for r in cfg.resources],
    })
    steps = [{"time": 0, "items": [{**ITEM, "count": STEPS[0][0]}, {**LIC, "count": STEPS[0][1]}]}]
    steps += [{"time": k * GAP, "items": [{"id": "batch", "count": h}, {"id": "lic", "count": u}]}
              for k, (h, u) in enumerate(STEPS[1:], start=1)]
    totals: list[tuple[float, tuple[int, int, int]]] = []
    shown: list[tuple[float, tuple[int, int]]] = []
    sim_p = Projection()

    def seen(fact) -> None:
        sim_p.apply(fact)
        if isinstance(fact.payload, ResourceTotalChanged):
            totals.append((fact.time, (fact.payload.base, fact.payload.borrowed, fact.payload.total)))
            shown.append((fact.time, _shown(cfg, sim_p)))

    engine = Engine(sim_cfg, trace(*steps, {"time": len(STEPS) * GAP}), on_fact=seen)
    engine.run()
    sim_starts = [engine.start + k * GAP for k in range(len(STEPS))]
    # Each step's settled total: the last one written before the next step began.
    ends = [*sim_starts[1:], engine.end + 1]
    sim_totals = [next(t for at, t in reversed(totals) if at < end) for end in ends]
    assert live_totals == sim_totals, "the same totals, from the same owner code, step by step"
    # And the same totals shown to Slurm (the ceiling, and the units held back), step by step.
    sim_shown = [next(t for at, t in reversed(shown) if at < end) for end in ends]
    assert live_shown == sim_shown
    assert live_shown == [(2 + 10, 10 - borrowed) for _, borrowed, _ in live_totals]
    simulated = _summary(engine.p.orders.values(), engine.decisions(), sim_starts, engine.p.instances.values())

    assert live == simulated
    # The story the comparison covers: the capacity failure moved need to "b", later steps used
    # "a" again, idle hosts and unused licenses went back.
    assert simulated["chosen"][0][("batch", "b", "b8")] >= 4
    assert ("batch", "a", "a8") in simulated["chosen"][1]
    assert simulated["returned"][2] and simulated["returned"][3]
