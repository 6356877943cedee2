"""docs/offline-evaluation.md shows what its commands print: each example table is the simulator's own output
for the commands above it, figure for figure."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from provisioner.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "offline-evaluation.md"


def _examples() -> list[tuple[list[str], list[str]]]:
    """(commands, the table's lines) for each table the page shows printed: the table after "the command at
    the top of this page" is the first block's; any other, the nearest block of commands above it."""
    text = PAGE.read_text()
    blocks: list[list[str]] = []
    out = []
    end = 0
    for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
        lang, body, before = m.group(1), m.group(2), text[end:m.start()]
        end = m.end()
        lines = [line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()]
        if lang == "sh" and any(line.startswith("provisioner sim ") for line in lines):
            blocks.append(lines)
        elif lang == "" and lines and lines[0].split()[:1] == ["base"] and blocks:
            commands = blocks[0] if "command at the top of this page" in before else blocks[-1]
            out.append((commands, [line for line in body.splitlines() if line.strip()]))
    return out


EXAMPLES = _examples()


def test_the_page_has_its_examples():
    assert len(EXAMPLES) == 3 and len({tuple(c) for c, _ in EXAMPLES}) == 3
    assert all(c[-1].startswith("provisioner sim --config examples/sim.yaml") for c, _ in EXAMPLES)


@pytest.mark.slow  # a simulated week or day per variant: seconds of CPU
@pytest.mark.parametrize("commands,table", EXAMPLES, ids=["warm", "policies", "bundles"])
def test_each_table_is_what_its_commands_print(tmp_path, capsys, monkeypatch, commands, table):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "sim" / "traces", tmp_path / "sim" / "traces")
    monkeypatch.chdir(tmp_path)
    for command in commands:
        capsys.readouterr()
        assert main([a.replace("/tmp/", f"{tmp_path}/") for a in shlex.split(command)[1:]]) == 0, command
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    # The page shows every line, or leaves some out with "...": each line it shows is printed, in order.
    at = 0
    for line in (line.rstrip() for line in table if line.strip() != "..."):
        assert line in printed[at:], f"the page shows {line!r}; the commands printed:\n" + "\n".join(printed)
        at = printed.index(line, at) + 1
