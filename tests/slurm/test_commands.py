"""Slurm's commands, live (issue 29): missing, failing, slow or printing what cannot be read is one line naming the
command; 22.05's sinfo lists nodes, and a newer sinfo's groups send the bridge to scontrol."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm.commands import LiveSlurm
from slurm.sync import SlurmError

FIXTURES = Path(__file__).parent / "fixtures"


def commands(tmp_path: Path, **scripts: str) -> dict[str, str]:
    """An environment whose PATH holds only these commands (shell scripts), and a log of what ran."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = folder / name
        path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp_path}/ran.log"\n{body}\n')
        path.chmod(0o755)
    return {"PATH": f"{folder}:/usr/bin:/bin" if os.path.exists("/usr/bin/cat") else str(folder)}


def ran(tmp_path: Path) -> list[str]:
    return (tmp_path / "ran.log").read_text().splitlines()


def test_22_05_nodes_come_from_sinfo(tmp_path):
    env = commands(tmp_path, sinfo=f'cat "{FIXTURES / "sinfo-v0.0.38.json"}"')
    assert [n.name for n in LiveSlurm(env=env).nodes()] == ["cloud1", "cloud2", "cloud3"]
    assert ran(tmp_path) == ["sinfo --json"]


def test_a_newer_sinfo_sends_the_bridge_to_scontrol_once_and_for_good(tmp_path):
    env = commands(tmp_path, sinfo='echo \'{"sinfo": [], "meta": {}}\'',
                   scontrol=f'cat "{FIXTURES / "nodes-v0.0.41.json"}"')
    slurm = LiveSlurm(env=env)
    assert [n.name for n in slurm.nodes()] == ["cloud1", "cloud2", "cloud3"]
    slurm.nodes()
    assert ran(tmp_path) == ["sinfo --json", "scontrol show nodes --json", "scontrol show nodes --json"]


@pytest.mark.parametrize("body, says", [
    (None, "sinfo --json: sinfo not found on PATH"),
    ('echo "sinfo: error: Unable to contact slurm controller (connect failure)" >&2; exit 1',
     "sinfo --json: exit 1: sinfo: error: Unable to contact slurm controller (connect failure)"),
    ("exec sleep 30", "sinfo --json: timed out after 0.5s"),
    ('echo "{"', "sinfo --json: output is not JSON"),
])
def test_a_command_missing_failing_slow_or_unreadable_is_one_line(tmp_path, body, says):
    env = commands(tmp_path, **({"sinfo": body} if body else {}))
    if body is None:
        env = {"PATH": str(tmp_path / "bin")}
    with pytest.raises(SlurmError) as err:
        LiveSlurm(timeout=0.5, env=env).nodes()
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_scontrol_gets_the_arguments_as_given_and_its_refusal_is_an_error(tmp_path):
    env = commands(tmp_path, scontrol='[ "$2" = "nodename=bad" ] && { echo "Invalid node name specified" >&2; '
                                      'exit 1; }; exit 0')
    slurm = LiveSlurm(env=env)
    slurm.scontrol(["update", "nodename=cloud1", "nodeaddr=10.0.0.7"])
    with pytest.raises(SlurmError, match="scontrol update nodename=bad state=drain: exit 1: Invalid node name"):
        slurm.scontrol(["update", "nodename=bad", "state=drain"])
    assert ran(tmp_path) == ["scontrol update nodename=cloud1 nodeaddr=10.0.0.7", "scontrol update nodename=bad "
                             "state=drain"]
