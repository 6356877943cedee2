"""A trace item no simulated provider can serve is a warning in the report, not the end of the run.

An exported trace holds whatever the scheduler asked for, a license nobody
lends any more included; the run goes on, says which item and why, and
counts the item's demand as unmet the whole way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sim.yaml"

SERVED = [{"id": "batch", "kind": "hosts", "count": 3, "select": {"ncpus": ">=8"}},
          {"id": "lic", "kind": "units", "resource": "vcs", "count": 4}]


def _sim(tmp_path: Path, extra: dict | None, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    """The base variant's figures and report warnings, and what was printed, for a 2-hour trace."""
    name = "with" if extra else "without"
    trace = tmp_path / f"{name}.jsonl"
    items = SERVED + ([extra] if extra else [])
    trace.write_text("\n".join(json.dumps(line) for line in [
        {"trace": {"start": "2024-05-06T00:00:00Z"}}, {"time": 0, "items": items}, {"time": "2h"}]) + "\n")
    out = tmp_path / name
    code = main(["sim", "--config", str(EXAMPLE), "--trace", str(trace), "--out", str(out), "--no-plots"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    report = json.loads((out / "report.json").read_text())
    return {**report["variants"]["base"], "warnings": report.get("warnings", [])}, printed.out


@pytest.mark.parametrize("item,why,unmet,hours", [
    ({"id": "old-lic", "kind": "units", "resource": "nosuch-lic", "count": 2},
     "no provider can serve it (flexlm: lends no nosuch-lic (it lends vcs))", "unmet_unit_hours", 4.0),
    ({"id": "gpu", "kind": "hosts", "count": 2, "select": {"ngpus": ">=1"}},
     "no provider can serve it (cloud-ondemand: no template has attribute ngpus; cloud-spot: no template has "
     "attribute ngpus; onprem: no template has attribute ngpus)", "unmet_host_hours", 4.0),
    ({"id": "big", "kind": "hosts", "count": 1, "template": "x-96"},
     "no provider can serve it (cloud-ondemand: no template named x-96 (it has c-16, c-8); cloud-spot: no "
     "template named x-96 (it has s-16); onprem: no template named x-96 (it has onprem-16))",
     "unmet_host_hours", 2.0),
    ({"id": "fat", "kind": "bundles", "count": 3, "resources": {"ncpus": 64}},
     "no provider can serve it (cloud-ondemand: too small: no template holds one bundle (ncpus 16 < 64); "
     "cloud-spot: too small: no template holds one bundle (ncpus 16 < 64); onprem: too small: no template "
     "holds one bundle (ncpus 16 < 64))", "unmet_bundle_hours", 6.0),
])
def test_an_item_no_provider_serves_is_warned_of_and_counted_unmet(tmp_path, capsys, item, why, unmet, hours):
    warned = f"trace item {item['id']}: {why}: its demand stays unmet throughout"
    base, _ = _sim(tmp_path, None, capsys)
    got, printed = _sim(tmp_path, item, capsys)
    assert f"warning: {warned}" in printed
    assert got["warnings"] == [warned]
    assert got[unmet] - base.get(unmet, 0.0) == pytest.approx(hours, abs=0.01), "its whole want waited throughout"
    for key in ("unmet_host_hours", "unmet_unit_hours"):
        if key != unmet:
            assert got[key] == pytest.approx(base[key]), "the items served are served as before"
