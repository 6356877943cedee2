"""A real Slurm 22.05 with accounting on loopback, for the license drills: MariaDB, slurmdbd, slurmctld and one
static ``slurmd``, each with its own port, data folder and socket, started and stopped by PID within the test.

Remote licenses live in slurmdbd (``sacctmgr add resource ... type=license``), so this world needs the database
that ``tests.support.slurm.SlurmWorld`` does without. Its node ``lic1`` has ``CPUs=4`` (``config_overrides``),
so three one-CPU jobs run at once on this two-core machine. Everything runs as the current user (root here:
``mariadbd --user``); the sockets sit in a short folder of their own (a socket path holds at most 107 bytes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.daemons import free_port, wait_until
from tests.support.slurm import kill_cluster

NEEDED = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sacctmgr", "sbatch",
          "squeue", "scontrol")


def installed() -> list[str]:
    """The programs this host lacks (``.ci/run`` installs them)."""
    return [p for p in NEEDED if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]


class AccountedSlurm:
    """``ClusterName=CLUSTER``, with the license ``license`` made in slurmdbd (``count``, all of it for this
    cluster). ``shared``: a world whose munged, MariaDB and slurmdbd this cluster uses too (two clusters on one
    slurmdbd); only its own slurmctld and slurmd are its to stop."""

    def __init__(self, tmp: Path, count: int = 2, cpus: int = 4, cluster: str = "lic", license: str = "vcs@flex",
                 shared: AccountedSlurm | None = None) -> None:
        self.cluster, self.license_name = cluster, license
        self.tmp = tmp / f"slurm-{cluster}" if shared is not None else tmp / "slurm"
        for sub in ("state", "log", "munge"):
            (self.tmp / sub).mkdir(parents=True, exist_ok=True)
        self.sockets = Path(tempfile.mkdtemp(prefix="slurmdb-"))
        self.conf = self.tmp / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf),
                    "PATH": f"/usr/bin:/usr/sbin:/bin:{os.environ['PATH']}"}
        self.pids: list[int] = []
        self.took: dict[str, float] = {}
        self.user = os.environ.get("USER") or "root"
        started = time.monotonic()
        name, _, server = license.partition("@")
        try:
            if shared is None:
                self._munge()
                self._mariadb()
                self._slurmdbd()
            else:
                self.munge_socket, self.dbd_port = shared.munge_socket, shared.dbd_port
            self._slurmctld(cpus)
            self.run("sacctmgr", "-i", "add", "resource", f"name={name}", f"server={server}", f"count={count}",
                     "type=license", f"cluster={cluster}", "percentallowed=100")
            wait_until(lambda: license in self.run("scontrol", "-o", "show", "licenses").stdout, 30,
                       f"slurmctld learning of the license {license}", said=self.log)
        except BaseException:
            self.stop()
            raise
        self.took["all"] = time.monotonic() - started

    # --- starting -----------------------------------------------------------------------------------------------

    def _munge(self) -> None:
        key = self.tmp / "munge" / "key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.munge_socket = self.sockets / "munge"
        subprocess.run(["munged", f"--key-file={key}", f"--socket={self.munge_socket}",
                        f"--pid-file={self.tmp}/munge/pid", f"--log-file={self.tmp}/munge/log",
                        f"--seed-file={self.tmp}/munge/seed", "-f"], check=True, timeout=30, env=self.env)
        self.pids.append(int((self.tmp / "munge" / "pid").read_text()))

    def _mariadb(self) -> None:
        t = time.monotonic()
        data = self.tmp / "db"
        # A temporary folder of its own: two installs at once in one /tmp collide on their temporary tables.
        scratch = self.tmp / "db-tmp"
        scratch.mkdir(exist_ok=True)
        env = {**self.env, "TMPDIR": str(scratch)}
        done = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", f"--user={self.user}",
                               "--auth-root-authentication-method=normal", "--skip-test-db"],
                              timeout=120, env=env, capture_output=True, text=True)
        assert done.returncode == 0, "mariadb-install-db failed: " + (done.stdout + done.stderr)[-2000:]
        self.db_port = free_port()
        self.db_socket = self.sockets / "db"
        proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.db_socket}",
             f"--port={self.db_port}", "--bind-address=127.0.0.1", f"--user={self.user}",
             f"--pid-file={self.tmp}/db.pid", f"--log-error={self.tmp}/log/mariadb.log", f"--tmpdir={scratch}",
             "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M", "--skip-name-resolve"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        self.pids.append(proc.pid)
        wait_until(lambda: proc.poll() is not None or self.db_socket.exists(), 60, "mariadbd's socket",
                   said=lambda: self._tail("mariadb.log"))
        assert proc.poll() is None, "mariadbd exited: " + self._tail("mariadb.log")
        self.took["mariadb"] = time.monotonic() - t

    def _slurmdbd(self) -> None:
        t = time.monotonic()
        self.dbd_port = free_port()
        dbd = self.tmp / "slurmdbd.conf"  # beside slurm.conf: slurmdbd looks for it there
        dbd.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
            f"DbdPort={self.dbd_port}", f"SlurmUser={self.user}", f"PidFile={self.tmp}/slurmdbd.pid",
            f"LogFile={self.tmp}/log/slurmdbd.log", "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1", f"StoragePort={self.db_port}", "StorageUser=root",
            "StorageLoc=slurm_acct_db"]) + "\n")
        dbd.chmod(0o600)  # slurmdbd refuses a config others may read
        subprocess.run(["slurmdbd"], check=True, timeout=30, env=self.env)
        wait_until(lambda: (self.tmp / "slurmdbd.pid").exists() and (self.tmp / "slurmdbd.pid").read_text().strip(),
                   30, "slurmdbd's pid file", said=lambda: self._tail("slurmdbd.log"))
        self.pids.append(int((self.tmp / "slurmdbd.pid").read_text()))
        wait_until(lambda: "started" in self._tail("slurmdbd.log"), 60, "slurmdbd started",
                   said=lambda: self._tail("slurmdbd.log"))
        self.took["slurmdbd"] = time.monotonic() - t

    def _slurmctld(self, cpus: int) -> None:
        t = time.monotonic()
        self.node_port = free_port()
        lines = [
            f"ClusterName={self.cluster}", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}", f"SlurmUser={self.user}", f"SlurmdUser={self.user}", "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}", "CredType=cred/munge", f"StateSaveLocation={self.tmp / 'state'}",
            f"SlurmdSpoolDir={self.sockets}/%n", f"SlurmctldPidFile={self.tmp / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.tmp}/slurmd-%n.pid", f"SlurmctldLogFile={self.tmp / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.tmp}/log/slurmd-%n.log", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU", "SchedulerParameters=bf_interval=1,sched_interval=1",
            "SlurmdParameters=config_overrides", "ReturnToService=2", "MessageTimeout=10",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.dbd_port}",
            # The munge socket slurmctld and sacctmgr reach slurmdbd through (AuthInfo is not read for it).
            f"AccountingStoragePass={self.munge_socket}",
            f"NodeName=lic1 NodeAddr=127.0.0.1 CPUs={cpus} Port={self.node_port}",
            "PartitionName=main Nodes=lic1 Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        self.run("sacctmgr", "-i", "add", "cluster", self.cluster)
        subprocess.run(["slurmctld"], check=True, timeout=30, env=self.env)
        wait_until(lambda: (self.tmp / "slurmctld.pid").exists(), 30, "slurmctld's pid file")
        self.pids.append(int((self.tmp / "slurmctld.pid").read_text()))
        wait_until(lambda: self.run("sinfo", "-h", check=False).returncode == 0, 60, "slurmctld answering",
                   said=self.log)
        subprocess.run(["slurmd", "-N", "lic1"], check=True, timeout=30, env=self.env)
        wait_until(lambda: (self.tmp / "slurmd-lic1.pid").exists(), 30, "slurmd's pid file")
        self.pids.append(int((self.tmp / "slurmd-lic1.pid").read_text()))
        wait_until(lambda: self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip() == "idle", 60,
                   "node lic1 idle", said=lambda: self.log() + self._tail("slurmd-lic1.log"))
        self.took["slurmctld"] = time.monotonic() - t

    # --- using it -----------------------------------------------------------------------------------------------

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=self.env, check=check)

    def submit(self, *args: str) -> int:
        out = self.run("sbatch", "--parsable", f"--output={self.tmp}/log/job-%j.out", *args).stdout.strip()
        return int(out.split(";")[0])

    def jobs(self) -> dict[int, tuple[str, str]]:
        """Each job's state and reason (``squeue --json`` lists finished jobs too)."""
        doc = json.loads(self.run("squeue", "--json").stdout)
        return {j["job_id"]: (j["job_state"], j["state_reason"]) for j in doc["jobs"]}

    def license(self, name: str = "") -> dict[str, int]:
        """``Total``, ``Used`` and ``Reserved`` of a license (this cluster's), as ``scontrol show licenses`` says
        them now."""
        name = name or self.license_name
        for line in self.run("scontrol", "-o", "show", "licenses").stdout.splitlines():
            pairs = dict(re.findall(r"(\w+)=(\S*)", line))
            if pairs.get("LicenseName") == name:
                return {k: int(pairs[k]) for k in ("Total", "Used", "Reserved")}
        return {}

    def log(self, lines: int = 40) -> str:
        return self._tail("slurmctld.log", lines)

    def _tail(self, name: str, lines: int = 30) -> str:
        path = self.tmp / "log" / name
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        """Every process this world started, by PID, and its jobs' steps still running, then its folders."""
        kill_cluster(self.pids, self.conf)
        shutil.rmtree(self.sockets, ignore_errors=True)
        shutil.rmtree(self.tmp / "db", ignore_errors=True)
        shutil.rmtree(self.tmp / "db-tmp", ignore_errors=True)
