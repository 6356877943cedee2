"""The bench harness runs end to end at tiny sizes (figures are not judged here)."""

import json

from tests import bench


def test_bench_harness_smoke(tmp_path):
    out = tmp_path / "results.json"
    assert bench.main(["--smoke", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert [r["name"] for r in results] == [b[0] for b in bench.BENCHMARKS]
    for r in results:
        assert set(r) == {"name", "value", "unit", "target", "met"}
        assert r["value"] > 0
