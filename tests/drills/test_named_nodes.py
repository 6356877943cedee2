"""Drill: a scheduler's named nodes through a real daemon (issue 29), the bridge's programs run as Slurm runs them.

``provisioner-slurm resume`` names nodes; the daemon makes one host per name,
named so by the provider; the scheduler's view (as ``provisioner-slurm sync``
sends it) joins them by their node names; a repeated resume makes nothing;
``suspend`` gives them back. No Slurm here: the real-Slurm drills are in
tests/slurm.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from messages.demand import SupplyHost, SupplySnapshot
from tests.support.daemons import wait_until
from tests.support.drills import Cluster

pytestmark = pytest.mark.slow


class Named(Cluster):
    def config(self, instance: str) -> Path:
        path = super().config(instance)
        cfg = yaml.safe_load(path.read_text())
        cfg["slurm"] = {"nodes": [{"names": "cloud[1-4]", "provider": "hosts", "template": "small"}]}
        path.write_text(yaml.safe_dump(cfg))
        return path


def bridge(cluster: Cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurm.main", "--config", str(cluster.tmp / "a.yaml"), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def named(tmp_path):
    c = Named(tmp_path)
    yield c
    c.close()
    print(c.tails())


def test_resumed_names_become_hosts_of_those_names_and_suspend_gives_them_back(named):
    daemon = named.start("a")
    r = bridge(named, "resume", "cloud[1-3]")
    assert r.returncode == 0, r.stderr

    def made() -> dict[str, str]:
        return {i.host: i.state for i in named.state().instances.values()}

    wait_until(lambda: sorted(made()) == ["cloud1", "cloud2", "cloud3"] and set(made().values()) == {"running"},
               timeout=60, what="three hosts, one per resumed name")
    assert sorted(m["name"] for m in named.sim_state("hosts")["machines"].values()) == ["cloud1", "cloud2", "cloud3"]
    assert bridge(named, "resume", "cloud[1-3]").returncode == 0  # Slurm asks again: nothing more is made
    named.c.put_supply(SupplySnapshot(hosts=[SupplyHost(name=f"cloud{n}", state="idle") for n in (1, 2, 3)]))
    wait_until(lambda: set(made().values()) == {"idle"}, timeout=30, what="the hosts to join, by their node names")
    assert len(named.sim_state("hosts")["machines"]) == 3
    r = bridge(named, "suspend", "cloud[1-2]")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: made() == {"cloud1": "returned", "cloud2": "returned", "cloud3": "idle"}, timeout=60,
               what="the suspended nodes' hosts to go back, the other to stay")
    named.check(hosts_wanted=3)
    assert daemon.alive()
