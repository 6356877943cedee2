"""Real daemon processes on one SQLite controller, simulated clouds, and the invariants they must keep.

Every drill ends by checking the same promise: what the simulated provider
holds is exactly what the facts say, every machine it ever made is known to
the facts, and nothing was made twice for one need.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import yaml

from lease.port import INSTANCE, PLANNER, LeaseRecord
from messages.demand import DemandSnapshot, HostItem, UnitItem
from persistence.controller import open_controller, sqlite_path
from persistence.port import Controller
from persistence.replay import replay
from provisioner.cli.demo import SIM_SCRIPT
from tests.support.daemons import STARTUP, free_port, sim_call, tail, wait_until

HOSTS_SIM = {"kind": "hosts", "seed": 5, "name_prefix": "h", "priority": 10, "cost_per_hour": 0.5, "lead_time": 0.3,
             "templates": [{"id": "small", "max_number": 20, "attributes": {"type": "X86_64", "ncpus": 8}}]}
UNITS_SIM = {"kind": "units", "seed": 5, "priority": 5, "lead_time": 0.3,
             "pools": [{"resource": "vcs", "capacity": 20, "cost_per_unit_hour": 2.0}]}


#: Seconds every drill script may take.
SCRIPT_TIMEOUT = 10


class Cluster:
    """The shared parts: a controller file and the simulated clouds both daemons talk to."""

    def __init__(self, tmp: Path, ttl: float = 2.0, url: str | None = None, renew_every: float | None = None,
                 **policy: Any) -> None:
        """``renew_every``: a quarter of ``ttl`` unless given."""
        self.tmp = tmp
        self.url = url or f"sqlite:///{tmp / 'state.db'}"
        self.ttl = ttl
        self.renew_every = renew_every if renew_every is not None else ttl / 4
        # The drills' scheduler keeps its demand as first put (it does not lower it as supply
        # arrives), so granted supply must count as in flight for the whole drill, however slow
        # the machine: a grace shorter than a drill would rightly order the same need again.
        self.policy = {"poll_every": "0.1s", "plan_every": "0.1s", "idle_time": "0s", "join_grace": "10m",
                       "cooldown": "1s", "backoff_max": "0.5s", **policy}
        self.sims = {"hosts": HOSTS_SIM, "units": UNITS_SIM}
        for name, sim in self.sims.items():
            folder = tmp / name
            folder.mkdir()
            (folder / "sim.json").write_text(json.dumps(sim))
        self.c: Controller = open_controller(self.url)
        self.procs: list[Daemon] = []

    def provider(self, name: str, caller: str) -> dict:
        """The provider entry of one daemon: a wrapper that logs who ran what, then the simulator."""
        folder = self.tmp / name
        wrapper = folder / f"run-{caller}"
        # Written aside and moved in: a daemon of this caller may be executing the wrapper right now (a second
        # process of the same instance id starts beside the first), and a file being executed cannot be
        # opened for writing (ETXTBSY); the running one keeps the file it has.
        fresh = folder / f".run-{caller}.{os.getpid()}"
        fresh.write_text(
            "#!/bin/sh\n"
            f'echo "{caller} $1 $PROVISIONER_TOKEN $(date +%s.%N)" >> "{folder}/calls.log"\n'
            f'echo "{caller} $1 $PROVISIONER_DEADLINE" >> "{folder}/deadlines.log"\n'
            f'echo "$PPID $1" >> "{folder}/pids.log"\n'
            f'exec "{SIM_SCRIPT}" "$@"\n'
        )
        fresh.chmod(0o755)
        os.replace(fresh, wrapper)
        env = folder / f"{caller}.env"
        env.write_text(f"SIM_CONFIG={folder / 'sim.json'}\nSIM_STATE_DIR={folder / 'state'}\n")
        env.chmod(0o600)
        return {"name": name, "kind": self.sims[name]["kind"], "env_file": str(env),
                "script": {"style": "v2", "path": str(wrapper), "timeout": f"{SCRIPT_TIMEOUT}s"}}

    def config(self, instance: str) -> Path:
        cfg = {
            "instance": {"id": instance, "serves": list(self.sims), "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{self.ttl}s", "renew_every": f"{self.renew_every}s"},
            "policy": self.policy,
            "providers": [self.provider(n, instance) for n in self.sims],
            "resources": [{"name": "vcs", "elastic": True, "base": 0, "provider": "units"}],
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def start(self, instance: str, failpoints: str = "", log: str | None = None,
              args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> "Daemon":
        """``log``: the name of its log file, for a second process of the same instance; ``args``: of ``run``;
        ``env``: more of its environment."""
        d = Daemon(self, instance, failpoints, log, args, env)
        self.procs.append(d)
        return d

    @contextmanager
    def between_writes(self) -> Iterator[None]:
        """Hold the SQLite file's write lock, so no daemon is inside a write transaction meanwhile.

        A process frozen inside a write transaction keeps the file's lock, and
        every other process on the host waits for it (docs/recovery.md): a
        drill that freezes an owner to see a standby take over freezes it
        between two of its writes.
        """
        if not self.url.startswith("sqlite://"):
            yield
            return
        conn = sqlite3.connect(sqlite_path(self.url), timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    def close(self) -> None:
        for d in self.procs:
            d.kill()
        self.c.close()

    def tails(self, lines: int = 80) -> str:
        """What each daemon said last: drill fixtures print it, and pytest shows it when a drill fails."""
        return "\n".join(f"----- last lines of daemon {d.instance} -----\n" + "\n".join(d.text().splitlines()[-lines:])
                         for d in self.procs)

    # --- what the world looks like ----------------------------------------------

    def state(self):
        return replay(self.c)

    def sim_state(self, name: str) -> dict:
        return sim_call(self.tmp / name, "admin", None, "dump")

    def callers(self, name: str) -> list[tuple[int, str]]:
        """(pid of the daemon that ran it, action) of every call to the provider, in order."""
        log = self.tmp / name / "pids.log"
        rows = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        return [(int(r[0]), r[1]) for r in rows]

    def calls(self, name: str) -> list[tuple[str, str, str, float]]:
        log = self.tmp / name / "calls.log"
        if not log.exists():
            return []
        rows = [line.split() for line in log.read_text().splitlines()]
        return [(r[0], r[1], r[2] if len(r) > 3 else "", float(r[-1])) for r in rows]

    def decided_after(self, name: str, caller: str, moment: float) -> list[tuple[str, int]]:
        """Calls of ``caller`` the daemon decided on after ``moment``, as (action, deadline).

        The runner sets PROVISIONER_DEADLINE (whole seconds) when it builds a call, before
        it asks the lease mandate, so a call decided at t has deadline floor(t + SCRIPT_TIMEOUT).
        When a call starts says less: one decided just before a freeze may start after the thaw.
        """
        log = self.tmp / name / "deadlines.log"
        rows = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        return [(r[1], int(r[2])) for r in rows if r[0] == caller and int(r[2]) - SCRIPT_TIMEOUT > moment]

    def owner(self, role: str) -> str | None:
        lease = self.c.leases.get(role)
        return lease.holder if lease else None

    def join_running(self) -> None:
        """Play the scheduler: every running host joins."""
        for inst in self.state().instances.values():
            if inst.state == "running":
                self.c.post_host_event(inst.name, "joined", time.time())

    def idle_all(self) -> None:
        for inst in self.state().instances.values():
            if inst.state in ("joined", "busy"):
                self.c.post_host_event(inst.name, "idle", time.time())

    def check(self, hosts_wanted: int | None = None, units_wanted: int | None = None) -> None:
        """The invariants: the clouds hold exactly what the facts say; nothing unknown, nothing doubled."""
        p = self.state()
        machines = self.sim_state("hosts")["machines"]
        known = {i.machine_id: i for i in p.instances.values() if i.provider == "hosts"}
        unknown = sorted(set(machines) - set(known))
        assert not unknown, f"machines the facts never learned of: {unknown}"
        for mid, m in machines.items():
            live = m["state"] in ("pending", "running")
            inst = known[mid]
            assert live == (inst.state not in ("returned", "lost", "failed")), \
                f"{mid}: the cloud says {m['state']}, the facts say {inst.state}"
        if hosts_wanted is not None:
            assert len(machines) == hosts_wanted, \
                f"{len(machines)} machines made for a need of {hosts_wanted}: something was requested twice"
        grants = self.sim_state("units")["grants"]
        held = sum(g["count"] for g in grants.values() if g["state"] in ("pending", "granted"))
        ours = sum(g.count for g in p.grants.values() if g.state in ("granted", "return_planned", "returning"))
        assert held == ours, f"the license pool lends {held}, the facts say {ours}"
        if units_wanted is not None:
            requests = [f"{g['requested']} {g['state']} token {g.get('token')}" for g in grants.values()]
            facts = [(f.kind, f.payload) for f in self.c.read() if f.provider == "units" and f.kind != "usage_observed"]
            assert sum(g["requested"] for g in grants.values()) == units_wanted, \
                f"units requested twice: the pool lent {requests}; the facts: {facts}"


class Daemon:
    """One ``provisioner run`` process."""

    def __init__(self, cluster: Cluster, instance: str, failpoints: str = "", log: str | None = None,
                 args: tuple[str, ...] = (), more_env: dict[str, str] | None = None) -> None:
        self.instance = instance
        self.cluster = cluster
        self.log = cluster.tmp / f"{log or instance}.log"
        env = {**os.environ, "PROVISIONER_FAILPOINTS": failpoints, **(more_env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "provisioner.cli", "--config", str(cluster.config(instance)), "run", *args],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_dead(self, timeout: float = 30.0) -> int:
        wait_until(lambda: not self.alive(), timeout, f"daemon {self.instance} to die")
        return self.proc.returncode

    def stopped(self) -> bool:
        """Whether every thread of the daemon is stopped (by SIGSTOP), as /proc tells."""
        states = []
        try:
            tasks = os.listdir(f"/proc/{self.proc.pid}/task")
        except FileNotFoundError:  # it died: not stopped, and the wait names the daemon when it gives up
            return False
        for task in tasks:
            try:
                stat = Path(f"/proc/{self.proc.pid}/task/{task}/stat").read_text()
            except FileNotFoundError:  # a thread that just ended
                continue
            states.append(stat.rsplit(")", 1)[1].split()[0])
        return bool(states) and all(state in ("T", "t") for state in states)

    def signal(self, sig: int) -> None:
        """SIGKILL the whole process group; freeze and thaw only the daemon itself.

        Scripts run in process groups of their own either way. What stopping the
        group would add is a script caught half-spawned (the child between
        fork and exec is still in the daemon's group): it would start after the
        thaw although its call was decided, under the lease, before the freeze.
        """
        if self.alive():
            if sig == signal.SIGSTOP:
                with self.cluster.between_writes():
                    os.kill(self.proc.pid, sig)
                    # The signal lands a moment later: until every thread has stopped, one
                    # waiting for the write lock would take it as soon as it is let go.
                    wait_until(self.stopped, timeout=10, what=f"daemon {self.instance} to stop")
            elif sig == signal.SIGCONT:
                os.kill(self.proc.pid, sig)
            else:
                os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        if self.alive():
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return tail(self.log, lines)

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = STARTUP) -> Any:
        """Wait for a condition this daemon brings about (its start, its leases): generously, as its
        start-up alone takes seconds on a loaded machine, and no longer than it lives; a failure says
        what it printed."""
        def check() -> Any:
            value = predicate()
            if not value and not self.alive():
                raise AssertionError(f"daemon {self.instance} exited ({self.proc.returncode}) while waiting for "
                                     f"{what}; it printed, last:\n{self.tail()}")
            return value

        return wait_until(check, timeout, what, said=self.tail)


# --- failover drills, run on each controller backend ----------------------------------

ROLES = {"planner", "provider:hosts", "provider:units"}
DEMAND = DemandSnapshot(items=[HostItem(id="d1", count=4), UnitItem(id="d2", resource="vcs", count=3)])


def owned_by(cluster, instance):
    return {lease.name for lease in cluster.c.leases.all() if lease.holder == instance}


def met(cluster, hosts: int = 4, at_least: bool = False):
    p = cluster.state()
    running = sum(1 for i in p.instances.values() if i.state == "running")
    granted = sum(g.count for g in p.grants.values() if g.state == "granted")
    if at_least:  # met, and maybe more than once: the caller's check says which
        return running >= hosts and granted >= 3
    return running == hosts and granted == 3


def owner_mid_flight_with_standby(cluster):
    """Daemon a owns every role and has a request in flight; daemon b stands by."""
    a = cluster.start("a")
    a.wait(lambda: owned_by(cluster, "a") == ROLES, "a to own everything")
    b = cluster.start("b")
    b.wait(lambda: "daemon b started" in b.text(), "b to start")
    cluster.c.put_demand(DEMAND)
    wait_until(lambda: any(r.state in ("submitted", "running") for r in cluster.state().requests.values()),
               what="a request in flight")
    return a, b


def kill_9_the_owner(cluster) -> None:
    """Drill 2: a standby takes over from an owner killed mid-flight and finishes the work."""
    a, b = owner_mid_flight_with_standby(cluster)
    a.signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: owned_by(cluster, "b") == ROLES, timeout=cluster.ttl + 5, what="b to take over")
    took_over = time.monotonic() - killed
    assert took_over <= cluster.ttl + 1.0, f"takeover took {took_over:.2f}s, TTL is {cluster.ttl}s"
    wait_until(lambda: met(cluster), what="the standby to meet the demand")
    cluster.check(hosts_wanted=4, units_wanted=3)
    assert b.alive()


class Takeover(NamedTuple):
    """Seconds from the owner's ``kill -9``, and from the lapse of its leases, until the standby held every role."""

    after_kill: float
    after_lapse: float


def _table(cluster) -> tuple[dict[str, LeaseRecord], float]:
    """The lease table, and when it was read (``time.monotonic``: the middle of the call)."""
    before = time.monotonic()
    table = cluster.c.leases.table()
    return {r.name: r for r in table}, (before + time.monotonic()) / 2


def kill_9_and_time_the_takeover(cluster, owner: "Daemon", standby: "Daemon") -> Takeover:
    """Kill ``owner``, which holds every role, and time how long until ``standby`` holds them all.

    The moments come from the lease table, each within its reading's round trip: the lapse of each of
    the owner's leases as it was left (its last renewal plus the TTL), and the grant of each to the
    standby, so nothing in the daemons is timed.
    """
    killed = time.monotonic()
    owner.signal(signal.SIGKILL)
    owner.proc.wait(timeout=10)
    left, read = _table(cluster)  # the owner is dead: no renewal can move these any more
    gone = [name for name in ROLES if left[name].holder != owner.instance]
    assert not gone, f"{gone} passed on before the owner's leases could be read (ttl {cluster.ttl} s)"
    lapse = {name: read + left[name].expires_in for name in ROLES}
    standby.wait(lambda: owned_by(cluster, standby.instance) == ROLES, f"{standby.instance} to take every role",
                 timeout=cluster.ttl + 10)
    taken, read = _table(cluster)
    granted = {name: read - taken[name].granted_ago for name in ROLES}
    return Takeover(after_kill=max(granted.values()) - killed,
                    after_lapse=max(granted[name] - lapse[name] for name in ROLES))


def _last_renewal(cluster, name: str) -> float:
    """When (``time.monotonic``) the holder of ``name`` last renewed it, by the lease table."""
    rows, read = _table(cluster)
    return read + rows[name].expires_in - cluster.ttl


def standby_in_its_worst_phase(cluster, owner: "Daemon", standby: "Daemon") -> float:
    """Make the standby's rounds come right after the owner's renewals; how long after, in seconds.

    Then a lease the owner renewed last at R lapses at R + ttl, and the standby's rounds, at R + d + k x
    renew_every, come just before that (``ttl`` is not a whole number of ``renew_every``) or long after it:
    with deployment.md's lease (10 s, 3 s), the next round after the lapse is 2 s + d after it. A standby
    that only looks at its rounds takes over then; one that asks at the lapse, at once. The standby is
    frozen (between two writes) until the owner renews a whole ``renew_every`` after the standby's last
    round, and woken: its tick then finds its round due, and it renews its instance lease at once.
    """
    standby.signal(signal.SIGSTOP)
    its_round = _last_renewal(cluster, INSTANCE + standby.instance)
    due = its_round + cluster.renew_every
    renewed = wait_until(lambda: (at := _last_renewal(cluster, PLANNER)) > due and at,
                         timeout=2 * cluster.renew_every + 10, what=f"{owner.instance} to renew", said=owner.tail)
    standby.signal(signal.SIGCONT)
    woke = standby.wait(lambda: (at := _last_renewal(cluster, INSTANCE + standby.instance)) > renewed and at,
                        f"{standby.instance} to round on waking", timeout=10)
    return woke - renewed


#: What a standby may take past the lapse of the lease it waits for, in the drills: docs/config.md says
#: "plus its own call to the controller" (milliseconds on SQLite); this leaves room for a loaded machine.
LAPSE_MARGIN = 1.0


def takeover_within_the_documented_bound(cluster) -> Takeover:
    """Drill 2b: with deployment.md's lease, a standby holds a killed owner's roles within ``ttl`` of its last
    renewal, give or take the margin of a loaded machine; the views say who is who before and after."""
    a = cluster.start("a")
    a.wait(lambda: owned_by(cluster, "a") == ROLES, "a to own everything")
    b = cluster.start("b")
    b.wait(lambda: cluster.c.leases.get("instance:b") is not None, "b to stand by")
    rows = {r["instance"]: r for r in daemons(cluster)}
    assert rows["a"]["state"] == "active" and rows["a"]["planner"] and rows["a"]["providers"] == ["hosts", "units"]
    assert rows["b"]["state"] == "standby" and not rows["b"]["planner"] and rows["b"]["providers"] == []
    assert rows["b"]["since"] >= rows["a"]["since"], "b started after a"
    phase = standby_in_its_worst_phase(cluster, a, b)
    print(f"b's rounds come {phase:.2f} s after a's renewals: its next round after a lapse "
          f"{(phase - cluster.ttl) % cluster.renew_every:.2f} s after it")
    took = kill_9_and_time_the_takeover(cluster, a, b)
    assert -0.05 <= took.after_lapse <= LAPSE_MARGIN, \
        f"the standby held every role {took.after_lapse:.3f} s after the owner's leases lapsed"
    assert took.after_kill <= cluster.ttl + LAPSE_MARGIN, f"takeover {took.after_kill:.2f} s after kill -9"
    rows = {r["instance"]: r for r in daemons(cluster)}
    assert rows["b"]["state"] == "active" and rows["b"]["planner"] and rows["b"]["providers"] == ["hosts", "units"]
    assert rows["a"]["state"] == "lapsed" and rows["a"]["providers"] == [], "a's instance lease lapsed"
    assert b.alive()
    return took


def daemons(cluster) -> list[dict[str, Any]]:
    """``provisioner daemons -o json`` on the cluster's controller, as an operator would run it."""
    out = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", cluster.url, "daemons", "-o",
                          "json"], capture_output=True, text=True, timeout=60, cwd=cluster.tmp,
                         env={**os.environ, "PROVISIONER_HOME": str(cluster.tmp / "home-cli")})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def pause_the_owner(cluster) -> None:
    """Drill 3: an owner paused past its TTL wakes fenced out and acts no more."""
    a, b = owner_mid_flight_with_standby(cluster)
    frozen = time.time()
    a.signal(signal.SIGSTOP)
    wait_until(lambda: owned_by(cluster, "b") == ROLES, timeout=cluster.ttl + 5, what="b to take over")
    taken = cluster.c.last_seq()
    fences = {lease.name: lease.fence for lease in cluster.c.leases.all()}
    wait_until(lambda: met(cluster), what="the standby to meet the demand")
    # Keep a paused while b works; then wake it into a world that moved on.
    a.signal(signal.SIGCONT)
    wait_until(lambda: a.text().count("given up") >= 3, timeout=30, what="a to learn it lost its leases")
    # Give a's threads time to try whatever they had queued; then judge what reached the world.
    settle = time.monotonic()
    wait_until(lambda: time.monotonic() - settle > 1.0, what="a moment")
    late = [f for f in cluster.c.read(after=taken) if f.lease in fences and f.fence != fences[f.lease]]
    assert not late, f"writes under a lost fence were accepted: {[(f.kind, f.lease, f.fence) for f in late]}"
    for provider in ("hosts", "units"):
        # A call decided just before the freeze may start after the thaw (docs/recovery.md);
        # one decided after it would be a script run without the lease.
        assert any(row[0] == "a" for row in cluster.calls(provider)), "a ran scripts before the freeze"
        after_wake = cluster.decided_after(provider, "a", frozen)
        assert not after_wake, f"a decided on scripts after waking without its lease: {after_wake}"
    assert {lease.holder for lease in cluster.c.leases.all() if lease.name in ROLES} == {"b"}
    cluster.check(hosts_wanted=4, units_wanted=3)


def same_id_twice(cluster) -> None:
    """Drill 4: a second process started with the same instance id waits, acts on nothing, then takes over.

    Two processes with one id would hold the same role leases under the same
    fences, and both plan: each demand change is a race between two planners.
    The second must instead say once that it waits, make no call while the
    first lives, and take over (under fences of its own) when the first is
    killed; the demand, raised step by step, is met exactly once all along.
    """
    first = cluster.start("a")
    first.wait(lambda: owned_by(cluster, "a") == ROLES, "a to own everything")
    second = cluster.start("a", log="a-again")
    second.wait(lambda: "daemon a started" in second.text(), "the second process to start")
    for hosts in range(1, STEPS + 1):
        cluster.c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=hosts),
                                                   UnitItem(id="d2", resource="vcs", count=3)]))
        step = time.monotonic()
        wait_until(lambda: time.monotonic() - step > 0.5, what="a few planning rounds")
    wait_until(lambda: met(cluster, STEPS, at_least=True), timeout=60, what="the demand met")
    # Some rounds more: a second process acting on its own would have ordered the same need again by now.
    settle = time.monotonic()
    wait_until(lambda: time.monotonic() - settle > 2 * cluster.ttl, timeout=2 * cluster.ttl + 5, what="a while")
    cluster.check(hosts_wanted=STEPS, units_wanted=3)
    wait_until(lambda: STANDBY in second.text(), timeout=cluster.ttl + 10, what="the second process to say it waits")
    for provider in cluster.sims:
        by_second = [action for pid, action in cluster.callers(provider) if pid == second.proc.pid]
        assert not by_second, f"the second process called {provider} while the first held the instance: {by_second}"
    said = [line for line in second.text().splitlines() if STANDBY in line]
    assert len(said) == 1 and "WARNING" in said[0] and "instance a" in said[0], said
    assert f":{first.proc.pid}/" in said[0], "it names the process that holds the instance"
    fences = {lease.name: lease.fence for lease in cluster.c.leases.all() if lease.name in ROLES}

    first.signal(signal.SIGKILL)
    first.proc.wait(timeout=10)

    def taken_over() -> bool:
        instance = cluster.c.leases.get("instance:a")
        roles = {lease.name: lease.fence for lease in cluster.c.leases.all() if lease.name in ROLES}
        return (instance is not None and f":{second.proc.pid}/" in instance.holder and set(roles) == ROLES
                and all(roles[name] > fences[name] for name in ROLES))

    wait_until(taken_over, timeout=cluster.ttl + 10, what="the second process to take over under new fences")
    wait_until(lambda: all(any(pid == second.proc.pid for pid, _ in cluster.callers(p)) for p in cluster.sims),
               what="the second process to act on every provider")
    wait_until(lambda: met(cluster, STEPS), what="the demand still met")
    cluster.check(hosts_wanted=STEPS, units_wanted=3)
    assert second.alive()


#: The steps the drill's demand for hosts is raised by, one host each.
STEPS = 6
#: What a second process with the same instance id says, once.
STANDBY = "another process holds lease instance:a"
