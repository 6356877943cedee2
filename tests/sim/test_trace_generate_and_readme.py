"""``trace generate`` refuses arguments that make no trace, the README's offline example runs as shown, and
the cost chart shows variants apart."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.cli.main import main
from sim.config import load_sim_config
from sim.plots import STYLES, cost_figure
from sim.report import simulate, variants
from sim.trace import parse_trace

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args,said", [
    (["--bursts-per-day", "-2"], "--bursts-per-day -2: cannot be negative"),
    (["--lost", "cloud-spot:-3"], "--lost cloud-spot:-3: a rate cannot be negative"),
    (["--failover", "cloud-spot:-1"], "--failover cloud-spot:-1: a count cannot be negative"),
    (["--noise", "-0.1"], "--noise -0.1: cannot be negative"),
    (["--hosts", "x:4:40"], "--hosts x: base 40 is above the peak 4"),
    (["--hosts", "x:-4"], "--hosts x: peak -4 and base 0 must be 0 or more"),
    (["--days", "0"], "--days 0: must be more than 0"),
    (["--days", "0.001", "--step", "1h"], "--step 3600s is longer than --days 0.001 (86.4s)"),
])
def test_trace_generate_refuses_what_makes_no_trace(tmp_path, capsys, args, said):
    out = tmp_path / "t.jsonl"
    code = main(["trace", "generate", "--out", str(out), "--hosts", "batch:40:4", *args])
    assert code == 1 and said in capsys.readouterr().err and not out.exists()


def _readme_commands(name: str) -> list[str]:
    """The README's shell lines starting ``provisioner NAME``, continuation lines joined."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines if line.strip().startswith(f"provisioner {name}")]


@pytest.mark.slow  # real processes
def test_the_readmes_trace_generate_and_sim_example_runs_as_shown(tmp_path):
    generate = _readme_commands("trace generate")
    simulate_ = _readme_commands("sim --config examples/sim.yaml")
    assert generate and simulate_, "the README shows both"
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for command in (generate[0], simulate_[0]):
        argv = [a.replace("/tmp/sim", str(tmp_path / "sim")) for a in shlex.split(command)[1:]]
        r = subprocess.run([sys.executable, "-m", "provisioner.cli", *argv], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, (command, r.stderr)
    assert (tmp_path / "sim" / "report.json").exists() and (tmp_path / "sim" / "cost.png").exists()


def test_the_cost_chart_draws_each_variant_in_its_own_style_with_its_total_and_the_difference():
    trace = parse_trace(['{"time": 0, "items": [{"id": "b", "kind": "hosts", "count": 4}]}', '{"time": 7200}'])
    _, raw = load_sim_config(ROOT / "examples" / "sim.yaml")
    results = simulate(raw, trace, variants([], ["same:idle_time=10m"]), "test")
    fig = cost_figure(results)
    top, low = fig.axes[:2]
    styles = [line.get_linestyle() for line in top.get_lines()]
    assert len(set(styles)) == 2 and styles[0] == STYLES[0], "the same costs, still two lines to see"
    totals = [t.get_text() for t in top.get_legend().get_texts()]
    assert totals == [f"{r.variant.name}: {r.engine.metrics.samples[-1].cost:,.2f}" for r in results]
    assert [t.get_text() for t in low.get_legend().get_texts()] == ["same - base"]
    assert all(y == 0 for y in low.get_lines()[-1].get_ydata()), "identical runs: no difference"
