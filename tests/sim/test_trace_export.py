"""Past demand into the simulator: the controller's demand history and its facts as a trace, which the
simulator then runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.facts import (
    InstanceChanged,
    InstanceSeen,
    LeaseChanged,
    Load,
    Order,
    RequestPlanned,
    UsageObserved,
    make_fact,
)
from persistence.controller import open_controller
from sim.trace import read_trace
from tests.support.controllers import FakeClock

HOUR = 3600.0
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def record(url: str, t0: float) -> None:
    """Two days ago: a demand for batch hosts, a license and bundles; what served it; a loss and a failover."""
    clock = FakeClock(t0)
    c = open_controller(url, clock=clock)
    batch = HostItem(id="batch", count=3, select={"ncpus": ">=8"})
    lic = UnitItem(id="lic", count=2, resource="vcs")
    sim = BundleItem(id="sim", count=10, resources={"ncpus": 2})
    c.put_demand(DemandSnapshot(items=[batch, lic, sim]))
    facts = [make_fact(LeaseChanged(kind="lease_acquired", name="provider:cloud-ondemand", holder="a", fence=1),
                       provider="cloud-ondemand", now=t0)]
    # Two hosts for batch, busy from t0 + 1h to t0 + 3h; one is lost at t0 + 3h.
    facts.append(make_fact(RequestPlanned(action="request", supply="hosts", template="c-16", count=2,
                                          item_id="batch"), provider="cloud-ondemand", fact_id="r1", now=t0))
    for m in ("m1", "m2"):
        facts += [make_fact(InstanceSeen(machine_id=m, name=m, request_id="r1", state="running", launched_at=t0),
                            provider="cloud-ondemand", now=t0 + 60),
                  make_fact(InstanceChanged(kind="instance_joined", machine_id=m, state="joined"),
                            provider="cloud-ondemand", now=t0 + 120),
                  make_fact(InstanceChanged(kind="instance_busy", machine_id=m, state="busy"),
                            provider="cloud-ondemand", now=t0 + HOUR)]
    facts.append(make_fact(InstanceChanged(kind="instance_idle", machine_id="m1", state="idle"),
                           provider="cloud-ondemand", now=t0 + 3 * HOUR))
    facts.append(make_fact(InstanceChanged(kind="instance_lost", machine_id="m2", state="lost"),
                           provider="cloud-ondemand", now=t0 + 3 * HOUR))
    # A packed order: 1 host carrying 4 bundles of sim, busy from t0 + 1h.
    facts += [make_fact(Order(action="request", supply="hosts", template="c-16", count=1,
                              loads=[Load(hosts=1, bundles={"sim": 4})]), provider="cloud-ondemand", fact_id="o2",
                        now=t0),
              make_fact(RequestPlanned(action="request", supply="hosts", template="c-16", count=1, order_id="o2"),
                        provider="cloud-ondemand", fact_id="r2", now=t0),
              make_fact(InstanceSeen(machine_id="b1", name="b1", request_id="r2", state="running", launched_at=t0),
                        provider="cloud-ondemand", now=t0 + 60),
              make_fact(InstanceChanged(kind="instance_busy", machine_id="b1", state="busy"),
                        provider="cloud-ondemand", now=t0 + HOUR)]
    facts.append(make_fact(UsageObserved(resource="vcs", in_use=12), provider="flexlm", now=t0 + 2 * HOUR))
    # The daemon a died: b took the lease over without a's giving it back.
    facts.append(make_fact(LeaseChanged(kind="lease_acquired", name="provider:cloud-ondemand", holder="b", fence=2),
                           provider="cloud-ondemand", now=t0 + 4 * HOUR))
    c.append(facts)
    clock.advance(5 * HOUR)
    c.put_demand(DemandSnapshot(items=[batch.model_copy(update={"count": 0}), lic]))
    c.close()


def cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provisioner.cli", *args], capture_output=True, text=True,
                          timeout=120, env={"PROVISIONER_HOME": str(home)})


def test_export_rebuilds_the_want_from_demand_and_what_served_it_and_the_simulator_runs_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    t0 = float(int(time.time() - 2 * 86400))
    record(url, t0)
    out = tmp_path / "past.jsonl"
    r = cli("--controller", url, "trace", "export", "--since", "30d", "--out", str(out), "--step", "1m",
            home=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert "3 items (2 demand snapshots" in r.stdout
    trace = read_trace(out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["trace"]["note"].startswith("provisioner trace export from sqlite:///")
    counts: dict[float, dict[str, int]] = {}
    for step in trace.steps:
        for item in step.items:
            counts.setdefault(step.at, {})[item.id] = item.count
    assert counts[0.0] == {"batch": 3, "lic": 2, "sim": 10}, "at first: only the unmet need"
    assert counts[HOUR] == {"batch": 5, "sim": 14}, "two busy batch hosts, 4 bundles on a busy host"
    assert counts[2 * HOUR] == {"lic": 14}, "12 units in use at the license server"
    assert counts[3 * HOUR] == {"batch": 3}
    assert counts[5 * HOUR] == {"batch": 0, "sim": 4}, "the later snapshot asks for none, sim is gone from it"
    lost = [(s.at, h.provider, h.count) for s in trace.steps for h in s.hosts]
    assert lost == [(3 * HOUR, "cloud-ondemand", 1)]
    assert [(s.at, s.failover) for s in trace.steps if s.failover] == [(4 * HOUR, ("cloud-ondemand",))]
    assert trace.items["batch"].select == {"ncpus": ">=8"} and trace.items["sim"].resources == {"ncpus": 2}

    sim = cli("sim", "--config", str(EXAMPLES / "sim.yaml"), "--trace", str(out), "--out", str(tmp_path / "sim"),
              "--no-plots", home=tmp_path / "h")
    assert sim.returncode == 0, sim.stderr
    assert "total cost" in sim.stdout


def test_export_with_no_demand_recorded_says_so(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    open_controller(url).close()
    r = cli("--controller", url, "trace", "export", "--out", str(tmp_path / "x.jsonl"), home=tmp_path / "h")
    assert r.returncode == 1 and "no demand recorded since" in r.stderr and not (tmp_path / "x.jsonl").exists()
