"""A daemon refuses to start on a controller that lost the facts it saw committed (issue: an emptied controller).

A real daemon runs, meets a demand, and stops (cleanly, leaving a snapshot,
or killed before any snapshot was written). Its SQLite file is then replaced
by a fresh one. ``provisioner run`` must exit non-zero naming the problem
and what to check, with no call to any provider; the CLI's views still read
the controller; ``--accept-reset-controller`` starts it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from persistence.controller import open_controller, sqlite_path
from tests.support.daemons import wait_until
from tests.support.drills import DEMAND, ROLES, Cluster, met, owned_by

pytestmark = pytest.mark.slow


def all_calls(cluster: Cluster) -> int:
    return sum(len(cluster.callers(name)) for name in cluster.sims)


def replace_controller(cluster: Cluster) -> None:
    """The SQLite file is deleted and a fresh one takes its place (as a wiped disk, or a new path, would leave it)."""
    cluster.c.close()
    path = Path(sqlite_path(cluster.url))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    cluster.c = open_controller(cluster.url)


@pytest.mark.parametrize("stop", ["clean stop, a snapshot kept", "kill -9 before any snapshot"])
def test_an_emptied_controller_is_refused_until_accepted(cluster: Cluster, tmp_path: Path, stop: str) -> None:
    a = cluster.start("a")
    a.wait(lambda: owned_by(cluster, "a") == ROLES, "a to own everything")
    cluster.c.put_demand(DEMAND)
    wait_until(lambda: met(cluster), timeout=60, what="the demand met")
    snapshots = tmp_path / "home-a" / "snapshots"
    if stop.startswith("clean"):
        a.signal(signal.SIGTERM)
        assert a.wait_dead() == 0
        assert list(snapshots.glob("*.snapshot")), "a clean stop leaves a snapshot"
    else:
        a.signal(signal.SIGKILL)
        a.wait_dead()
        assert not list(snapshots.glob("*.snapshot")), "no snapshot: only the mark knows what was committed"
    made = cluster.sim_state("hosts")["machines"]
    calls = all_calls(cluster)

    replace_controller(cluster)
    refused = cluster.start("a", log="a-refused")
    assert refused.wait_dead(timeout=60) == 3
    said = [line for line in refused.text().splitlines() if line.startswith("provisioner: ")]
    assert len(said) == 1, refused.text()[-3000:]
    for words in ("refusing to start", "holds no facts", "which this daemon", "controller.url", "backup",
                  "--accept-reset-controller"):
        assert words in said[0], (words, said[0])
    assert all_calls(cluster) == calls, "no provider was called"
    assert cluster.sim_state("hosts")["machines"] == made
    assert cluster.c.last_seq() == 0, "nothing was written to the new controller"

    view = subprocess.run([sys.executable, "-m", "provisioner.cli", "--config", str(cluster.config("a")),
                           "instances", "-o", "json"], capture_output=True, text=True, timeout=60)
    assert view.returncode == 0 and json.loads(view.stdout) == [], view.stderr
    assert "refusing" not in view.stderr, "the views read quietly and never refuse"

    accepted = cluster.start("a", log="a-accepted", args=("--accept-reset-controller",))
    accepted.wait(lambda: owned_by(cluster, "a") == ROLES, "the daemon to start on the reset controller")
    assert "starting on a reset controller" in accepted.text()
    accepted.signal(signal.SIGTERM)
    assert accepted.wait_dead() == 0
    again = cluster.start("a", log="a-again")
    again.wait(lambda: owned_by(cluster, "a") == ROLES, "a later start, with no flag, to go ahead")
    assert again.alive()
