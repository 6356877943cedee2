"""Packing bundles: how long a round takes, and how far its plan's cost is from a lower bound.

The workloads are generated (seeded) to look like a cloud catalog: template
families with 2, 4 or 8 GiB of memory per CPU from 2 to 192 CPUs, on x86 and
(cheaper) ARM, and GPU variants at a higher price; hourly costs roughly
proportional to the resources, with noise per provider and template. The
bundles come in about 25 shapes (fractional CPUs, memory-heavy and CPU-heavy
work, GPU work), some of them selecting x86 or asking for hosts of their own.

**The lower bound** is the LP relaxation of the assignment formulation, per
bundle shape rather than per resource total:

    minimise   sum_t,p cost_t * x_t,p
    subject to sum_t z_s,t >= n_s                               every shape s
               sum_{s in p} need_s,r * z_s,t <= cap_t,r * x_t,p  every template t, pool p, resource r
               z_s,t <= fit_s,t * x_t,p(s)                       every shape s and template t it fits
               sum_p x_t,p <= room_t, x >= 0, z >= 0

where ``x_t,p`` is how many hosts of template ``t`` carry pool ``p`` (the
bundles that may share hosts, or one exclusive item's), ``z_s,t`` how many
bundles of shape ``s`` go to template ``t`` (only templates that ``s``'s
select matches and that hold one whole bundle of ``s``), and ``fit_s,t`` how
many bundles of ``s`` alone fit one host of ``t``. Every packing the planner
could make is a solution of it with whole numbers (its hosts counted per
template and pool, its bundles per shape and template), so the LP's optimum,
over real numbers, is at most the cost of any packing: a valid lower bound.
It is tighter than covering each resource's total alone, which lets a GPU
host's memory count for work that may not go there or a bundle be split
across hosts; what it still relaxes is that a host is whole and that
bundles on one host must fit together in every dimension at once.

It is solved with HiGHS (``scipy.optimize.linprog``), installed by the
``bench`` extra only; without it (``make test`` runs the harness at smoke
size) the bound falls back to the weakest valid one: for each resource, its
total need times the least cost per unit of it over the templates.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from messages.demand import BundleItem, DemandSnapshot
from messages.description import ProviderDescription, Template
from messages.records import ProviderRecord
from policy.catalog import Catalog, Offer
from policy.packing import Packing, Wish, pack
from policy.planning import PlanSettings, plan
from policy.supply import SupplyView
from state.projection import Projection

GIB = 1024
SIZES = [2, 4, 8, 16, 32, 48, 64, 96, 128, 192]
#: (family, GiB per CPU, GPUs per 8 CPUs, price factor)
FAMILIES = [("c", 2, 0, 1.0), ("m", 4, 0, 1.0), ("r", 8, 0, 1.0), ("g", 8, 1, 1.0)]
PER_CPU, PER_GIB, PER_GPU = 0.024, 0.0045, 0.9


def catalog(n_templates: int, seed: int) -> dict[str, ProviderRecord]:
    """Providers of cloud-like templates, ``n_templates`` in all: each offers 20 of the family x
    architecture x size combinations, drawn at random, at its own price level."""
    rng = random.Random(seed)
    combos = [(family, gib, gpus, factor, arch, ncpus)
              for family, gib, gpus, factor in FAMILIES for arch in ("X86_64", "ARM64") for ncpus in SIZES
              if not (gpus and (arch == "ARM64" or ncpus // 8 > 8))]
    providers: dict[str, ProviderRecord] = {}
    made = 0
    while made < n_templates:
        name = f"cloud{len(providers):03d}"
        provider_noise = rng.uniform(0.9, 1.1)
        templates = []
        for family, gib, gpus, factor, arch, ncpus in rng.sample(combos, min(20, n_templates - made)):
            ngpus = max(1, ncpus // 8) * gpus
            arch_factor = 0.8 if arch == "ARM64" else 1.0
            cost = (PER_CPU * ncpus + PER_GIB * gib * ncpus + PER_GPU * ngpus) * factor * arch_factor
            cost *= provider_noise * rng.uniform(0.9, 1.1)
            attributes: dict = {"ncpus": ncpus, "mem": ncpus * gib * GIB, "type": arch}
            if ngpus:
                attributes["ngpus"] = ngpus
            templates.append(Template(id=f"{family}{'a' if arch == 'ARM64' else ''}.{ncpus}x",
                                      max_number=rng.choice([200, 500, 1000]), attributes=attributes,
                                      cost_per_hour=round(cost, 4)))
        made += len(templates)
        providers[name] = ProviderRecord(name=name, owner="a", description=ProviderDescription(
            name=name, kind="hosts", cost_per_hour=1.0, templates=templates))
    return providers


def demand(n_bundles: int, seed: int, shapes: int = 25) -> DemandSnapshot:
    """About ``shapes`` bundle items, ``n_bundles`` bundles in all, a few selecting x86 or exclusive."""
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) ** 0.7 for k in range(shapes)]
    counts = [max(1, int(n_bundles * w / sum(weights))) for w in weights]
    counts[0] += n_bundles - sum(counts)
    items = []
    for k in range(shapes):
        if k % 8 == 7:  # GPU work
            ncpus = rng.choice([2, 4, 8])
            resources: dict = {"ncpus": ncpus, "mem": ncpus * rng.choice([4, 8]) * GIB, "ngpus": rng.choice([1, 1, 2])}
        else:
            ncpus = rng.choice([0.5, 1, 1, 2, 2, 4, 8, 16])
            resources = {"ncpus": ncpus, "mem": int(ncpus * rng.choice([1, 2, 3, 4, 6, 8, 12]) * GIB)}
        select = {"type": "X86_64"} if k % 5 == 0 else {}
        items.append(BundleItem(id=f"j{k:02d}", count=counts[k], resources=resources, select=select,
                                exclusive=k % 11 == 10))
    return DemandSnapshot(seq=1, items=items)


def wishes(providers: dict[str, ProviderRecord], snap: DemandSnapshot) -> list[Wish]:
    cat = Catalog(providers)
    return [Wish(item=i.id, count=i.count, resources=i.resources, offers=cat.offers(i)[0], exclusive=i.exclusive,
                 priority=i.priority) for i in snap.items if isinstance(i, BundleItem)]


# --- the lower bound ----------------------------------------------------------------------------


def _fit(need: dict, attributes: dict) -> int:
    n = 1 << 30
    for r, d in need.items():
        have = attributes.get(r)
        if not isinstance(have, (int, float)) or isinstance(have, bool):
            return 0
        n = min(n, int(have / d + 1e-9))
    return n


def lower_bound(ws: list[Wish]) -> tuple[float, str]:
    """The LP bound of the module's doc, and which one it is (``lp`` or ``per-resource``)."""
    try:
        from scipy.optimize import linprog  # noqa: F401
    except ImportError:
        return _resource_bound(ws), "per-resource"
    return _lp_bound(ws), "lp"


def _offers(ws: list[Wish]) -> list[Offer]:
    seen: dict[tuple[str, str], Offer] = {}
    for w in ws:
        for o in w.offers:
            seen.setdefault((o.provider, o.key), o)
    return list(seen.values())


def _resource_bound(ws: list[Wish]) -> float:
    offers = _offers(ws)
    best = 0.0
    for r in sorted({r for w in ws for r in w.resources}):
        total = sum(w.count * w.resources.get(r, 0) for w in ws)
        rates = [o.price / float(o.attributes[r]) for o in offers
                 if isinstance(o.attributes.get(r), (int, float)) and float(o.attributes[r]) > 0]
        if total and rates:
            best = max(best, total * min(rates))
    return best


def _lp_bound(ws: list[Wish]) -> float:
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    offers = _offers(ws)
    index = {(o.provider, o.key): t for t, o in enumerate(offers)}
    dims = sorted({r for w in ws for r in w.resources})
    pool_of = [w.item if w.exclusive else "" for w in ws]
    cost: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs: list[float] = []
    upper: list[float | None] = []
    x: dict[tuple[int, str], int] = {}  # (template, pool) -> column

    def column(c: float, ub: float | None = None) -> int:
        cost.append(c)
        upper.append(ub)
        return len(cost) - 1

    def row(entries: list[tuple[int, float]], b: float) -> None:
        r = len(rhs)
        for col, v in entries:
            rows.append(r)
            cols.append(col)
            vals.append(v)
        rhs.append(b)

    z: dict[tuple[int, int], int] = {}  # (wish, template) -> column
    fits: dict[tuple[int, int], int] = {}
    for s, w in enumerate(ws):
        for o in w.offers:
            t = index[(o.provider, o.key)]
            k = _fit(dict(w.resources), dict(o.attributes))
            if k <= 0:
                continue
            if (t, pool_of[s]) not in x:
                x[(t, pool_of[s])] = column(o.price)
            z[(s, t)] = column(0.0)
            fits[(s, t)] = k
    by_shape: dict[int, list[int]] = {}
    by_template: dict[tuple[int, str], list[int]] = {}
    for s, t in z:
        by_shape.setdefault(s, []).append(t)
        by_template.setdefault((t, pool_of[s]), []).append(s)
    for s, w in enumerate(ws):  # every bundle placed
        row([(z[(s, t)], -1.0) for t in by_shape.get(s, [])], -float(w.count))
    for (t, p), xc in x.items():  # what a template's hosts of one pool carry fits them
        o = offers[t]
        for r in dims:
            entries = [(z[(s, t)], float(ws[s].resources[r])) for s in by_template[(t, p)]
                       if ws[s].resources.get(r, 0)]
            if entries:
                cap = o.attributes.get(r)
                row(entries + [(xc, -float(cap if isinstance(cap, (int, float)) else 0))], 0.0)
    for (s, t), zc in z.items():  # no more of a shape on a host than fit there alone
        row([(zc, 1.0), (x[(t, pool_of[s])], -float(fits[(s, t)]))], 0.0)
    for t, o in enumerate(offers):  # the template's max_number
        cols_t = [xc for (t2, _), xc in x.items() if t2 == t]
        if cols_t:
            row([(c, 1.0) for c in cols_t], float(o.max_number))
    a = coo_matrix((vals, (rows, cols)), shape=(len(rhs), len(cost))).tocsr()
    res = linprog(cost, A_ub=a, b_ub=rhs, bounds=[(0, ub) for ub in upper], method="highs")
    if res.status != 0:
        raise RuntimeError(f"LP bound: {res.message}")
    return float(res.fun)


# --- the rows of make bench ---------------------------------------------------------------------


def _sizes(smoke: bool, large: bool) -> tuple[int, int]:
    if smoke:
        return (60, 300) if large else (40, 100)
    return (1_000, 10_000) if large else (100, 1_000)


def planning_bundles(_: Path, smoke: bool) -> float:
    """Seconds for one planning round of 1,000 templates x 10,000 bundles of ~25 shapes, cold:
    the offers are ranked anew (no catalog kept) and nothing is in flight."""
    n_templates, n_bundles = _sizes(smoke, large=True)
    providers, snap = catalog(n_templates, seed=1), demand(n_bundles, seed=2)
    p = Projection()
    view = SupplyView(orders=p.orders, requests=p.requests, instances=p.instances, grants=p.grants)
    started = time.perf_counter()
    out = plan(snap, providers, view, 0.0, PlanSettings())
    elapsed = time.perf_counter() - started
    assert out.orders and len(out.decisions) == len(snap.items)
    return elapsed


def _ratio(n_templates: int, n_bundles: int, seed: int) -> float:
    providers, snap = catalog(n_templates, seed=seed), demand(n_bundles, seed=seed + 1)
    ws = wishes(providers, snap)
    packing: Packing = pack(ws)
    assert not packing.unplaced, packing.unplaced[:3]
    bound, _ = lower_bound(ws)
    return packing.cost_per_hour / bound


def ratio_large(_: Path, smoke: bool) -> float:
    """Plan cost / LP lower bound, 1,000 templates x 10,000 bundles."""
    return _ratio(*_sizes(smoke, large=True), seed=1)


def ratio_small(_: Path, smoke: bool) -> float:
    """Plan cost / LP lower bound, 100 templates x 1,000 bundles."""
    return _ratio(*_sizes(smoke, large=False), seed=11)
