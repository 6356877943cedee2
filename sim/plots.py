"""PNG plots of a simulated run: demand against supply per provider, and cost over time.

``supply-<variant>.png`` stacks what each provider holds (the largest
ones by name, the rest as "others") under the workload's want and the
unmet need, hosts above and license units (over the owned base) below; ``cost.png`` draws the
cost so far of every variant on one chart; ``packing-<variant>.png`` (traces with bundle items)
draws, per resource the bundles need, what the bundle hosts have against what the bundles use.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
logging.getLogger("matplotlib").setLevel(logging.WARNING)
import matplotlib.pyplot as plt  # noqa: E402

from sim.result import Result

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


def _cost(path: Path, results: list[Result]) -> Path:
    fig, ax = plt.subplots(figsize=(10, 3.5))
    for r in results:
        samples = r.engine.metrics.samples
        ax.plot([(s.at - r.engine.start) / 3600 for s in samples], [s.cost for s in samples], label=r.variant.name)
    ax.set_xlabel("hours since the trace start")
    ax.set_ylabel("cost so far")
    ax.set_title("cumulative cost")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


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
