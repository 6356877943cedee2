"""Drill: the controller refuses writes for a while, right after an LSF-style provider answered (issue 28).

A real daemon process, a real SQLite controller, and an LSF-style simulated
provider that ignores tokens as IBM's plugins do: each ``requestMachines``
makes its machines anew. The drill holds the controller's write lock (as
another process would) from the moment the provider has made the machines
until well after the daemon's lease lapsed: the daemon cannot record the
answer, loses its lease, and takes it back once the lock goes. Afterwards
the provider holds exactly what the facts say, the request was called once,
and everything is given back.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

from messages.demand import DemandSnapshot, HostItem
from persistence.controller import sqlite_path
from provisioner.cli.demo import SIM_SCRIPT
from tests.support.daemons import sim_call, wait_until
from tests.support.drills import SCRIPT_TIMEOUT, Cluster, free_port

pytestmark = pytest.mark.slow

LSF_SIM = {"kind": "hosts", "seed": 11, "name_prefix": "lsf", "lead_time": 0.3, "ignores_tokens": True,
           "templates": [{"id": "small", "max_number": 40, "attributes": {"type": "X86_64", "ncpus": 8}}]}
ACTIONS = ("getAvailableTemplates", "requestMachines", "getRequestStatus", "requestReturnMachines",
           "getReturnRequests")
#: Seconds the write lock is held: longer than SQLite's 5 s busy wait and than the lease's TTL.
LOCKED = 8.0


class LsfCluster(Cluster):
    """One daemon, one LSF-style provider whose scripts log each call; ``requestMachines`` can be held after
    it answered (the machines are made), until the drill lets its answer out."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.folder = tmp / "lsf"
        self.folder.mkdir()
        (self.folder / "sim.json").write_text(json.dumps(LSF_SIM))
        scripts = self.folder / "scripts"
        scripts.mkdir()
        for action in ACTIONS:
            hold = ""
            if action == "requestMachines":
                # The answer is ready and the machines made: say so, then wait for the drill (bounded).
                hold = (f'touch "{self.folder}/answered"\n'
                        f'i=0; while [ ! -e "{self.folder}/release" ] && [ $i -lt 200 ]; do sleep 0.05; '
                        'i=$((i+1)); done\n')
            path = scripts / f"{action}.sh"
            path.write_text(
                "#!/bin/sh\n"
                f'echo "{action} $(date +%s.%N)" >> "{self.folder}/calls.log"\n'
                f'out=$("{SIM_SCRIPT}" lsf {action} "$@"); code=$?\n'
                f"{hold}"
                'printf "%s\\n" "$out"\nexit $code\n')
            path.chmod(0o755)

    def config(self, instance: str) -> Path:
        env = self.folder / "lsf.env"
        env.write_text(f"SIM_CONFIG={self.folder / 'sim.json'}\nSIM_STATE_DIR={self.folder / 'state'}\n")
        env.chmod(0o600)
        cfg = {
            "instance": {"id": instance, "serves": ["lsf"], "planner": True},
            "controller": {"url": self.url},
            "api": {"listen": f"127.0.0.1:{free_port()}"},
            "lease": {"ttl": f"{self.ttl}s", "renew_every": f"{self.ttl / 4}s"},
            "policy": self.policy,
            "providers": [{"name": "lsf", "kind": "hosts", "env_file": str(env),
                           "script": {"style": "lsf", "path": str(self.folder / "scripts"),
                                      "timeout": f"{SCRIPT_TIMEOUT * 3}s"}}],
            "home": str(self.tmp / f"home-{instance}"),
        }
        path = self.tmp / f"{instance}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def requests_made(self) -> int:
        log = self.folder / "calls.log"
        return sum(1 for line in log.read_text().splitlines() if line.startswith("requestMachines ")) \
            if log.exists() else 0

    def made(self) -> dict:
        """Every machine the provider ever made, as its console would show it."""
        return sim_call(self.folder, "admin", None, "dump")["machines"]


@pytest.fixture
def lsf(tmp_path):
    c = LsfCluster(tmp_path)
    yield c
    c.close()
    print(c.tails())


def test_an_answer_the_controller_refused_is_recorded_once_it_recovers_and_never_asked_again(lsf):
    daemon = lsf.start("a")
    lsf.c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=6)]))
    wait_until(lambda: (lsf.folder / "answered").exists(), timeout=60, what="the provider to make the machines")
    conn = sqlite3.connect(sqlite_path(lsf.url), timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # another process's write transaction: every write of the daemon fails
        locked_at = time.monotonic()
        (lsf.folder / "release").touch()  # the answer goes out now, and cannot be recorded
        wait_until(lambda: "facts not committed" in daemon.text(), timeout=30, what="a refused write")
        wait_until(lambda: "lease provider:lsf" in daemon.text() and "given up" in daemon.text(), timeout=30,
                   what="the lease to lapse while the controller refuses writes")
        time.sleep(max(0.0, LOCKED - (time.monotonic() - locked_at)))  # the outage itself, not a wait for it
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    wait_until(lambda: sum(1 for i in lsf.state().instances.values() if i.state == "running") == 6, timeout=60,
               what="the kept answer to be recorded and its machines seen")
    p = lsf.state()
    (req,) = [r for r in p.requests.values() if r.action == "request"]
    assert req.state in ("submitted", "running", "complete"), req.reason
    assert lsf.requests_made() == 1, "the answered call was made again"
    made = lsf.made()
    assert len(made) == 6, f"{len(made)} machines made for a demand of 6"
    assert set(made) == {i.machine_id for i in p.instances.values()}, "machines the facts never learned of"
    assert "the controller takes writes again" in daemon.text()
    # Everything goes back: the cloud ends with nothing live, exactly as the facts say.
    lsf.join_running()
    lsf.c.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=0)]))

    def returned() -> bool:
        lsf.idle_all()
        return all(i.state == "returned" for i in lsf.state().instances.values())

    wait_until(returned, timeout=60, what="every host to be returned")
    live = [m for m, v in lsf.made().items() if v["state"] in ("pending", "running")]
    assert live == [], f"live at the provider after every return: {live}"
    assert lsf.requests_made() == 1
    assert daemon.alive()
