"""The simulator's config file, policy variants, and the ``sim`` and ``trace`` commands end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from provisioner.cli.main import main
from sim.config import ConfigError, Spread, load_sim_config, with_settings

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sim.yaml"


def _issues(tmp_path: Path, text: str) -> list[str]:
    f = tmp_path / "sim.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_sim_config(f)
    return [str(i) for i in exc.value.issues]


def test_the_example_config_loads():
    cfg, raw = load_sim_config(EXAMPLE)
    assert {p.name for p in cfg.providers} == {"onprem", "cloud-ondemand", "cloud-spot", "flexlm"}
    assert cfg.provider("cloud-ondemand").policy.billing_unit == 3600
    assert raw["policy"]["idle_time"] == "10m"


def test_config_errors_name_file_line_and_field(tmp_path):
    found = _issues(tmp_path, """\
policy:
  idle_tme: 5m
providers:
  - description: {name: a, kind: hosts, templates: [{id: t, max_number: 1}]}
    behaviour:
      lead_time: {min: 3m}
      fail_rate: 2
""")
    f = tmp_path / "sim.yaml"
    assert f"{f}:2: policy.idle_tme: unknown field (did you mean 'idle_time'?)" in found
    assert any(i.startswith(f"{f}:6: providers[0].behaviour.lead_time: ") and "min and max" in i for i in found)
    assert f"{f}:7: providers[0].behaviour.fail_rate: must be at most 1, got 2" in found


def test_spreads_draw_within_their_shape():
    import random

    rng = random.Random(1)
    assert Spread.model_validate({"fixed": "2m"}).draw(rng) == 120
    draws = [Spread.model_validate({"min": 10, "max": 20}).draw(rng) for _ in range(200)]
    assert 10 <= min(draws) and max(draws) <= 20
    with pytest.raises(ValueError, match="give a duration"):
        Spread.model_validate({"mean": 3, "min": 1, "max": 2})


def test_settings_change_a_copy_and_name_themselves_when_wrong():
    _, raw = load_sim_config(EXAMPLE)
    cfg = with_settings(raw, ["idle_time=2m", "budget.max_hosts=7", "providers.cloud-spot.behaviour.capacity=3"],
                        "--policy-set")
    assert cfg.policy.idle_time == 120 and cfg.budget.max_hosts == 7
    assert cfg.provider("cloud-spot").behaviour.capacity == 3
    assert raw["policy"]["idle_time"] == "10m", "the raw config stays as loaded"
    with pytest.raises(ConfigError, match=r"'idle_time=soon': policy.idle_time: not a duration"):
        with_settings(raw, ["idle_time=soon"], "--policy-set")
    with pytest.raises(ConfigError, match=r"no entry named 'nope'"):
        with_settings(raw, ["providers.nope.policy.billing_unit=1h"], "--policy-set")
    with pytest.raises(ConfigError, match=r"expected KEY=VALUE"):
        with_settings(raw, ["idle_time"], "--policy-set")


def test_sim_writes_the_report_the_series_and_the_plots_with_a_column_per_variant(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--out", str(trace), "--days", "0.5", "--step", "10m",
                 "--hosts", "batch:20:2:ncpus>=16", "--units", "lic:vcs:20:4", "--failover", "cloud-spot:1"]) == 0
    out = tmp_path / "out"
    code = main(["sim", "--config", str(EXAMPLE), "--trace", str(trace), "--out", str(out),
                 "--policy-set", "budget.max_cost_per_hour=100", "--compare", "lazy:idle_time=30m,cooldown=5m"])
    printed = capsys.readouterr().out
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["variants"]) == {"base", "lazy"}
    assert report["variants"]["lazy"]["settings"] == ["budget.max_cost_per_hour=100", "idle_time=30m", "cooldown=5m"]
    for v in report["variants"].values():
        assert v["total_cost"] > 0 and v["failovers"] == 1
        assert sum(v["cost_by_provider"].values()) == pytest.approx(v["total_cost"], abs=0.01)
    rows = list(csv.DictReader((out / "series.csv").open()))
    assert {r["variant"] for r in rows} == {"base", "lazy"}
    assert "supply:cloud-spot" in rows[0]
    last = [r for r in rows if r["variant"] == "base"][-1]
    assert float(last["cost_so_far"]) == pytest.approx(report["variants"]["base"]["total_cost"], abs=0.01)
    for png in ("supply-base.png", "supply-lazy.png", "cost.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    header = next(line for line in printed.splitlines() if line.strip().startswith("base"))
    assert header.split() == ["base", "lazy"]
    assert "total cost" in printed and "time to capacity p95 (s)" in printed


def test_sim_errors_are_one_clear_message_and_a_non_zero_exit(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"time": 0, "failover": ["nope"]}\n')
    assert main(["sim", "--config", str(EXAMPLE), "--trace", str(trace), "--out", str(tmp_path / "o")]) == 1
    assert f"{trace}:1: failover: no provider named 'nope'" in capsys.readouterr().err
    trace.write_text('{"time": 0, "items": [{"id": "x", "count": 1}]}\n')
    assert main(["sim", "--config", str(EXAMPLE), "--trace", str(trace), "--out", str(tmp_path / "o")]) == 1
    assert f"{trace}:1: items[0]: item 'x' is not declared yet" in capsys.readouterr().err
    trace.write_text('{"time": 0}\n')
    assert main(["sim", "--config", str(EXAMPLE), "--trace", str(trace), "--out", str(tmp_path / "o"),
                 "--compare", "bad"]) == 2
    assert "expected NAME:KEY=VALUE" in capsys.readouterr().err


def test_a_variant_may_shorten_the_lease_ttl_alone():
    """The simulator uses only lease.ttl: a shorter one must not clash with the renew_every it never set."""
    _, raw = load_sim_config(EXAMPLE)
    cfg = with_settings(raw, ["lease.ttl=3s"], "--compare (fast)")
    assert cfg.lease.ttl == 3 and cfg.lease.renew_every < 3
