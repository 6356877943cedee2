"""ResumeProgram, SuspendProgram and ResumeFailProgram (issue 29): what Slurm asked is in the controller, at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from messages.facts import NodesChanged
from persistence.controller import open_controller
from persistence.replay import replay
from slurm.power import resume_timeout


def site(tmp_path: Path, url: str | None = None) -> Path:
    cfg = tmp_path / "provisioner.yaml"
    cfg.write_text(textwrap.dedent(f"""
        instance: {{id: a, serves: [aws], planner: true}}
        controller: {{url: "{url or 'sqlite:///' + str(tmp_path / 'state.db')}"}}
        providers:
          - {{name: aws, kind: hosts, script: {{style: v2, path: /bin/true}}}}
          - {{name: gcp, kind: hosts, script: {{style: v2, path: /bin/true}}}}
        slurm:
          nodes:
            - {{names: "cloud[1-4]", provider: aws, template: t3-large}}
            - {{names: "big[1-2]", provider: gcp, template: n2}}
        """))
    (tmp_path / "slurm.conf").write_text("ClusterName=c\nresumetimeout = 240  # seconds\nInclude more.conf\n")
    (tmp_path / "more.conf").write_text("SuspendTime=20\n")
    return cfg


def bridge(cfg: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "slurm.main", "--config", str(cfg), *args], capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "SLURM_CONF": str(cfg.parent /
                                                                                                 "slurm.conf"),
                                                      **(env or {})}, cwd=Path(__file__).resolve().parents[2])


def nodes_facts(tmp_path: Path) -> list:
    c = open_controller(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        return [(f.provider, f.payload) for f in c.read() if isinstance(f.payload, NodesChanged)]
    finally:
        c.close()


def test_resume_records_one_fact_per_node_set_with_slurms_resume_timeout_and_exits_0(tmp_path):
    cfg = site(tmp_path)
    r = bridge(cfg, "resume", "cloud[2-3],big1")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    facts = nodes_facts(tmp_path)
    assert [(prov, f.kind, f.names, f.template, f.join_timeout) for prov, f in facts] == [
        ("aws", "nodes_resumed", ["cloud2", "cloud3"], "t3-large", 240.0),
        ("gcp", "nodes_resumed", ["big1"], "n2", 240.0)]
    p = replay(open_controller(f"sqlite:///{tmp_path / 'state.db'}"))
    assert sorted(n for n, rec in p.nodes.items() if rec.wanted) == ["big1", "cloud2", "cloud3"]


def test_suspend_and_resume_fail_let_the_names_go(tmp_path):
    cfg = site(tmp_path)
    assert bridge(cfg, "resume", "cloud[1-2]").returncode == 0
    assert bridge(cfg, "suspend", "cloud1").returncode == 0
    assert bridge(cfg, "resume-fail", "cloud2").returncode == 0
    p = replay(open_controller(f"sqlite:///{tmp_path / 'state.db'}"))
    assert {n: (rec.wanted, rec.reason) for n, rec in p.nodes.items()} == {
        "cloud1": (False, "Slurm's SuspendProgram cloud1"), "cloud2": (False, "Slurm's ResumeFailProgram cloud2")}


def test_a_name_no_node_set_maps_is_named_and_the_others_are_recorded(tmp_path):
    cfg = site(tmp_path)
    r = bridge(cfg, "resume", "cloud1,gpu[1-2]")
    assert r.returncode == 1
    assert r.stderr == ("provisioner-slurm: resume: no node set of the config's slurm.nodes has gpu[1-2] "
                        "(the others are recorded)\n")
    assert [f.names for _, f in nodes_facts(tmp_path)] == [["cloud1"]]


@pytest.mark.parametrize(("args", "code", "said"), [
    (("resume", "cloud[1-"), 2, "resume cloud[1-: not a hostlist expression: 'cloud[1-' (unbalanced brackets)"),
    (("suspend", ""), 2, "suspend : empty hostlist expression"),
])
def test_a_bad_hostlist_is_one_line_and_records_nothing(tmp_path, args, code, said):
    r = bridge(site(tmp_path), *args)
    assert (r.returncode, r.stderr) == (code, f"provisioner-slurm: {said}\n")
    assert not (tmp_path / "state.db").exists() or nodes_facts(tmp_path) == []


def test_an_unreachable_controller_is_one_line_and_a_failure(tmp_path):
    blocked = tmp_path / "ro"
    blocked.mkdir()
    (blocked / "state.db").mkdir()  # a folder where the database file should be
    r = bridge(site(tmp_path, url=f"sqlite:///{blocked / 'state.db'}"), "resume", "cloud1")
    assert r.returncode == 1
    assert r.stderr.startswith("provisioner-slurm: resume cloud1: nothing recorded, the controller is unreachable:")
    assert r.stderr.count("\n") == 1


def test_resume_timeout_is_slurms_default_when_slurm_conf_says_nothing(tmp_path):
    (tmp_path / "slurm.conf").write_text("ClusterName=c\n")
    assert resume_timeout({"SLURM_CONF": str(tmp_path / "slurm.conf")}) == 60.0
    assert resume_timeout({"SLURM_CONF": str(tmp_path / "missing.conf")}) == 60.0
