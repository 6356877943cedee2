"""Benchmarks of the simulator: a month against 100 providers, and a week with warm capacity off and on.

The month: one-minute demand against 100 simulated providers (target: 200,000 x real time).

90 host providers (three templates each, spread over priorities and prices,
some spot-like with reclaims, some failing now and then) and 10 license
pools lending in bundles of 5; six host items (130 hosts at the daily peak)
and three license items following a daily cycle with 3% noise, weekends,
bursts and three failovers. ``month(tmp, smoke)`` writes the config and trace under ``tmp`` and
returns the seconds the simulation took (trace generation not included),
with how many simulated seconds it ran per wall second (its ratio: it has
no floor); ``smoke`` runs a few hours instead.

The week (``warm_week``): one-minute demand of two host items with twelve
bursts a day, on an on-demand and a spot cloud of 3 and 4 minutes' lead
time, run twice on the same trace and seed: without warm capacity, and with
four hosts kept ready (``WARM``). It reports each run's cost, time to
capacity and unmet host-hours, and warm over cold for the cost and the
waiting: what the warm hosts cost against the wait they saved. These
figures do not move with the machine; they move with the policy.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import yaml

from bench.floors import Measured
from sim.config import load_sim_config
from sim.engine import run
from sim.synth import Load, Shape, generate
from sim.trace import DEFAULT_START, read_trace, write_trace

PROVIDERS = 100
LICENSES = ["vcs", "xcelium", "primetime", "calibre", "innovus"]


def config(seed: int = 7) -> dict:
    rng = random.Random(seed)
    providers = []
    for i in range(PROVIDERS - 10):
        spot = i % 5 == 0
        behaviour: dict = {"lead_time": {"median": rng.choice([60, 120, 240]), "sigma": 0.4},
                           "capacity_error_rate": 0.02, "fail_rate": 0.005}
        if spot:
            behaviour.update(reclaim_rate=0.03, capacity=rng.randint(10, 40))
        providers.append({
            "description": {
                "name": f"cloud-{i:02d}", "kind": "hosts", "priority": rng.choice([5, 10, 10, 20]),
                "cost_per_hour": round(rng.uniform(0.1, 0.8), 3), "lead_time_s": 120,
                "min_hold_s": rng.choice([0, 600]),
                "templates": [{"id": f"c{i:02d}-{n}", "max_number": rng.randint(10, 40),
                               "attributes": {"type": "X86_64", "ncpus": n, "mem": n * 4096},
                               "cost_per_hour": round(n * rng.uniform(0.02, 0.05), 3)} for n in (4, 8, 16)],
            },
            "policy": {"billing_unit": rng.choice([0, 60, 3600])},
            "behaviour": behaviour,
        })
    for i in range(10):
        lic = LICENSES[i % len(LICENSES)]
        providers.append({
            "description": {"name": f"lic-{i:02d}", "kind": "units", "priority": rng.choice([5, 10]),
                            "cost_per_hour": 1.0, "lead_time_s": 30, "min_hold_s": 1800,
                            "min_request": 5, "step": 5,
                            "pools": [{"resource": lic, "capacity": 30, "cost_per_unit_hour": round(
                                rng.uniform(0.5, 3.0), 2)}]},
            "behaviour": {"lead_time": {"min": 10, "max": 60}, "return_time": 5},
        })
    return {
        "seed": seed,
        "policy": {"idle_time": "10m", "cooldown": "2m", "backoff_max": "30m", "request_timeout": "15m",
                   "join_grace": "60s", "poll_every": "5s", "plan_every": "5s"},
        "budget": {"max_cost_per_hour": 400.0},
        "scheduler": {"join_delay": {"min": 20, "max": 60}},
        "series_every": "15m",
        "providers": providers,
        "resources": [{"name": lic, "elastic": True, "base": 10, "provider": f"lic-{i:02d}"}
                      for i, lic in enumerate(LICENSES)],
    }


def loads() -> list[Load]:
    hosts = [Load(id=f"batch-{n}-{k}", kind="hosts", peak=peak, base=peak // 8, select={"ncpus": f">={n}"})
             for k, (n, peak) in enumerate([(4, 20), (8, 30), (8, 15), (16, 30), (16, 20), (4, 15)])]
    units = [Load(id=f"lic-{name}", kind="units", resource=name, peak=25, base=5) for name in LICENSES[:3]]
    return hosts + units


def month(tmp: Path, smoke: bool) -> Measured:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg_file, trace_file = tmp / "sim.yaml", tmp / "trace.jsonl"
    cfg_file.write_text(yaml.safe_dump(config()))
    shape = Shape(days=0.25 if smoke else 30.0, step=60.0, noise=0.03, failovers=(("cloud-03", 3),))
    write_trace(trace_file, generate(loads(), shape, DEFAULT_START, seed=7), DEFAULT_START)
    cfg, _ = load_sim_config(cfg_file)
    trace = read_trace(trace_file)
    started = time.perf_counter()
    run(cfg, trace)
    elapsed = time.perf_counter() - started
    return Measured(elapsed, ratio=trace.span / elapsed)


#: Warm capacity in the week's row: four hosts kept ready beyond demand.
WARM = {"min_idle": 4}


def week_config(warm: bool, seed: int = 3) -> dict:
    """An on-demand cloud (3-minute lead time) and a spot one (4 minutes, a third of the price, taken back now
    and then), as a site with no hosts of its own would have; warm capacity on or off."""
    def cloud(name: str, price: float, lead: float, **behaviour: object) -> dict:
        return {"description": {"name": name, "kind": "hosts", "priority": 10, "lead_time_s": lead,
                                "templates": [{"id": f"{name}-16", "max_number": 200, "cost_per_hour": price,
                                               "attributes": {"type": "X86_64", "ncpus": 16, "mem": 65536}}]},
                "behaviour": {"lead_time": {"median": lead, "sigma": 0.3}, "capacity_error_rate": 0.02,
                              **behaviour}}

    return {
        "seed": seed,
        "policy": {"idle_time": "10m", "cooldown": "2m", "backoff_max": "30m", "request_timeout": "15m",
                   "join_grace": "60s", "poll_every": "5s", "plan_every": "5s", **(WARM if warm else {})},
        "scheduler": {"join_delay": {"min": 20, "max": 60}, "publish_every": "10s"},
        "series_every": "15m",
        "providers": [cloud("ondemand", 0.68, 180), cloud("spot", 0.24, 240, reclaim_rate=0.02)],
    }


def week_trace(tmp: Path, smoke: bool) -> Path:
    """A week of one-minute demand: a daily cycle of up to 16 hosts and a bursty item of up to 6, twelve
    bursts a day, 5% noise (six hours with ``smoke``)."""
    loads = [Load(id="batch", kind="hosts", peak=16, base=2, select={"ncpus": ">=16"}),
             Load(id="ci", kind="hosts", peak=6, base=0, select={"ncpus": ">=8"})]
    shape = Shape(days=0.25 if smoke else 7.0, step=60.0, noise=0.05, bursts_per_day=12.0, burst_size=0.5)
    out = tmp / "week.jsonl"
    write_trace(out, generate(loads, shape, DEFAULT_START, seed=3), DEFAULT_START)
    return out


def warm_week(tmp: Path, smoke: bool) -> tuple[float, ...]:
    """The same simulated week with warm capacity off and on: per figure (total cost, time to capacity p50 and
    p95, unmet host-hours) off then on, then on over off for the cost and for the unmet host-hours."""
    tmp.mkdir(parents=True, exist_ok=True)
    trace = read_trace(week_trace(tmp, smoke))
    reports = []
    for warm in (False, True):
        cfg_file = tmp / f"sim-{'on' if warm else 'off'}.yaml"
        cfg_file.write_text(yaml.safe_dump(week_config(warm)))
        reports.append(run(load_sim_config(cfg_file)[0], trace)[0])
    off, on = reports
    out: list[float] = []
    for key in ("total_cost", "time_to_capacity_p50_s", "time_to_capacity_p95_s", "unmet_host_hours"):
        out += [off[key] or 0.0, on[key] or 0.0]
    out.append(on["total_cost"] / off["total_cost"] if off["total_cost"] else 0.0)
    out.append(on["unmet_host_hours"] / off["unmet_host_hours"] if off["unmet_host_hours"] else 0.0)
    return tuple(out)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        m = month(Path(tmp), smoke='--smoke' in sys.argv)
        print(f"{m.value:.1f} s, {m.ratio:,.0f} x real time")
