"""Drills against a real Slurm (issue 29): slurmctld calls provisioner-slurm, a real daemon makes the hosts, each
host a real ``slurmd -b -N NAME`` on this machine, and the sync service binds them, so jobs really run on them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from messages.states import REQUEST
from tests.support.daemons import free_port, wait_until
from tests.support.drills import Cluster
from tests.support.slurm import SlurmWorld, installed, kill_machine, kill_machines, machines, node_processes

pytestmark = pytest.mark.slow
PROVIDER = Path(__file__).parents[1] / "support" / "slurmd_provider.py"
LIVE = ("requested", "provisioning", "running", "joined", "idle", "busy", "return_planned", "returning")


class SlurmCluster(Cluster):
    """One daemon serving a provider whose machines are local slurmds, and the bridge's config beside it."""

    def __init__(self, tmp: Path, deliver: str = "yes", delay: float = 0.0, nodes: int = 4, dynamic: str = "",
                 future: bool = False, **policy) -> None:
        super().__init__(tmp, ttl=3.0, **policy)
        self.deliver, self.delay, self.nodes, self.dynamic, self.future = deliver, delay, nodes, dynamic, future
        self.state_dir = tmp / "machines"
        self.slurm: SlurmWorld | None = None
        self.syncs: list[subprocess.Popen] = []

    def provider(self, name: str, caller: str) -> dict:
        folder = self.tmp / name
        wrapper = folder / f"run-{caller}"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{PROVIDER}" "$@"\n')
        wrapper.chmod(0o755)
        env = folder / f"{caller}.env"
        assert self.slurm is not None
        env.write_text(f"SLURMD_STATE={self.state_dir}\nSLURM_CONF={self.slurm.conf}\nSLURMD=/usr/sbin/slurmd\n"
                       f"SLURMD_DELIVER={self.deliver}\nSLURMD_DELAY={self.delay}\nSLURMD_MAX={self.nodes * 2}\n"
                       f"SLURMD_DYNAMIC={self.dynamic}\nSLURMD_FUTURE={'yes' if self.future else 'no'}\n")
        env.chmod(0o600)
        return {"name": name, "kind": "hosts", "env_file": str(env),
                "script": {"style": "v2", "path": str(wrapper), "timeout": "20s"}}

    def config(self, instance: str) -> Path:
        cfg = {
            "instance": {"id": instance, "serves": ["hosts"], "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{self.ttl}s", "renew_every": f"{self.ttl / 4}s"},
            "policy": self.policy,
            "providers": [self.provider("hosts", instance)],
            "slurm": {"partitions": ["dyn"], "drain_after": "5s", "sync_every": "1s"} if self.dynamic else
                     {"nodes": [{"names": f"cloud[1-{self.nodes}]", "provider": "hosts", "template": "node"}],
                      "sync_every": "1s"},
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def sync(self) -> subprocess.Popen:
        assert self.slurm is not None
        proc = subprocess.Popen([sys.executable, "-m", "slurm.main", "--config", str(self.tmp / "a.yaml"), "sync"],
                                stdout=open(self.tmp / "sync.log", "ab"), stderr=subprocess.STDOUT,
                                env=self.slurm.env, start_new_session=True)
        self.syncs.append(proc)
        return proc

    def live(self) -> list[str]:
        """The names of hosts standing or being made (a request in flight counts: a machine may come of it)."""
        p = self.state()
        hosts = {i.host for i in p.instances.values() if i.state in LIVE}
        for r in p.requests.values():
            if r.action == "request" and r.state not in REQUEST.terminal:
                hosts.update(r.names)
        return sorted(hosts)


@pytest.fixture
def make_world(tmp_path):
    """A world of the drill's own: ``make_world(deliver=..., delay=..., **policy)``, then ``.slurm`` set by the drill
    (its slurm.conf's timeouts are the drill's); everything it started is stopped at the end, and its logs shown."""
    assert not installed(), f"Slurm is not installed ({', '.join(installed())}): .ci/run installs it"
    made: list[SlurmCluster] = []

    def make(deliver: str = "yes", delay: float = 0.0, nodes: int = 4, dynamic: str = "", future: bool = False,
             **policy) -> SlurmCluster:
        cluster = SlurmCluster(tmp_path, deliver=deliver, delay=delay, nodes=nodes, dynamic=dynamic, future=future,
                               **{"idle_time": "0s", **policy})
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        for proc in cluster.syncs:
            proc.kill()
            proc.wait(10)
        cluster.close()
        kill_machines(cluster.state_dir)
        if cluster.slurm is not None:
            print("----- slurmctld -----\n" + cluster.slurm.log(60))
            cluster.slurm.stop()
        print(cluster.tails())
    sync_log = tmp_path / "sync.log"
    print("----- sync -----\n" + (sync_log.read_text()[-4000:] if sync_log.exists() else ""))


@pytest.fixture
def world(make_world):
    return make_world()


@pytest.mark.timeout(420)
def test_power_saving_three_jobs_resume_three_nodes_run_and_are_given_back(world, tmp_path):
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", suspend_time=10)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    jobs = [world.slurm.submit("-N1", "-c2", "--wrap", "sleep 2") for _ in range(3)]
    wait_until(lambda: len(world.live()) == 3, 90, "three hosts made for three resumed nodes",
               said=lambda: world.slurm.said("resume") + daemon.tail())
    wait_until(lambda: all(world.slurm.jobs().get(j) == "COMPLETED" for j in jobs), 180,
               "the three jobs run on the hosts the daemon made", said=world.slurm.log)
    ran = {m["name"] for m in machines(world.state_dir).values()}
    assert len(ran) == 3 and ran <= set(world.slurm.names)
    wait_until(lambda: world.live() == [], 120, "the suspended nodes' hosts given back",
               said=lambda: world.slurm.said("suspend") + daemon.tail())
    made = [i for i in world.state().instances.values()]
    assert len(made) == 3 and {i.state for i in made} == {"returned"}, [(i.host, i.state) for i in made]
    assert not any(world_alive(m) for m in machines(world.state_dir).values()), "a slurmd still runs"


def world_alive(m) -> bool:
    return bool(m.get("pid")) and Path(f"/proc/{m['pid']}").exists() and \
        Path(f"/proc/{m['pid']}/stat").read_text().split(")")[-1].split()[0] not in ("Z", "X")


@pytest.mark.timeout(420)
def test_a_provider_that_never_delivers_the_node_goes_down_resume_fail_ends_it_and_it_can_be_resumed(make_world,
                                                                                                    tmp_path):
    world = make_world(deliver="never")
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", resume_timeout=25)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    job = world.slurm.submit("-N1", "-c2", "--wrap", "true")
    wait_until(lambda: world.live() == ["cloud1"], 90, "a host ordered for the resumed node",
               said=lambda: world.slurm.said("resume") + daemon.tail())
    wait_until(lambda: "nodes_resume_failed" in {f.kind for f in world.c.read()}, 150,
               "Slurm giving up on the node at ResumeTimeout and calling ResumeFailProgram",
               said=lambda: world.slurm.log() + world.slurm.said("resume-fail"))
    state, flags = world.slurm.nodes()["cloud1"]
    assert state == "DOWN" and ("POWERED_DOWN" in flags or "POWERING_DOWN" in flags), (state, flags)
    wait_until(lambda: world.live() == [], 90, "what was being made for the node ended", said=daemon.tail)
    (called_off,) = [r for r in world.state().requests.values() if r.action == "request"]
    assert called_off.state == "called_off", called_off.state
    world.slurm.run("scontrol", "update", "nodename=cloud1", "state=resume")
    wait_until(lambda: world.live() == ["cloud1"], 150, "the node resumed again: a new host ordered for it",
               said=lambda: world.slurm.log() + daemon.tail())
    again = [r for r in world.state().requests.values() if r.action == "request" and r.id != called_off.id]
    assert len(again) == 1 and again[0].names == ["cloud1"], again
    world.slurm.run("scancel", str(job))


@pytest.mark.timeout(480)
def test_kill_9_of_the_owner_between_a_resume_and_its_host_the_standby_makes_the_host_once(make_world, tmp_path):
    # Machines take 8 s to boot, and boot only while a daemon asks about them: the owner dies in between.
    world = make_world(delay=8.0)
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml")
    world.config("a")
    world.config("b")
    a = world.start("a")
    a.wait(lambda: world.owner("provider:hosts") == "a" and world.owner("planner") == "a", "a owns everything")
    b = world.start("b")
    world.sync()
    job = world.slurm.submit("-N1", "-c2", "--wrap", "true")
    submitted = lambda: [r for r in world.state().requests.values()  # noqa: E731
                         if r.action == "request" and r.state in ("submitted", "running")]
    wait_until(lambda: submitted() and not world.state().instances, 90,
               "the resumed node's request accepted by the provider, no host yet",
               said=lambda: world.slurm.said("resume") + a.tail())
    a.kill()
    wait_until(lambda: world.owner("provider:hosts") == "b", 60, "the standby owning the provider", said=b.tail)
    wait_until(lambda: world.slurm.jobs().get(job) == "COMPLETED", 240, "the job run on the host the standby saw "
               "through", said=lambda: world.slurm.log() + b.tail())
    made = machines(world.state_dir)
    assert [m["name"] for m in made.values()] == ["cloud1"], "one machine, for the one node: no double"
    requests = [r for r in world.state().requests.values() if r.action == "request"]
    assert len(requests) == 1 and requests[0].names == ["cloud1"], [(r.id, r.names) for r in requests]
    (inst,) = world.state().instances.values()
    assert inst.node == "cloud1" and inst.machine_id in made


@pytest.mark.timeout(600)
def test_drift_a_host_killed_behind_slurms_back_and_a_host_standing_for_a_powered_down_node(make_world, tmp_path):
    world = make_world()
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", suspend_time=30)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    job = world.slurm.submit("-N1", "-c2", "--requeue", "--wrap", "sleep 20")
    wait_until(lambda: world.slurm.jobs().get(job) == "RUNNING", 150, "the job running on its host",
               said=lambda: world.slurm.log() + daemon.tail())
    wait_until(lambda: len(node_processes("cloud1", world.slurm.conf)) >= 2, 60,
               "the job's step and task on cloud1")
    ((first, m),) = machines(world.state_dir).items()
    kill_machine("cloud1", m["pid"], world.slurm.conf)  # the machine dies with its job; Slurm has not noticed
    wait_until(lambda: "it has no host: taken down" in (tmp_path / "sync.log").read_text(), 120,
               "the bridge taking down the node whose host is gone",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:])
    wait_until(lambda: world.slurm.jobs().get(job) == "COMPLETED", 300,
               "the job requeued and run on a new host", said=lambda: world.slurm.log() + daemon.tail())
    assert restarts(world.slurm, job) >= 1, "the job was requeued, not ended where its host died"
    assert len(machines(world.state_dir)) == 2, "a second machine made for the requeued job"
    lost = world.state().instances[f"hosts/{first}"]
    assert lost.state in ("lost", "returned", "orphaned"), lost.state
    # A host made for a node Slurm keeps powered down: asked by hand, as a resume Slurm never made.
    subprocess.run([sys.executable, "-m", "slurm.main", "--config", str(tmp_path / "a.yaml"), "resume", "cloud4"],
                   check=True, timeout=30, env=world.slurm.env)
    wait_until(lambda: any(i.node == "cloud4" for i in world.state().instances.values()), 90,
               "a host made for cloud4", said=daemon.tail)
    wait_until(lambda: "cloud4" not in world.live(), 90, "the host of the powered-down node given back",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:])
    state, flags = world.slurm.nodes()["cloud4"]
    assert flags & {"POWERED_DOWN", "POWERING_DOWN"}, (state, flags)
    state, flags = world.slurm.nodes()["cloud1"]
    assert state != "DOWN", "the node taken down for its lost host is back in service"


@pytest.mark.timeout(480)
def test_a_hundred_nodes_in_one_resume_one_call_one_order_a_hundred_hosts_all_given_back(make_world, tmp_path):
    # Machines that run no slurmd (a hundred slurmds would not fit this machine): they never register, so
    # Slurm gives up on them at ResumeTimeout and the daemon gives back all it made.
    world = make_world(deliver="records", nodes=100)
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", nodes=100, resume_timeout=40)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    job = world.slurm.submit("-N100", "--wrap", "true")
    wait_until(lambda: len(world.live()) == 100 and len(machines(world.state_dir)) == 100, 120,
               "a hundred hosts made for the hundred resumed nodes",
               said=lambda: world.slurm.said("resume") + daemon.tail())
    resumes = [f for f in world.c.read() if f.kind == "nodes_resumed"]
    assert len(resumes) == 1 and len(resumes[0].payload.names) == 100, "one resume call, all the names in it"
    orders = [f.payload for f in world.c.read() if f.kind == "order" and f.payload.action == "request"]
    assert len(orders) == 1 and orders[0].count == 100 and len(set(orders[0].names)) == 100, \
        [(o.count, len(o.names)) for o in orders]
    assert sorted(m["name"] for m in machines(world.state_dir).values()) == sorted(world.slurm.names)
    world.slurm.run("scancel", str(job))
    wait_until(lambda: {i.state for i in world.state().instances.values()} == {"returned"}, 240,
               "every host given back once Slurm gave up on its node",
               said=lambda: world.slurm.said("resume-fail") + daemon.tail())
    instances = world.state().instances
    kept = {mid: (m["name"], m["request"], (i.state, i.node) if (i := instances.get(f"hosts/{mid}")) else None)
            for mid, m in machines(world.state_dir).items() if not m["returned"]}
    assert len(instances) == 100 and not kept, f"all hundred back at the provider; kept there: {kept}"


@pytest.mark.timeout(480)
def test_dynamic_nodes_eight_pending_jobs_packed_into_one_host_run_then_drained_given_back_and_deleted(make_world,
                                                                                                     tmp_path):
    # One dynamic slurmd fits this machine (slurmd -Z takes no Port=): a 16-CPU host holds the eight 2-CPU jobs.
    world = make_world(dynamic="CPUs=16 RealMemory=16000 Feature=dyn", nodes=2)
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", nodes=2, dynamic=True)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    jobs = [world.slurm.submit("-p", "dyn", "-c2", "--mem=500", "--wrap", "sleep 10") for _ in range(8)]
    wait_until(lambda: any(f.kind == "order" for f in world.c.read()), 90, "the pending jobs ordered as hosts",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:] + daemon.tail())
    wait_until(lambda: all(world.slurm.jobs().get(j) == "COMPLETED" for j in jobs), 240,
               "the eight jobs run on the host the daemon packed them into",
               said=lambda: world.slurm.log() + daemon.tail())
    made = machines(world.state_dir)
    assert [m["name"] for m in made.values()] == ["dyn-1"], "one 16-CPU host for eight 2-CPU jobs"
    ran_on = {j["job_id"]: j["nodes"] for j in json.loads(world.slurm.run("squeue", "--json").stdout)["jobs"]}
    assert {ran_on[j] for j in jobs} == {"dyn-1"}, ran_on
    assert all(restarts(world.slurm, j) == 0 for j in jobs), "no job was cut off by its host's return"
    wait_until(lambda: world.live() == [] and "dyn-1" not in world.slurm.nodes(), 120,
               "the idle node drained, its host given back and the node deleted",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:] + daemon.tail())
    (inst,) = world.state().instances.values()
    assert inst.state == "returned" and inst.name == "dyn-1" and not inst.node, (inst.state, inst.name, inst.node)
    assert all(m["returned"] for m in machines(world.state_dir).values())
    said = (world.slurm.tmp / "log" / "slurmctld.log").read_text(errors="replace")
    assert "node dyn-1 reason set to: provisioner: idle" in said, "drained before it was given back"


def restarts(slurm: SlurmWorld, job: int) -> int:
    """How many times Slurm requeued the job (``squeue --json`` lists finished jobs too)."""
    doc = json.loads(slurm.run("squeue", "--json").stdout)
    return next(j["restart_cnt"] for j in doc["jobs"] if j["job_id"] == job)


@pytest.mark.timeout(480)
def test_warm_capacity_a_burst_starts_on_the_warm_dynamic_nodes_at_once_and_a_job_beyond_them_waits_lead_time(
        make_world, tmp_path):
    # Machines boot in LEAD seconds; two are kept warm. Dynamic nodes here are slurm.conf's future nodes dyn-1 ..
    # (slurmd -F, a Port= each), since only one slurmd -Z fits a machine; the bridge sees them as any dynamic node.
    lead, drain_after = 25, 5
    world = make_world(dynamic="CPUs=2 RealMemory=1000 Feature=dyn", future=True, delay=float(lead), nodes=8,
                       min_idle=2)
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", nodes=8, dynamic=True, future="CPUs=2 RealMemory=1000",
                             suspend_time=3600)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    sync_log = lambda: (tmp_path / "sync.log").read_text()[-3000:]  # noqa: E731

    def idle_nodes() -> list[str]:
        return sorted(n for n, (state, flags) in world.slurm.nodes().items()
                      if state == "IDLE" and not flags & {"DRAIN", "DRAINED", "POWERING_DOWN", "POWERED_DOWN"})

    warm = wait_until(lambda: idle if len(idle := idle_nodes()) == 2 else None, 150,
                      "two warm hosts made, registered and idle in Slurm", said=lambda: sync_log() + daemon.tail())
    since = time.monotonic()

    def held() -> bool:
        assert idle_nodes() == warm, f"the warm nodes stay idle and undrained: {world.slurm.nodes()}"
        return time.monotonic() - since >= 3 * drain_after

    wait_until(held, 60, f"the warm nodes idle for 3 x drain_after ({drain_after}s)", said=sync_log)
    orders = lambda: [f for f in world.c.read() if f.kind == "order" and f.payload.action == "request"]  # noqa: E731
    before = len(orders())
    assert [(f.payload.item_id, f.payload.count) for f in orders()] == [("warm/*", 2)], \
        "two warm hosts ordered, and no more for the two that are up"
    jobs = [world.slurm.submit("-p", "dyn", "-c2", "--wrap", "sleep 240") for _ in range(3)]
    times = lambda: {j["job_id"]: (j["job_state"], j["submit_time"], j["start_time"], j["nodes"])  # noqa: E731
                     for j in json.loads(world.slurm.run("squeue", "--json").stdout)["jobs"]}
    wait_until(lambda: sum(times()[j][0] == "RUNNING" for j in jobs) >= 2, 60, "two of the burst running",
               said=world.slurm.log)
    burst = sorted((start - submit, node) for j in jobs if (t := times()[j])[0] == "RUNNING"
                   for _, submit, start, node in [t])
    assert len(burst) == 2 and {node for _, node in burst} == set(warm), burst
    assert all(waited <= lead / 3 for waited, _ in burst), \
        f"the burst started on the warm nodes without waiting the lead time ({lead}s): waited {burst}"
    (third,) = [j for j in jobs if times()[j][0] != "RUNNING"]
    wait_until(lambda: times()[third][0] == "RUNNING", 180, "the job beyond the warm nodes running on a new host",
               said=lambda: sync_log() + daemon.tail())
    _, submit, start, node = times()[third]
    assert start - submit >= lead - 1 and node not in warm, \
        f"the third job waited for a new host ({node}): {start - submit}s after its submit, lead time {lead}s"
    refill = [f for f in orders()[before:] if f.payload.item_id == "warm/*"]
    assert sum(f.payload.count for f in refill) >= 2, "the daemon ordered new warm hosts once the burst took them"
    wait_until(lambda: len(idle_nodes()) >= 2, 150, "two new warm hosts idle and ready again",
               said=lambda: sync_log() + daemon.tail())
    assert not set(idle_nodes()) & set(warm) and times()[third][0] == "RUNNING"
    print(f"warm burst: started {[w for w, _ in burst]}s after submit; the job beyond them {start - submit}s "
          f"(lead time {lead}s)")
    world.slurm.run("scancel", *map(str, jobs))


@pytest.mark.timeout(300)
def test_a_stopped_cluster_leaves_no_job_step_behind(world, tmp_path):
    """A drill that fails ends with its jobs still running: a slurmd killed under them leaves their steps
    (``slurmstepd``) and tasks alive. Stopping the cluster kills them too, so nothing outlives a drill."""
    world.slurm = SlurmWorld(tmp_path, tmp_path / "a.yaml", suspend_time=60)
    world.config("a")
    daemon = world.start("a")
    world.sync()
    job = world.slurm.submit("-N1", "-c2", "--wrap", "sleep 600")
    wait_until(lambda: world.slurm.jobs().get(job) == "RUNNING", 150, "the job running on its host",
               said=lambda: world.slurm.log() + daemon.tail())
    wait_until(lambda: len(node_processes(None, world.slurm.conf)) >= 2, 60, "the job's step and task")
    kill_machines(world.state_dir)  # as the drills' end does: the slurmd goes, its job step stays
    assert node_processes(None, world.slurm.conf), "the step outlives its slurmd"
    world.slurm.stop()
    wait_until(lambda: not node_processes(None, world.slurm.conf), 15, "no step or task of the cluster left")
