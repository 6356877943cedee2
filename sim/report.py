"""Running policy variants over one trace, and what the runs leave behind.

``provisioner sim`` runs the config once per variant (the config as given,
with ``--policy-set`` applied; plus one run per ``--compare``) and writes:

- ``report.json``: per variant, its settings and its figures;
- ``series.csv``: per variant and sample time, demand, unmet need, supply
  per provider and cost so far;
- PNG plots (``sim.plots``).

and prints the figures as a table, one column per variant.
"""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from messages.demand import DemandSnapshot
from messages.records import ProviderRecord
from policy.explain import unservable
from sim.config import ConfigError, ConfigIssue, SimConfig, with_settings
from sim.engine import run
from sim.result import Result, Variant
from sim.trace import Trace

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


def variants(base: list[str], compare: list[str]) -> list[Variant]:
    """``base`` for the first run (``base``), and one run per ``NAME:KEY=VALUE[,KEY=VALUE...]``."""
    out = [Variant("base", tuple(base))]
    for spec in compare:
        name, sep, rest = spec.partition(":")
        if not sep or not _NAME.match(name) or not rest:
            raise ConfigError([ConfigIssue("--compare", None, "", f"{spec!r}: expected NAME:KEY=VALUE[,KEY=VALUE]")])
        if any(v.name == name for v in out):
            raise ConfigError([ConfigIssue("--compare", None, "", f"{spec!r}: the name {name!r} is taken")])
        out.append(Variant(name, tuple(base) + tuple(s.strip() for s in rest.split(","))))
    return out


def simulate(raw: dict[str, Any], trace: Trace, chosen: list[Variant], origin: str) -> list[Result]:
    """Run each variant (configs are all checked before the first run starts)."""
    cfgs = [with_settings(raw, list(v.settings), f"{origin} ({v.name})") for v in chosen]
    results = []
    for v, cfg in zip(chosen, cfgs):
        report, engine = run(cfg, trace)
        warned = unservable_items(trace, cfg)
        if warned:
            report["warnings"] = warned
        results.append(Result(v, cfg, report, engine, warned))
    return results


def unservable_items(trace: Trace, cfg: SimConfig) -> list[str]:
    """Trace items no provider of ``cfg`` can ever serve, with why (``policy.explain``): their need stays
    unmet the whole run, which the report says rather than leaving it to silent unmet hours."""
    providers = {sp.name: ProviderRecord(name=sp.name, description=sp.description) for sp in cfg.providers}
    found = unservable(DemandSnapshot(items=list(trace.items.values())), providers)
    return [f"trace {line}: its demand stays unmet throughout" for line in found]


# --- writing -------------------------------------------------------------------------------


def write_outputs(out: Path, results: list[Result], trace: Trace, config: str, plots: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "config": config,
        "trace": {"file": trace.file, "start": _iso(trace.start), "span_h": round(trace.span / 3600, 3),
                  "steps": len(trace.steps)},
        "variants": {r.variant.name: {"settings": list(r.variant.settings), **r.report} for r in results},
    }
    warned = list(dict.fromkeys(w for r in results for w in r.warnings))
    if warned:
        doc["warnings"] = warned
    written = [out / "report.json", out / "series.csv"]
    written[0].write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    _series(written[1], results)
    if plots:
        try:
            from sim.plots import draw  # matplotlib loads slowly: only when plots are wanted
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "matplotlib":
                raise
            raise NoPlots("sim: matplotlib is not installed, so no plots were drawn: install the sim extra "
                          "(pip install 'provisioner[sim]') or pass --no-plots; report.json and series.csv "
                          f"are in {out}") from None
        written += draw(out, results)
    return written


class NoPlots(Exception):
    """The report and the series were written, but plots were asked for and matplotlib is missing."""


def _series(path: Path, results: list[Result]) -> None:
    providers = sorted({p for r in results for s in r.engine.metrics.samples for p in s.supply}
                       | {sp.name for r in results for sp in r.cfg.providers})
    bundles = any(r.engine.metrics.bundles for r in results)
    dims = sorted({d for r in results for s in r.engine.metrics.samples for d in s.allocated})
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "time", "hours", "wanted_hosts", "unmet_hosts", "wanted_units", "unmet_units"]
                   + (["wanted_bundles", "unmet_bundles"] if bundles else [])
                   + [f"{what}:{d}" for d in dims for what in ("allocated", "used")]
                   + ["cost_so_far"] + [f"supply:{p}" for p in providers])
        for r in results:
            start = r.engine.start
            for s in r.engine.metrics.samples:
                w.writerow([r.variant.name, _iso(s.at), round((s.at - start) / 3600, 4), s.wanted_hosts,
                            s.unmet_hosts, s.wanted_units, s.unmet_units]
                           + ([s.wanted_bundles, s.unmet_bundles] if bundles else [])
                           + [round(getattr(s, what).get(d, 0.0), 4) for d in dims for what in ("allocated", "used")]
                           + [round(s.cost, 4)] + [s.supply.get(p, 0) for p in providers])


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the printed report ----------------------------------------------------------------------

ROWS: list[tuple[str, str]] = [
    ("total cost", "total_cost"),
    ("idle cost", "idle_cost"),
    ("  hosts idle", "idle_cost_hosts"),
    ("  units unused", "idle_cost_units"),
    ("unmet host-hours", "unmet_host_hours"),
    ("unmet unit-hours", "unmet_unit_hours"),
    ("time to capacity p50 (s)", "time_to_capacity_p50_s"),
    ("time to capacity p95 (s)", "time_to_capacity_p95_s"),
    ("thrash (returns re-bought)", "thrash"),
    ("failovers", "failovers"),
]


def table(results: list[Result]) -> str:
    """The figures, one row each, one column per variant."""
    names = [r.variant.name for r in results]
    rows: list[list[str]] = []
    for label, key in ROWS:
        rows.append([label] + [_cell(r.report.get(key)) for r in results])
        if key == "unmet_unit_hours" and any("unmet_bundle_hours" in r.report for r in results):
            rows += _bundle_rows(results)
    for key in sorted({k for r in results for k in r.report["failures"]}):
        rows.append([key] + [_cell(r.report["failures"].get(key, 0)) for r in results])
    for key in sorted({k for r in results for k in r.report["counts"]}):
        rows.append([key] + [_cell(r.report["counts"].get(key, 0)) for r in results])
    if any(r.engine.settings.warm.rules for r in results):
        rows += _warm_rows(results)
    providers = sorted({p for r in results for p in r.report["cost_by_provider"]})
    for p in providers:
        rows.append([f"cost at {p}"] + [_cell(r.report["cost_by_provider"].get(p, 0.0)) for r in results])
    settings = [f"{r.variant.name}: {', '.join(r.variant.settings)}" for r in results if r.variant.settings]
    header = [""] + names
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines + ([""] + settings if settings else []))


def _bundle_rows(results: list[Result]) -> list[list[str]]:
    """Bundle items' figures: their waiting, and per resource how full the bundle hosts were kept."""
    rows = [["unmet bundle-hours"] + [_cell(r.report.get("unmet_bundle_hours")) for r in results],
            ["time to capacity bundles p95 (s)"] + [_cell(r.report.get("time_to_capacity_bundles_p95_s"))
                                                    for r in results]]
    for dim in sorted({d for r in results for d in r.report.get("packing", {})}):
        cells = []
        for r in results:
            eff = r.report.get("packing", {}).get(dim, {}).get("efficiency")
            cells.append("-" if eff is None else f"{eff:.1%}")
        rows.append([f"packing efficiency {dim}"] + cells)
    return rows


def _warm_rows(results: list[Result]) -> list[list[str]]:
    """What warm hosts cost against the wait they saved: each variant beside the first (the base)."""
    base = results[0].report
    rows = [["warm hosts bought"] + [_cell(r.report.get("warm_hosts", 0)) for r in results],
            ["  their cost"] + [_cell(r.report.get("warm_cost", 0.0)) for r in results],
            ["  of it idle"] + [_cell(r.report.get("warm_idle_cost", 0.0)) for r in results]]

    def against(key: str) -> list[float | None]:
        return [None if r.report.get(key) is None or base.get(key) is None else r.report[key] - base[key]
                for r in results]

    cost, unmet = against("total_cost"), against("unmet_host_hours")
    rows.append([f"cost vs {results[0].variant.name}"] + [_signed(v) for v in cost])
    rows.append([f"unmet host-hours vs {results[0].variant.name}"] + [_signed(v) for v in unmet])
    for key, label in (("time_to_capacity_p50_s", "p50"), ("time_to_capacity_p95_s", "p95")):
        rows.append([f"time to capacity {label} vs {results[0].variant.name} (s)"] + [_signed(v) for v in against(key)])
    rows.append(["cost per host-hour of wait saved"] + [
        _cell(c / -u) if c is not None and u is not None and u < 0 else "-" for c, u in zip(cost, unmet)])
    return rows


def _signed(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:+,.2f}"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return str(v)
