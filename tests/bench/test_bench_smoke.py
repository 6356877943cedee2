import pytest

"""The bench harness runs end to end at tiny sizes (figures are not judged here)."""

import json

from bench import run as bench

pytestmark = pytest.mark.slow


def test_bench_harness_smoke(tmp_path):
    out = tmp_path / "results.json"
    assert bench.main(["--smoke", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert [r["name"] for r in results] == [f.name for _, figures in bench.BENCHMARKS for f in figures]
    for r in results:
        assert set(r) == {"name", "value", "unit", "target", "met"}
        # A figure whose target is none at all (the liar soak's) may be 0; every other one is measured.
        assert r["value"] is not None and (r["value"] > 0 or (r["target"] == 0 and r["value"] == 0))


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
