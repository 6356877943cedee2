"""A real Slurm 22.05 on loopback for the bridge's drills: munged and slurmctld with their own ports, key, socket
and state folder, power saving calling ``provisioner-slurm``, each started and stopped by PID within the test.

The cloud nodes are ``cloud1`` .. ``cloudN``, each with a ``Port=`` of its own, so several ``slurmd -N NAME``
run on this one host (``tests.support.slurmd_provider`` starts them as the "machines" the daemon makes).
``PrivateData=cloud`` makes powered-down cloud nodes visible to ``sinfo``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.daemons import free_port, wait_until

NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")


def installed() -> list[str]:
    """Slurm's programs this host lacks (``.ci/run`` installs them)."""
    return [p for p in NEEDED if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]


class SlurmWorld:
    def __init__(self, tmp: Path, config: Path, nodes: int = 4, suspend_time: int = 10, resume_timeout: int = 120,
                 dynamic: bool = False, future: str = ""):
        """``dynamic``: no nodes declared, and a partition ``dyn`` of the dynamic nodes with feature ``dyn``
        (``slurmd -Z``), at most ``nodes`` of them. ``future``: with ``dynamic``, the partition's nodes are
        instead ``dyn-1`` .. ``dyn-N`` (``nodes`` of them) declared ``State=FUTURE`` with this node config
        (``CPUs=2 RealMemory=1000``) and a ``Port=`` each, which a ``slurmd -F -N dyn-K`` takes up: a dynamic
        ``slurmd -Z`` listens on ``SlurmdPort``, so only one fits a machine, where future nodes let several run
        side by side."""
        self.tmp = tmp / "slurm"
        for sub in ("state", "log", "munge"):
            (self.tmp / sub).mkdir(parents=True, exist_ok=True)
        # A socket's path holds at most 107 bytes: slurmstepd makes one per job step in the spool folder, and
        # under pytest-xdist's deeper tmp paths a job's launch failed (requeued for good). Sockets go here.
        self.sockets = Path(tempfile.mkdtemp(prefix="slurm-"))
        self.conf = self.tmp / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": f"/usr/bin:/usr/sbin:/bin:{os.environ['PATH']}"}
        self.pids: list[int] = []
        programs = {}
        for program in ("resume", "suspend", "resume-fail"):
            path = self.tmp / f"provisioner-{program}"
            path.write_text(f"#!/bin/sh\nSLURM_CONF={self.conf} exec {sys.executable} -m slurm.main "
                            f"--config {config} {program} \"$1\" >> {self.tmp}/log/{program}.log 2>&1\n")
            path.chmod(0o755)
            programs[program] = path
        sock = self.sockets / "munge"
        self.names = [f"cloud{i}" for i in range(1, nodes + 1)]
        lines = [
            "ClusterName=drill", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}", "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
            f"AuthInfo=socket={sock}", "CredType=cred/munge", f"StateSaveLocation={self.tmp / 'state'}",
            f"SlurmdSpoolDir={self.sockets}/%n", f"SlurmctldPidFile={self.tmp / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.tmp}/slurmd-%n.pid", f"SlurmctldLogFile={self.tmp / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.tmp}/log/slurmd-%n.log", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "ReturnToService=2", "PrivateData=cloud", "SchedulerParameters=bf_interval=1,sched_interval=1",
            f"ResumeProgram={programs['resume']}", f"SuspendProgram={programs['suspend']}",
            f"ResumeFailProgram={programs['resume-fail']}", f"SuspendTime={suspend_time}", "SuspendTimeout=10",
            f"ResumeTimeout={resume_timeout}", f"MaxNodeCount={nodes + 2}", "MessageTimeout=5",
        ]
        if dynamic:
            self.names = []
            lines += [f"NodeName=dyn-{i} NodeAddr=127.0.0.1 State=FUTURE Feature=dyn {future} Port={free_port()}"
                      for i in range(1, nodes + 1) if future]
            lines += ["Nodeset=dynamic Feature=dyn",
                      "PartitionName=dyn Nodes=dynamic Default=YES MaxTime=INFINITE State=UP"]
        else:
            lines += [f"NodeName={n} CPUs=2 State=CLOUD Port={free_port()}" for n in self.names]
            lines.append(f"PartitionName=cloud Nodes=cloud[1-{nodes}] Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        key = self.tmp / "munge" / "key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        subprocess.run(["munged", f"--key-file={key}", f"--socket={sock}", f"--pid-file={self.tmp}/munge/pid",
                        f"--log-file={self.tmp}/munge/log", f"--seed-file={self.tmp}/munge/seed", "-f"],
                       check=True, timeout=30, env=self.env)
        self.pids.append(int((self.tmp / "munge" / "pid").read_text()))
        subprocess.run(["slurmctld", "-f", str(self.conf)], check=True, timeout=30, env=self.env)
        wait_until(lambda: (self.tmp / "slurmctld.pid").exists(), 30, "slurmctld's pid file")
        self.pids.append(int((self.tmp / "slurmctld.pid").read_text()))
        wait_until(lambda: self.run("sinfo", "-h", check=False).returncode == 0, 60, "slurmctld answering")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=self.env, check=check)

    def submit(self, *args: str) -> int:
        out = self.run("sbatch", "--parsable", f"--output={self.tmp}/log/job-%j.out", *args).stdout.strip()
        return int(out.split(";")[0])

    def jobs(self) -> dict[int, str]:
        doc = json.loads(self.run("squeue", "--json").stdout)
        return {j["job_id"]: j["job_state"] for j in doc["jobs"]}

    def nodes(self) -> dict[str, tuple[str, frozenset[str]]]:
        doc = json.loads(self.run("sinfo", "--json").stdout)
        return {n["name"]: (n["state"].upper(), frozenset(n["state_flags"])) for n in doc["nodes"]}

    def said(self, program: str) -> str:
        path = self.tmp / "log" / f"{program}.log"
        return path.read_text() if path.exists() else ""

    def log(self, lines: int = 40) -> str:
        path = self.tmp / "log" / "slurmctld.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        kill_cluster(self.pids, self.conf, wait=10.0)
        shutil.rmtree(self.sockets, ignore_errors=True)


def kill_cluster(pids: list[int], conf: Path, wait: float = 15.0) -> None:
    """Kill a cluster's processes (``pids``, newest first) and its jobs still running (their steps outlive a
    slurmd killed under them: a drill that failed), then wait, at most ``wait`` seconds, until they are gone."""
    for pid in [*reversed(pids), *node_processes(None, conf)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_machines(state_dir: Path) -> None:
    """Kill every slurmd the slurmd provider started (the drill's end: nothing outlives it)."""
    path = state_dir / "state.json"
    if not path.exists():
        return
    for m in json.loads(path.read_text())["machines"].values():
        if m.get("pid"):
            try:
                os.kill(m["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def machines(state_dir: Path) -> dict[str, Any]:
    path = state_dir / "state.json"
    return json.loads(path.read_text())["machines"] if path.exists() else {}


def node_processes(name: str | None, conf: Path) -> list[int]:
    """The job steps (``slurmstepd``) running on node ``name`` (every node: None) of the cluster of ``conf``
    and their tasks (``SLURMD_NODENAME`` and that ``SLURM_CONF`` in their environment: drills running side
    by side each have a ``cloud1``), steps first."""
    mine = (*((f"SLURMD_NODENAME={name}".encode(),) if name is not None else ()), f"SLURM_CONF={conf}".encode())
    tasks = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if all(var in env for var in mine):
            tasks.append((int(proc.name), int(stat[stat.rindex(")") + 2:].split()[1])))
    steps = set()
    for _, parent in tasks:
        try:
            if Path(f"/proc/{parent}/cmdline").read_bytes().startswith(b"slurmstepd"):
                steps.add(parent)
        except OSError:
            pass
    return [*sorted(steps), *(t for t, _ in tasks)]


def kill_machine(name: str, pid: int, conf: Path) -> list[int]:
    """A machine dying at once, as a cloud host does: its slurmd (``pid``), the job steps it started and their
    tasks, all stopped first (so none reports an end to slurmctld), then killed. The pids killed."""
    doomed = [pid, *node_processes(name, conf)]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in doomed:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    return doomed
