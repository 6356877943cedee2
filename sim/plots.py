"""PNG plots of a simulated run: demand against supply per provider, and cost over time.

``supply-<variant>.png`` stacks what each provider holds (the largest
ones by name, the rest as "others") under the workload's want and the
unmet need, hosts above and license units (over the owned base) below; ``cost.png`` draws the
cost so far of every variant, each in its own line style, and below it each variant's difference from
the first (so runs that cost nearly the same do not hide each other); ``packing-<variant>.png``
(traces with bundle items) draws, per resource the bundles need, what the bundle hosts have against
what the bundles use.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
logging.getLogger("matplotlib").setLevel(logging.WARNING)
import matplotlib.pyplot as plt  # noqa: E402

from sim.result import Result  # noqa: E402

#: Providers drawn by name per panel; the rest are summed as "others".
SHOWN = 8


def draw(out: Path, results: list[Result]) -> list[Path]:
    written = [_supply(out / f"supply-{r.variant.name}.png", r) for r in results]
    written.append(_cost(out / "cost.png", results))
    written += [_packing(out / f"packing-{r.variant.name}.png", r) for r in results
                if any(s.allocated for s in r.engine.metrics.samples)]
    return written


def _supply(path: Path, r: Result) -> Path:
    samples = r.engine.metrics.samples
    hours = [(s.at - r.engine.start) / 3600 for s in samples]
    kinds = {sp.name: sp.description.kind for sp in r.cfg.providers}
    panels = [k for k in ("hosts", "units") if any(v == k for v in kinds.values())]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.2 * len(panels)), sharex=True, squeeze=False)
    for ax, kind in zip(axes[:, 0], panels):
        names = [n for n, k in kinds.items() if k == kind]
        peak = {n: max((s.supply.get(n, 0) for s in samples), default=0) for n in names}
        shown = sorted((n for n in names if peak[n] > 0), key=lambda n: -peak[n])[:SHOWN]
        rows = [[s.supply.get(n, 0) for s in samples] for n in shown]
        labels = list(shown)
        base = sum(res.base for res in r.cfg.resources) if kind == "units" else 0
        if base:
            rows.insert(0, [base] * len(samples))
            labels.insert(0, "owned base")
        rest = [sum(v for n, v in s.supply.items() if kinds.get(n) == kind and n not in shown) for s in samples]
        if any(rest):
            rows.append(rest)
            labels.append("others")
        if rows:
            ax.stackplot(hours, rows, labels=labels, alpha=0.75, step="post")
        wanted = [s.wanted_hosts if kind == "hosts" else s.wanted_units for s in samples]
        unmet = [s.unmet_hosts if kind == "hosts" else s.unmet_units for s in samples]
        ax.step(hours, wanted, where="post", color="black", linewidth=1.2, label="wanted")
        ax.step(hours, unmet, where="post", color="red", linewidth=1.0, linestyle="--", label="unmet")
        ax.set_ylabel("hosts" if kind == "hosts" else "license units")
        ax.legend(loc="upper left", fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("hours since the trace start")
    fig.suptitle(f"demand and supply per provider ({r.variant.name})")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


#: Line styles and markers of the variants, in turn: lines that coincide still show apart.
STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "x")


def _cost(path: Path, results: list[Result]) -> Path:
    fig = cost_figure(results)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def cost_figure(results: list[Result]) -> Any:
    """Cumulative cost per variant, each in a style and marker of its own and labelled with its total;
    with several variants, a second panel draws each one's difference from the first, where runs whose
    costs differ by a few percent (which overlap on the first panel) lie apart."""
    several = len(results) > 1
    fig, axes = plt.subplots(2 if several else 1, 1, figsize=(10, 5.5 if several else 3.5), sharex=True,
                             squeeze=False, gridspec_kw={"height_ratios": [3, 2]} if several else None)
    top = axes[0, 0]
    base = results[0] if results else None
    for k, r in enumerate(results):
        samples = r.engine.metrics.samples
        hours = [(s.at - r.engine.start) / 3600 for s in samples]
        costs = [s.cost for s in samples]
        style = {"linestyle": STYLES[k % len(STYLES)], "marker": MARKERS[k % len(MARKERS)],
                 "markevery": max(1, len(samples) // 12), "markersize": 4, "linewidth": 1.6 if k == 0 else 1.2}
        total = costs[-1] if costs else 0.0
        (line,) = top.plot(hours, costs, label=f"{r.variant.name}: {total:,.2f}", **style)
        if several and base is not None and k > 0:
            ref = [s.cost for s in base.engine.metrics.samples]
            diff = [c - b for c, b in zip(costs, ref)]
            axes[1, 0].plot(hours[:len(diff)], diff, label=f"{r.variant.name} - {base.variant.name}",
                            color=line.get_color(), **style)
    top.set_ylabel("cost so far")
    top.set_title("cumulative cost (the total in the legend)")
    top.legend(loc="upper left")
    top.grid(alpha=0.3)
    if several:
        low = axes[1, 0]
        low.axhline(0.0, color="black", linewidth=0.8)
        low.set_ylabel(f"difference from {base.variant.name if base else 'base'}")
        low.legend(loc="upper left", fontsize=8)
        low.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("hours since the trace start")
    fig.tight_layout()
    return fig


def _packing(path: Path, r: Result) -> Path:
    samples = r.engine.metrics.samples
    hours = [(s.at - r.engine.start) / 3600 for s in samples]
    dims = sorted({d for s in samples for d in s.allocated})
    fig, axes = plt.subplots(len(dims), 1, figsize=(10, 2.6 * len(dims)), sharex=True, squeeze=False)
    for ax, dim in zip(axes[:, 0], dims):
        allocated = [s.allocated.get(dim, 0.0) for s in samples]
        used = [s.used.get(dim, 0.0) for s in samples]
        ax.fill_between(hours, used, step="post", alpha=0.6, label="used by bundles")
        ax.step(hours, allocated, where="post", color="black", linewidth=1.2, label="on bundle hosts")
        eff = r.report.get("packing", {}).get(dim, {}).get("efficiency")
        ax.set_ylabel(dim)
        ax.set_title(f"{dim}: packing efficiency {eff:.1%}" if eff is not None else dim, fontsize=9)
        ax.legend(loc="upper left", fontsize=7)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("hours since the trace start")
    fig.suptitle(f"resources of the bundle hosts, and what the bundles use ({r.variant.name})")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
