"""Benchmark: a month of one-minute demand against 100 simulated providers (target: 200,000 x real time).

90 host providers (three templates each, spread over priorities and prices,
some spot-like with reclaims, some failing now and then) and 10 license
pools lending in bundles of 5; six host items (130 hosts at the daily peak)
and three license items following a daily cycle with 3% noise, weekends,
bursts and three failovers. ``month(tmp, smoke)`` writes the config and trace under ``tmp`` and
returns the seconds the simulation took (trace generation not included),
with how many simulated seconds it ran per wall second (its ratio: it has
no floor); ``smoke`` runs a few hours instead.
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


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        m = month(Path(tmp), smoke='--smoke' in sys.argv)
        print(f"{m.value:.1f} s, {m.ratio:,.0f} x real time")
