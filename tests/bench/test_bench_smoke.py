"""The bench harness runs end to end at tiny sizes (figures are not judged here)."""

import json

import pytest

from bench import run as bench
from bench.floors import Measured

pytestmark = pytest.mark.slow

FIELDS = {"name", "value", "unit", "floor", "ratio", "target", "met"}
#: What the smoke run of the simulated month simulates (``bench.sim``: a quarter of a day).
SMOKE_MONTH_SECONDS = 0.25 * 86_400


def test_bench_harness_smoke(tmp_path):
    out = tmp_path / "results.json"
    assert bench.main(["--smoke", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    figures = [f for _, figures in bench.BENCHMARKS for f in figures]
    assert [r["name"] for r in results] == [f.name for f in figures]
    for r, fig in zip(results, figures):
        assert set(r) == FIELDS
        # A figure whose target is none at all (the liar soak's) may be 0; every other one is measured.
        assert r["value"] is not None and (r["value"] > 0 or (fig.target == 0 and r["value"] == 0)), r
        if fig.judged == "value":
            assert (r["floor"], r["ratio"]) == (None, None), r
            assert r["met"] == fig.met(r["value"])
            continue
        if r["floor"] is not None:
            assert r["floor"] > 0
            assert r["ratio"] == pytest.approx(r["value"] / r["floor"], rel=1e-4), r
        else:  # the simulated month: simulated seconds per wall second
            assert r["ratio"] * r["value"] == pytest.approx(SMOKE_MONTH_SECONDS, rel=0.01), r
        assert r["met"] == fig.met(r["ratio"])
    floored = {r["name"] for r in results if r["floor"] is not None}
    assert {f.name for f in figures if f.judged == "ratio"} - floored == {
        "simulated month of one-minute demand, 100 providers"}


def test_a_failing_benchmark_is_reported_and_the_rest_still_run(tmp_path, monkeypatch):
    def broken(_tmp, _smoke):
        raise RuntimeError("no controller")

    figure = bench.Figure("broken", "s", 1.0, "<=")
    fine = bench.Figure("fine", "ms", 10.0, "<=")
    pair = (bench.Figure("pair p50", "ms", 5.0, "<="), bench.Figure("pair p99", "ms", 5.0, "<="))
    monkeypatch.setattr(bench, "BENCHMARKS", [
        (broken, (figure,)),
        (lambda _tmp, _smoke: 12.0, (fine,)),
        (lambda _tmp, _smoke: (1.0, 9.0), pair),
    ])
    out = tmp_path / "results.json"
    assert bench.main(["--smoke", "--out", str(out)]) == 1
    results = {r["name"]: (r["value"], r["met"]) for r in json.loads(out.read_text())}
    assert results == {"broken": (None, False), "fine": (12.0, False), "pair p50": (1.0, True),
                       "pair p99": (9.0, False)}


def rate(_tmp, _smoke):
    return Measured(300.0, floor=1000.0)


def slow(_tmp, _smoke):
    return Measured(2.0, floor=1.0)


def unfloored(_tmp, _smoke):
    return 2.0


def test_a_figure_with_a_floor_is_judged_on_its_ratio(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "BENCHMARKS", [
        (rate, (bench.Figure("rate", "runs/s", 0.5, ">=", "ratio"),)),
        (slow, (bench.Figure("slow", "s", 2.5, "<=", "ratio"),)),
        # A figure judged on its ratio that comes without one is a broken benchmark.
        (unfloored, (bench.Figure("unfloored", "s", 2.5, "<=", "ratio"),)),
    ])
    out = tmp_path / "results.json"
    assert bench.main(["--smoke", "--out", str(out)]) == 1
    results = {r["name"]: r for r in json.loads(out.read_text())}
    assert results["rate"] == {"name": "rate", "value": 300.0, "unit": "runs/s", "floor": 1000.0, "ratio": 0.3,
                               "target": 0.5, "met": False}
    assert (results["slow"]["ratio"], results["slow"]["met"]) == (2.0, True)
    assert (results["unfloored"]["value"], results["unfloored"]["met"]) == (None, False)


def test_only_runs_the_named_benchmarks(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "BENCHMARKS", [
        (rate, (bench.Figure("rate", "runs/s", 0.5, ">=", "ratio"),)),
        (slow, (bench.Figure("slow", "s", 2.5, "<=", "ratio"),)),
        (unfloored, (bench.Figure("unfloored", "s", 1.0, "<="),)),
    ])
    out = tmp_path / "results.json"
    assert bench.main(["--only", "unfloored,rate", "--out", str(out)]) == 0
    assert [r["name"] for r in json.loads(out.read_text())] == ["rate", "unfloored"]
    with pytest.raises(SystemExit, match="no benchmark named nope; known: rate, slow, unfloored"):
        bench.main(["--only", "nope", "--out", str(out)])
