"""The liar soak: a real daemon against simulated providers that lie, fail and are slow, for minutes.

The world: two simulated clouds that name their hosts alike (both make
``node-1``) and a simulated license server, each behind the fault wrapper
``sim/scripts/sim-liar`` with a seeded schedule (``simprov_liar``: slow and
late answers, exits 75 and 69, scripts killed mid-run, machines hidden from
``list``, returns that return nothing). One daemon process owns them all and
is killed with SIGKILL now and then, and started again.

A stand-in scheduler plays the cluster each cycle: hosts that boot and that
the daemon made join it (``joined``, naming the provider when two providers
made the name), it keeps as many of them busy as its workload wants (sending
``busy`` and ``idle``, and losing some of those events, as schedulers do), it
puts its whole view of the hosts (``put_supply``), it checks license tokens
out at the license server up to the total the daemon publishes (the total
read and the use set as one step, under the server's lock), and it puts its
unmet need as the demand. A host the daemon is giving back it closes: no work
goes there.

After the storm the workload drops to nothing (demand 0, every host idle, no
token in use) and the world is left to settle; then the daemon is stopped and
the ledger (``tests/support/ledger.py``) holds the providers' ground truth
against the facts.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from messages.demand import DemandSnapshot, HostItem, SupplyHost, SupplySnapshot, UnitItem
from persistence.controller import open_controller
from persistence.replay import catch_up, replay
from provisioner.cli.demo import SIM_SCRIPT
from state.projection import Projection
from tests.support.drills import Daemon, free_port
from tests.support.ledger import Graces, Ledger, draw
from tests.support.simprov import scripts_module

LIAR_SCRIPT = SIM_SCRIPT.parent / "sim-liar"
HOSTS = ("cloud-a", "cloud-b")
UNITS = "licenses"
RESOURCE = "vcs"

#: Seconds every script may run (slow answers come near it, late ones past it).
SCRIPT_TIMEOUT = 2.0
TTL = 2.0
POLICY = {"poll_every": 0.25, "plan_every": 0.25, "idle_time": 1.0, "join_grace": 2.0, "cooldown": 1.0,
          "backoff_max": 1.0, "request_timeout": 15.0, "join_timeout": 20.0, "lost_after": 2.0,
          "return_grace": 2.0, "unlisted_grace": 3.0, "orphans": "return"}
#: Orphan searches run every 12 status polls (owner/scans.py, SCAN_EVERY_POLLS).
SCAN_PERIOD = 12 * POLICY["poll_every"]
#: A killed daemon is started again after this long (drawn), and is acting a few seconds later.
RESTART_PAUSE = (0.2, 1.5)
DAEMON_START = 5.0
#: The stand-in scheduler's cycle.
CYCLE = 0.25


def _hosts_sim(seed: int, priority: int, cost: float) -> dict[str, Any]:
    return {"kind": "hosts", "seed": seed, "name_prefix": "node", "priority": priority, "cost_per_hour": cost,
            "lead_time": {"min": 0.3, "max": 1.5}, "return_time": {"min": 0.2, "max": 1.0},
            "reclaim_rate": 0.05, "reclaim_after": {"min": 5, "max": 40},
            "templates": [{"id": "small", "max_number": 6, "attributes": {"type": "X86_64", "ncpus": 8}}]}


def _units_sim(seed: int) -> dict[str, Any]:
    return {"kind": "units", "seed": seed, "name_prefix": "lic", "priority": 5, "lead_time": 0.3,
            "return_time": {"min": 0.2, "max": 0.8},
            "pools": [{"resource": RESOURCE, "capacity": 10, "cost_per_unit_hour": 2.0}]}


@dataclass(frozen=True)
class Faults:
    """The wrapper's schedule, the same shape for every provider (each draws from its own seed)."""

    calls: dict[str, float] = field(default_factory=lambda: {
        "slow": 0.03, "late": 0.02, "transient": 0.05, "transient_after": 0.02, "capacity": 0.03, "killed": 0.03})
    #: Share of machines hidden from ``list`` once; their hiding is shorter than lost_after, or longer.
    hide_rate: float = 0.3
    lie_rate: float = 0.2

    def liar(self, seed: str) -> dict[str, Any]:
        # A short hiding ends before lost_after; a long one outlasts lost_after and the two orphan searches
        # that must miss a machine before it is declared lost.
        lost = POLICY["lost_after"]
        return {"seed": seed, "timeout": SCRIPT_TIMEOUT, "calls": self.calls,
                "hide": {"rate": self.hide_rate, "after": {"min": 0, "max": 8},
                         "short": {"min": 0.5, "max": 0.8 * lost},
                         "long": {"min": lost + 2 * SCAN_PERIOD, "max": lost + 3 * SCAN_PERIOD}, "long_share": 0.5},
                "lie": {"rate": self.lie_rate, "per_thing": 1}}


@dataclass(frozen=True)
class Plan:
    seed: int
    #: Seconds of storm: a changing workload, faults, kills.
    storm: float
    #: At most this long to settle once the workload is gone.
    calm: float
    #: A kill of the daemon every so many seconds (drawn) during the storm.
    kill_every: tuple[float, float] = (6.0, 14.0)
    #: The workload changes every so many seconds (drawn): hosts to keep busy, tokens to check out.
    change_every: tuple[float, float] = (3.0, 8.0)
    max_busy: int = 8
    max_tokens: int = 6
    #: Share of the stand-in's busy and idle events that never arrive (its view corrects them).
    lose_events: float = 0.1
    faults: Faults = field(default_factory=Faults)

    def graces(self) -> Graces:
        """The daemon's graces, and what it needs to act: two orphan searches (one may fail or come
        late, past the script timeout and the kill that follows it), and one restart."""
        act_within = 2 * SCAN_PERIOD + SCRIPT_TIMEOUT + 2.0 + TTL + RESTART_PAUSE[1] + DAEMON_START
        return Graces(lost_after=POLICY["lost_after"], return_grace=POLICY["return_grace"],
                      request_timeout=POLICY["request_timeout"], act_within=act_within)


class World:
    """The controller, the simulated providers behind their wrappers, and the daemon's config."""

    def __init__(self, tmp: Path, plan: Plan) -> None:
        self.tmp = tmp
        self.plan = plan
        self.url = f"sqlite:///{tmp / 'state.db'}"
        sims = {"cloud-a": _hosts_sim(plan.seed, 10, 0.5), "cloud-b": _hosts_sim(plan.seed + 1, 5, 0.6),
                UNITS: _units_sim(plan.seed)}
        self.kinds = {name: sim["kind"] for name, sim in sims.items()}
        for name, sim in sims.items():
            folder = tmp / name
            folder.mkdir()
            (folder / "sim.json").write_text(json.dumps(sim))
            (folder / "liar.json").write_text(json.dumps(plan.faults.liar(f"{plan.seed}-{name}")))
            env = folder / "provider.env"
            env.write_text(f"SIM_CONFIG={folder / 'sim.json'}\nSIM_STATE_DIR={folder / 'state'}\n"
                           f"LIAR_CONFIG={folder / 'liar.json'}\n")
            env.chmod(0o600)
        self.c = open_controller(self.url)
        self.procs: list[Daemon] = []

    def config(self, instance: str) -> Path:
        providers = [{"name": name, "kind": kind, "env_file": str(self.tmp / name / "provider.env"),
                      "script": {"style": "v2", "path": str(LIAR_SCRIPT), "timeout": f"{SCRIPT_TIMEOUT}s"}}
                     for name, kind in self.kinds.items()]
        cfg = {
            "instance": {"id": instance, "serves": list(self.kinds), "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{TTL}s", "renew_every": f"{TTL / 4}s"},
            "policy": {k: (f"{v}s" if isinstance(v, float) else v) for k, v in POLICY.items()},
            "providers": providers,
            "resources": [{"name": RESOURCE, "elastic": True, "base": 0, "provider": UNITS}],
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def start(self, instance: str = "a") -> Daemon:
        d = Daemon(self, instance)  # type: ignore[arg-type]  # a world is shaped like a drill's cluster
        self.procs.append(d)
        return d

    def sim(self, name: str) -> dict[str, Any]:
        """A simulated provider's world, read from its state file (replaced whole, so never half written)."""
        path = self.tmp / name / "state" / "state.json"
        if not path.exists():
            return {"machines": {}, "grants": {}, "requests": {}, "in_use": {}}
        return json.loads(path.read_text())

    def liar(self, name: str) -> dict[str, Any]:
        path = self.tmp / name / "state" / "liar.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def check_out(self, decide: Callable[[int], int]) -> int:
        """Set the license server's use to ``decide(use now)``, under its lock (so no call reads it meanwhile)."""
        with scripts_module("simprov_store").locked_state(str(self.tmp / UNITS / "state")) as state:
            state["in_use"][RESOURCE] = n = decide(state["in_use"].get(RESOURCE, 0))
        return n

    def close(self) -> None:
        for d in self.procs:
            d.kill()
        self.c.close()

    def tail(self, lines: int = 60) -> str:
        """What the last daemon said last."""
        return "\n".join(self.procs[-1].text().splitlines()[-lines:]) if self.procs else ""


#: Facts states of hosts the scheduler keeps in its cluster (a lost one is still up: it keeps using it).
ADMITTED = frozenset({"provisioning", "running", "joined", "idle", "busy", "lost"})


class StandIn:
    """The scheduler, played: the cluster it sees, the work it places, the view and demand it puts."""

    def __init__(self, world: World, rng: random.Random, lose_events: float) -> None:
        self.world = world
        self.rng = rng
        self.lose_events = lose_events
        self.p = Projection()
        #: (provider, name) -> idle or busy: the hosts in the cluster
        self.cluster: dict[tuple[str, str], str] = {}
        self.want_busy = 0
        self.want_tokens = 0
        self.in_use = 0
        self.demand: tuple[int, int] | None = None
        self.events = 0
        self.lost = 0

    def _event(self, provider: str, name: str, event: str, named: bool, now: float) -> None:
        if event != "joined" and self.rng.random() < self.lose_events:
            self.lost += 1
            return
        self.world.c.post_host_event(name, event, now, provider=provider if named else None)  # type: ignore[arg-type]
        self.events += 1

    def cycle(self) -> None:
        c = self.world.c
        catch_up(self.p, c)
        now = time.time()
        made_by: dict[str, set[str]] = {}
        up: dict[tuple[str, str], str] = {}
        for provider in HOSTS:
            for mid, m in self.world.sim(provider)["machines"].items():
                made_by.setdefault(m["name"], set()).add(provider)
                inst = self.p.instances.get(f"{provider}/{mid}")
                if m["state"] == "running" and inst is not None and inst.state in ADMITTED:
                    up[(provider, m["name"])] = mid
        shared = {name for name, providers in made_by.items() if len(providers) > 1}
        for key in list(self.cluster):
            if key not in up:
                del self.cluster[key]  # it went down, or the daemon is giving it back: closed
        for key in sorted(up):
            if key not in self.cluster:
                self.cluster[key] = "idle"
                self._event(key[0], key[1], "joined", key[1] in shared, now)
        busy = [k for k in sorted(self.cluster) if self.cluster[k] == "busy"]
        idle = [k for k in sorted(self.cluster) if self.cluster[k] == "idle"]
        self.rng.shuffle(idle)
        while len(busy) > self.want_busy:
            key = busy.pop(self.rng.randrange(len(busy)))
            self.cluster[key] = "idle"
            self._event(key[0], key[1], "idle", key[1] in shared, now)
        while len(busy) < self.want_busy and idle:
            key = idle.pop()
            busy.append(key)
            self.cluster[key] = "busy"
            self._event(key[0], key[1], "busy", key[1] in shared, now)
        c.put_supply(SupplySnapshot(hosts=[
            SupplyHost(name=name, provider=provider if name in shared else None, state=state)  # type: ignore[arg-type]
            for (provider, name), state in sorted(self.cluster.items())]))
        totals: list[int] = []

        def tokens(in_use: int) -> int:
            """Jobs that end give their tokens back; jobs start on what the total allows, read right now.
            A total that drops below the use ends no job: tokens checked out stay so."""
            totals.append(next((t.total for t in c.resource_totals() if t.name == RESOURCE), 0))
            if self.want_tokens <= in_use:
                return self.want_tokens
            return max(in_use, min(self.want_tokens, totals[0]))

        self.in_use = self.world.check_out(tokens)
        demand = (max(0, self.want_busy - len(self.cluster)), max(0, self.want_tokens - totals[0]))
        if demand != self.demand:
            c.put_demand(DemandSnapshot(items=[HostItem(id="work", count=demand[0]),
                                               UnitItem(id="lic", resource=RESOURCE, count=demand[1])]))
            self.demand = demand

    def settled(self) -> bool:
        """Nothing held, at the providers or in the facts, and nothing under way."""
        for provider in (*HOSTS, UNITS):
            sim = self.world.sim(provider)
            if any(m["state"] in ("pending", "running") for m in sim["machines"].values()):
                return False
            if any(g["state"] in ("pending", "granted") and g["count"] > 0 for g in sim["grants"].values()):
                return False
        p = self.p
        return all(i.state in ("returned", "lost", "failed") for i in p.instances.values()) \
            and all(g.state in ("returned", "failed") for g in p.grants.values()) \
            and not p.open().requests


@dataclass
class Result:
    plan: Plan
    ledger: Ledger
    kills: int
    settled: bool
    seconds: float
    #: provider -> fault kind -> times injected
    injected: dict[str, dict[str, int]]
    machines: int
    grants: int
    events: int
    events_lost: int
    #: The last lines of the last daemon's log.
    tail: str = ""

    @property
    def clean(self) -> bool:
        """Settled, with every figure 0 and nothing held."""
        ledger = self.ledger
        return self.settled and ledger.leaked_seconds == 0 and ledger.double_creations == 0 \
            and ledger.units_returned_in_use == 0 and not ledger.held_at_end

    def summary(self) -> str:
        faults = "; ".join(f"{p}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                           for p, kinds in sorted(self.injected.items()))
        kinds = sorted({s.kind for s in self.ledger.spells})
        spells = ", ".join(f"{k} {sum(1 for s in self.ledger.spells if s.kind == k)} (longest "
                           f"{max(s.end - s.start for s in self.ledger.spells if s.kind == k):.1f}s)" for k in kinds)
        return (f"seed {self.plan.seed}: {self.seconds:.0f}s, {self.machines} machines and {self.grants} grants made, "
                f"{self.kills} daemon kills, {self.events} host events ({self.events_lost} lost), "
                f"settled: {self.settled}\n  faults: {faults}\n"
                f"  spells alive at a provider and not held by the facts: {spells or 'none'}\n"
                f"  leaked instance-seconds beyond the graces: {self.ledger.leaked_seconds:.1f}; "
                f"double creations: {self.ledger.double_creations}; "
                f"units returned in use: {self.ledger.units_returned_in_use}; "
                f"held after the calm: {len(self.ledger.held_at_end)}")


def run(tmp: Path, plan: Plan) -> Result:
    """One soak, bounded by ``plan.storm + plan.calm`` (and a daemon's stop)."""
    world = World(tmp, plan)
    # One stream each, so that the workload is the seed's alone, whenever the kills fall.
    work, kill = random.Random(f"{plan.seed}-work"), random.Random(f"{plan.seed}-kills")
    standin = StandIn(world, random.Random(f"{plan.seed}-scheduler"), plan.lose_events)
    started = time.monotonic()
    daemon = world.start()
    kills = 0
    settled = False
    try:
        next_kill = started + kill.uniform(*plan.kill_every)
        next_change = started
        while time.monotonic() - started < plan.storm:
            now = time.monotonic()
            if now >= next_change:
                standin.want_busy = work.randint(0, plan.max_busy)
                standin.want_tokens = work.randint(0, plan.max_tokens)
                next_change = now + work.uniform(*plan.change_every)
            if now >= next_kill:
                daemon.kill()
                kills += 1
                time.sleep(kill.uniform(*RESTART_PAUSE))  # the daemon is down meanwhile
                daemon = world.start()
                next_kill = time.monotonic() + kill.uniform(*plan.kill_every)
            standin.cycle()
            time.sleep(CYCLE)  # the scheduler's own pace
        standin.want_busy = standin.want_tokens = 0
        calm_until = time.monotonic() + plan.calm
        while time.monotonic() < calm_until:
            standin.cycle()
            if standin.settled():
                settled = True
                break
            time.sleep(CYCLE)
    finally:
        if daemon.alive():
            daemon.proc.terminate()
            try:
                daemon.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
        end = time.time()
        p = replay(world.c)
        sims = {name: world.sim(name) for name in world.kinds}
        liars = {name: world.liar(name) for name in world.kinds}
        tail = world.tail()
        world.close()
    ledger = draw(p, sims, liars, plan.graces(), end)
    return Result(plan=plan, ledger=ledger, kills=kills, settled=settled, seconds=time.monotonic() - started,
                  injected={name: liar.get("injected", {}) for name, liar in liars.items()},
                  machines=sum(len(sims[h]["machines"]) for h in HOSTS), grants=len(sims[UNITS]["grants"]),
                  events=standin.events, events_lost=standin.lost, tail=tail)
