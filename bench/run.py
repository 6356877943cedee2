"""``make bench``: each figure printed beside its floor, its ratio and its target, and written to bench-results.json.

A figure that moves with the machine is measured with its floor: the same
work on the same data, with the same durability, done with nothing of the
project in the timed part (``bench.floors``), in the same run, alternated
with the figure. Such a figure is judged on ``ratio = value / floor``; the
value stays in the results for history. The simulated month has no floor:
its ratio is simulated seconds per wall second. Every other figure keeps an
absolute target (floor and ratio null).

Speed is measured here and never asserted in tests. ``--smoke`` runs every
benchmark at a tiny size so ``make test`` checks that the harness works;
``--only NAME[,NAME]`` runs the named benchmarks (the functions below), to
compare two commits back to back.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

from bench.decoding import decoding
from bench.failover import DEPLOYED_RENEW, DEPLOYED_TTL, LAPSE_TARGET, TTL, takeover_at_the_lapse, takeover_seconds
from bench.floors import Measured, SqliteSettings, etcd_txns, orjson_parse, spawn_and_wait, sqlite_inserts
from bench.packing import planning_bundles, ratio_large, ratio_small
from bench.persistent import status_calls
from bench.ready import fill, ready_time, ready_time_cold
from bench.rss import daemon_rss
from bench.sim import month, warm_week
from bench.slurm import RESUME_NODES, SYNC_NODES, resume_call, resume_to_bound, sync_round
from bench.soak import STORM, liar_soak
from bench.spawn import spawn_latency
from config.models import ProviderConfig
from lease.etcd_client import put_op
from messages.demand import DemandSnapshot, HostItem
from messages.description import ProviderDescription, Template
from messages.records import ProviderRecord
from persistence.bench import acquire_bench_lease, fenced_batches, timed_append
from persistence.controller import open_controller
from persistence.encoding import stored_fact
from persistence.replay import PAGE, replay
from policy.planning import Catalog, PlanSettings, plan
from policy.supply import SupplyView
from state.projection import Projection

#: Rounds of a figure and its floor, alternated; the best of each is kept (one round in smoke mode).
ROUNDS = 3
#: Facts per commit in the journal figures and their floors.
BATCH = 500


def _rounds(smoke: bool) -> int:
    return 1 if smoke else ROUNDS


def journal_throughput(tmp: Path, smoke: bool) -> Measured:
    """Facts per second appended durably through the controller, against raw inserts of the same rows.

    Each round appends to a fresh file, then inserts the rows that append stored (read back from it,
    untimed) into another fresh file: same table, same journal mode and ``synchronous`` level as the
    controller's connection had, the same batches, one transaction each. The best of each is kept.
    """
    n = 2_000 if smoke else 100_000
    figures, floors = [], []
    for k in range(_rounds(smoke)):
        path = tmp / f"journal-{k}.db"
        url = f"sqlite:///{path}"
        c = open_controller(url)
        try:
            lease = acquire_bench_lease(c, url)
            batches = fenced_batches(lease, n, BATCH)
            figures.append(timed_append(c, batches))
            settings = SqliteSettings(c._db.connection(), "facts")  # the connection that appended
            c.leases.release(lease)
        finally:
            c.close()
        with closing(sqlite3.connect(path)) as conn:
            rows = conn.execute(f"SELECT {', '.join(settings.columns)} FROM facts ORDER BY seq").fetchall()
        if len(rows) != n:
            raise RuntimeError(f"journal bench: {len(rows)} rows stored for {n} facts")
        floors.append(sqlite_inserts(tmp / f"floor-{k}.db", settings, settings.columns,
                                     [rows[i:i + len(b)] for i, b in zip(range(0, n, BATCH), batches)]))
        del rows
        _remove_sqlite(path, tmp / f"floor-{k}.db")
    return Measured(max(figures), floor=max(floors))


def _remove_sqlite(*paths: Path) -> None:
    for path in paths:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def etcd_journal_throughput(tmp: Path, smoke: bool) -> Measured:
    """The same, on a single-member etcd over loopback, its data on this machine's disk.

    The floor writes the same batches through the same client (``lease.etcd_client``) in as many
    transactions as the controller needs (etcd takes at most 128 operations in one): the same puts
    (each fact's id, the facts' key, the head) without the compares that fence and order them.
    """
    from lease.etcd_client import EtcdClient, EtcdTarget
    from persistence.etcd import CHUNK_FACTS
    from tests.support.etcd.cluster import Cluster

    n = 500 if smoke else 20_000
    figures, floors = [], []
    cluster = Cluster(root=tmp).start()
    try:
        for k in range(_rounds(smoke)):
            url = cluster.url(f"bench{k}")
            c = open_controller(url)
            try:
                lease = acquire_bench_lease(c, url)
                batches = fenced_batches(lease, n, BATCH)
                figures.append(timed_append(c, batches))
                c.leases.release(lease)
            finally:
                c.close()
            client = EtcdClient(EtcdTarget.from_url(cluster.url(f"floor{k}")))
            try:
                txns, seq = [], 0
                for batch in batches:
                    for first in range(0, len(batch), CHUNK_FACTS):
                        chunk = batch[first:first + CHUNK_FACTS]
                        ops = [put_op(client.key("ids", f.id), b"%d" % (seq + 1 + i)) for i, f in enumerate(chunk)]
                        seq += len(chunk)
                        ops += [put_op(client.key("facts") + b"/%020d" % seq, b"\n".join(map(stored_fact, chunk))),
                                put_op(client.key("head", "facts"), b"%d" % seq)]
                        txns.append(ops)
                floors.append(n / etcd_txns(client.txn, txns))
            finally:
                client.close()
    finally:
        cluster.stop()
    return Measured(max(figures), floor=max(floors))


def replay_time(tmp: Path, smoke: bool) -> tuple[Measured, Measured]:
    """Seconds to replay a log of instance lifecycles into a projection: the best of three.

    The replay is pure computation, the same each time; on a shared 2-core machine
    one run varies by a quarter with what else runs there, so the fastest run is the
    one that measures the code (as ``timeit`` advises). The floor, after each run:
    reading the same stored rows in seq order and parsing each with orjson alone.
    Then the decoding of the same rows alone, checked as a replay decodes them, beside
    the same rows built into the same facts without checks (``bench.decoding``).
    """
    path = tmp / "replay.db"
    url = f"sqlite:///{path}"
    fill(url, 1_000 if smoke else 100_000)
    c = open_controller(url)
    times, floors = [], []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        p = replay(c)
        times.append(time.perf_counter() - started)
        assert p.instances, "the log replayed into instances"
        del p
        floors.append(orjson_parse(path))
    c.close()
    # What of it the checks cost: the decoding alone, beside the same rows built unchecked (``bench.decoding``).
    checked, unchecked = decoding(path, PAGE, ROUNDS)
    return Measured(min(times), floor=min(floors)), Measured(checked, floor=unchecked)


def _planning_inputs(smoke: bool):
    n_prov, n_tmpl, n_items = (20, 10, 20) if smoke else (1_000, 10, 1_000)
    providers = {
        f"p{i:04d}": ProviderRecord(name=f"p{i:04d}", owner="a", description=ProviderDescription(
            name=f"p{i:04d}", kind="hosts", priority=i % 7, cost_per_hour=1 + i % 13,
            templates=[Template(id=f"t{j}", max_number=50, attributes={"ncpus": 2 ** (j % 6), "type": "X86_64"})
                       for j in range(n_tmpl)]))
        for i in range(n_prov)
    }
    demand = DemandSnapshot(seq=1, items=[HostItem(id=f"d{k}", count=1 + k % 5, select={"ncpus": f">={2 ** (k % 6)}"})
                                          for k in range(n_items)])
    p = Projection()
    view = SupplyView(orders=p.orders, requests=p.requests, instances=p.instances, grants=p.grants)
    return demand, providers, view


def planning_round(_: Path, smoke: bool) -> float:
    """Milliseconds for one planning round over many providers, templates and items (descriptions unchanged).

    The same demand and supply each round, as a daemon's planner sees them between changes: it keeps its
    catalog, so each item's decision comes out as the last round's and is given again, not made anew.
    """
    demand, providers, view = _planning_inputs(smoke)
    catalog = Catalog(providers)
    plan(demand, providers, view, 0.0, PlanSettings(), catalog)
    times = []
    for _ in range(3 if smoke else 5):
        started = time.perf_counter()
        out = plan(demand, providers, view, 0.0, PlanSettings(), catalog)
        times.append(time.perf_counter() - started)
    assert len(out.decisions) == len(demand.items)
    return statistics.median(times) * 1000


def planning_cold(_: Path, smoke: bool) -> float:
    """Milliseconds for the first round after descriptions changed (offers ranked anew)."""
    demand, providers, view = _planning_inputs(smoke)
    started = time.perf_counter()
    plan(demand, providers, view, 0.0, PlanSettings())
    return (time.perf_counter() - started) * 1000


def runner_completions(tmp: Path, smoke: bool) -> Measured:
    """Script runs completed per second through the real runner (posix_spawn, pipes, parsing).

    The floor, after each round: the same script with the argv and environment the runner gave it,
    started with ``os.posix_spawn`` and waited for, as many runs, as many at a time (``max_concurrent``).
    """
    from providers.runner import ScriptRunner

    script = tmp / "usage"
    script.write_text('#!/bin/sh\necho \'{"resource": "x", "in_use": 1}\'\n')
    script.chmod(0o755)
    parallel = 8
    cfg = ProviderConfig.model_validate({"name": "bench", "kind": "units",
                                         "script": {"style": "v2", "path": str(script), "max_concurrent": parallel}})
    n = 50 if smoke else 2_000
    seen: list[tuple[list[str], dict[str, str]]] = []

    class Noted(ScriptRunner):
        def _spawn(self, argv: list[str], env: dict[str, str]) -> Any:
            if not seen:
                seen.append((list(argv), dict(env)))
            return super()._spawn(argv, env)

    figures, floors = [], []
    for _ in range(_rounds(smoke)):
        done = threading.Semaphore(0)
        failures: list[str] = []

        def on_result(result, _tag) -> None:
            if not result.ok:
                failures.append(result.reason)
            done.release()

        runner = Noted(cfg, tmp / "work", on_result)
        started = time.perf_counter()
        for _ in range(n):
            runner.submit("usage", {"resource": "x"})
        for _ in range(n):
            done.acquire(timeout=60)
        elapsed = time.perf_counter() - started
        runner.stop()
        if failures:
            raise RuntimeError(f"runner bench: {len(failures)} failures, e.g. {failures[0]}")
        figures.append(n / elapsed)
        argv, env = seen[0]
        floors.append(spawn_and_wait(argv, env, n, parallel))
    return Measured(max(figures), floor=max(floors))


class Figure(NamedTuple):
    name: str
    unit: str
    target: float
    op: str  # ">=" or "<="
    #: What the target applies to: "value" (the figure itself) or "ratio" (the figure over its floor,
    #: or, for the simulated month, simulated seconds per wall second).
    judged: str = "value"

    def met(self, value: float) -> bool:
        return value >= self.target if self.op == ">=" else value <= self.target

    def shown_target(self) -> str:
        return f"{'ratio ' if self.judged == 'ratio' else ''}{self.op} {self.target:,g}"


#: Each benchmark function returns one result per figure of its row (a tuple when several): a number,
#: or a ``Measured`` with the floor (or ratio) that a figure judged on its ratio needs.
BENCHMARKS: list[tuple[Callable[[Path, bool], Any], tuple[Figure, ...]]] = [
    (journal_throughput, (Figure("fact journal throughput, durable SQLite", "facts/s", 0.5, ">=", "ratio"),)),
    (etcd_journal_throughput, (Figure("fact journal throughput, single-member etcd on loopback", "facts/s", 0.5,
                                      ">=", "ratio"),)),
    (replay_time, (Figure("replay of 100,000 facts into one projection", "s", 2.5, "<=", "ratio"),
                   Figure("  its decoding alone, checked, beside the same built unchecked", "s", 1.25, "<=",
                          "ratio"))),
    (ready_time, (Figure("daemon ready after 100,000 facts, from its snapshot", "s", 2.0, "<="),)),
    (ready_time_cold, (Figure("  same, no snapshot: every fact replayed", "s", 10.0, "<="),)),
    (planning_round, (Figure("planning 1,000 providers x 10 templates x 1,000 items", "ms", 100.0, "<="),)),
    (planning_cold, (Figure("  same, first round after descriptions change", "ms", 1000.0, "<="),)),
    (planning_bundles, (Figure("planning 1,000 templates x 10,000 bundles of ~25 shapes, cold", "s", 2.0, "<="),)),
    (ratio_large, (Figure("  plan cost / LP lower bound", "ratio", 1.05, "<="),)),
    (ratio_small, (Figure("  same, 100 templates x 1,000 bundles", "ratio", 1.05, "<="),)),
    (runner_completions, (Figure("script runner completions", "runs/s", 0.6, ">=", "ratio"),)),
    # The one-shot figure is the baseline the ratio is taken against: it has no target of its own.
    (status_calls, (Figure("status calls, one persistent Python provider", "calls/s", 1000, ">="),
                    Figure("  same provider one-shot (a process per call)", "calls/s", 0, ">="),
                    Figure("  persistent / one-shot", "ratio", 20.0, ">="))),
    (spawn_latency, (Figure("demand pushed -> first request script spawned, p50", "ms", 50.0, "<="),
                     Figure("  same, p99", "ms", 3.0, "<=", "ratio"))),
    (resume_to_bound, (Figure("Slurm resume -> host bound to its node, p50 (plan, poll, sync every 0.1 s)", "s",
                              0.5, "<="),
                       Figure("  same, p99", "s", 1.0, "<="))),
    (resume_call, (Figure(f"Slurm ResumeProgram: provisioner-slurm resume of {RESUME_NODES} nodes, a new process",
                          "s", 1.0, "<="),)),
    (sync_round, (Figure(f"Slurm sync round, {SYNC_NODES:,} nodes in sinfo --json (parse, reconcile, view)", "s",
                         4.0, "<=", "ratio"),)),
    (takeover_seconds, (Figure(f"failover: owner killed -> standby acting (TTL {TTL:g} s)", "s", TTL + 1.0, "<="),)),
    (takeover_at_the_lapse, (Figure(f"failover, lease ttl {DEPLOYED_TTL:g} s, renew {DEPLOYED_RENEW:g} s: owner killed "
                                    "-> standby holds every role", "s", DEPLOYED_TTL + LAPSE_TARGET, "<="),
                             Figure("  same, from the lapse of the owner's leases", "s", LAPSE_TARGET, "<="))),
    # Minutes of a real daemon against providers that lie, fail and are slow (docs/recovery.md).
    (liar_soak, (Figure(f"liar soak, {STORM:g} s: leaked instance-seconds beyond graces", "s", 0, "<="),
                 Figure("  double creations", "count", 0, "<="),
                 Figure("  units returned in use", "units", 0, "<="),
                 Figure("  still held after the calm (provider or facts)", "count", 0, "<="))),
    # Its ratio: simulated seconds per wall second (it has no floor).
    (month, (Figure("simulated month of one-minute demand, 100 providers", "s", 200_000, ">=", "ratio"),)),
    # The same week without and with warm capacity (bench.sim.WARM): the cost against the wait saved. The runs'
    # own figures have no target of their own; the last two compare them.
    (warm_week, (Figure("simulated week, warm capacity off: total cost", "currency", 0, ">="),
                 Figure("  same, warm capacity on (4 hosts ready)", "currency", 0, ">="),
                 Figure("  time to capacity p50, off", "s", 0, ">="),
                 Figure("  same, on", "s", 0, ">="),
                 Figure("  time to capacity p95, off", "s", 0, ">="),
                 Figure("  same, on", "s", 0, ">="),
                 Figure("  unmet host-hours, off", "h", 0, ">="),
                 Figure("  same, on", "h", 0, ">="),
                 Figure("  cost, on / off", "ratio", 1.6, "<="),
                 Figure("  unmet host-hours, on / off", "ratio", 0.5, "<="))),
    # Last: a thousand providers load the machine for minutes after it.
    (daemon_rss, (Figure("RSS, 1,000 providers and 100,000 instances", "MiB", 100.0, "<="),
                  Figure("  same, from start until every provider is ready", "s", 5.0, "<=", "ratio"))),
]


def _row(fig: Figure, out: Any) -> dict[str, Any]:
    """One figure's result row; a figure judged on its ratio without one is an error of its benchmark."""
    measured = out if isinstance(out, Measured) else Measured(out)
    if measured.value is None or not math.isfinite(measured.value):
        raise RuntimeError(f"{fig.name.strip()}: no value")
    ratio = measured.ratio
    if measured.floor is not None:
        if not measured.floor > 0:
            raise RuntimeError(f"{fig.name.strip()}: floor {measured.floor}")
        ratio = measured.value / measured.floor
    if (fig.judged == "ratio") != (ratio is not None):
        raise RuntimeError(f"{fig.name.strip()}: judged on its {fig.judged}, measured with ratio {ratio}")
    met = fig.met(ratio if fig.judged == "ratio" else measured.value)
    return {"name": fig.name, "value": _round(measured.value), "unit": fig.unit, "floor": _round(measured.floor),
            "ratio": _round(ratio), "target": fig.target, "met": met}


def _round(x: float | None) -> float | None:
    """Six significant digits: a floor of milliseconds in seconds keeps its precision."""
    return None if x is None else float(f"{x:.6g}")


def _failed(fig: Figure) -> dict[str, Any]:
    return {"name": fig.name, "value": None, "unit": fig.unit, "floor": None, "ratio": None, "target": fig.target,
            "met": False}


def _number(x: float | None, width: int) -> str:
    if x is None:
        return f"{'-':>{width}s}"
    return f"{x:>{width},.0f}" if abs(x) >= 1_000 else f"{x:>{width}.2f}" if abs(x) >= 10 else f"{x:>{width}.3f}"


def _header(width: int) -> str:
    return f"{'figure':{width}s} {'value':>12s} {'unit':8s} {'floor':>12s} {'ratio':>9s}  {'target':18s} met"


def _line(row: dict[str, Any], fig: Figure, width: int) -> str:
    value = f"{'failed':>12s}" if row["value"] is None else _number(row["value"], 12)
    return (f"{fig.name:{width}s} {value} {fig.unit:8s} {_number(row['floor'], 12)} {_number(row['ratio'], 9)}  "
            f"{fig.shown_target():18s} {'met' if row['met'] else 'NOT MET'}")


def _chosen(only: str | None) -> list[tuple[int, Callable[[Path, bool], Any], tuple[Figure, ...]]]:
    """The benchmarks to run, each with its place in ``BENCHMARKS`` (its folder keeps its number)."""
    everything = [(i, fn, figures) for i, (fn, figures) in enumerate(BENCHMARKS)]
    if not only:
        return everything
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    known = {fn.__name__ for _, fn, _ in everything}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise SystemExit(f"bench: no benchmark named {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [entry for entry in everything if entry[1].__name__ in wanted]


def main(argv: list[str] | None = None) -> int:
    """Runs every benchmark; one that fails is reported (value null, not met) and the rest still run."""
    ap = argparse.ArgumentParser(prog="bench")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: check the harness, not the figures")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="run only these benchmarks: " + ", ".join(fn.__name__ for fn, _ in BENCHMARKS))
    ap.add_argument("--out", default="bench-results.json")
    args = ap.parse_args(argv)
    chosen = _chosen(args.only)
    results = []
    failed = False
    width = max(len(fig.name) for _, _, figures in chosen for fig in figures)
    print(_header(width), flush=True)
    with tempfile.TemporaryDirectory(prefix="provisioner-bench-") as tmp:
        for i, fn, figures in chosen:
            folder = Path(tmp) / f"{i:02d}-{fn.__name__}"
            folder.mkdir()
            try:
                out = fn(folder, args.smoke)
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) != len(figures):
                    raise RuntimeError(f"{len(outs)} values for {len(figures)} figures")
                rows = [_row(fig, o) for fig, o in zip(figures, outs)]
            except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others
                failed = True
                print(f"{fn.__name__}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                rows = [_failed(fig) for fig in figures]
            for fig, row in zip(figures, rows):
                results.append(row)
                print(_line(row, fig, width), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0
