"""The month's rounds from the kept catalog give the month that rounds planned from scratch give, hash for hash.

The simulator keeps one catalog across rounds, as the live planner does (``policy.rounds.catalog_for``);
``kept=False`` plans every round with a new one and asks the next moment due with none. On the bench's
month (100 providers, spot reclaims, failures, license pools, a failover), cut to six hours, both must
write the same facts: the same report, every decision and every order.
"""

from __future__ import annotations

import hashlib
import json

import yaml

from bench.sim import config, loads
from sim.config import load_sim_config
from sim.synth import Shape, generate
from sim.trace import DEFAULT_START, read_trace, write_trace
from tests.support.traces import simulate


def _digest(report: dict) -> str:
    return hashlib.sha256(json.dumps(report, sort_keys=True, default=str).encode()).hexdigest()


def test_the_months_report_is_the_same_from_the_kept_catalog_as_from_scratch(tmp_path):
    (tmp_path / "sim.yaml").write_text(yaml.safe_dump(config()))
    shape = Shape(days=0.25, step=60.0, noise=0.03, failovers=(("cloud-03", 3),))
    write_trace(tmp_path / "trace.jsonl", generate(loads(), shape, DEFAULT_START, seed=7), DEFAULT_START)
    cfg, _ = load_sim_config(tmp_path / "sim.yaml")
    tr = read_trace(tmp_path / "trace.jsonl")
    kept, a = simulate(cfg, tr)
    scratch, b = simulate(cfg, tr, kept=False)
    assert a.rounds > 100 and kept["total_cost"] > 0, "six hours should keep the planner busy"
    assert _digest(kept) == _digest(scratch)
    assert a.decisions() == b.decisions()
    assert [(o.at, o.provider, o.order) for o in a.p.orders.values()] == [
        (o.at, o.provider, o.order) for o in b.p.orders.values()]
