"""What ``--help`` and a missing command say (issue 34, item 7): plain words, each thing once."""

from __future__ import annotations

import re

import pytest

from provisioner.cli.main import main
from provisioner.cli.options import GLOBAL


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_the_first_line_of_the_help_is_plain_words(capsys):
    text = _help(capsys)
    description = text.split("\n\n")[1]
    assert description.startswith("Run the daemon, check a config"), description
    assert "`" not in description and "*" not in description


@pytest.mark.parametrize("command", [("plan",), ("run",), ("instances", "return"), ("provider", "resume"),
                                     ("demand", "put")])
def test_a_commands_help_names_the_global_options_once_without_their_help(capsys, command):
    text = _help(capsys, *command)
    words = " ".join(text.split())
    for flags, kw in GLOBAL:
        assert not re.search(rf"^\s+{flags[0]}\b|\[{flags[0]}\b", text, re.MULTILINE), (flags[0], text)
        assert " ".join(kw["help"].split()) not in words, text
    assert "global options (before or after the command):" not in text
    assert "provisioner --help explains them" in words
    assert "--log-\n" not in text, "a flag is never broken at its hyphen"


def test_the_main_help_explains_the_global_options(capsys):
    text = " ".join(_help(capsys).split())
    for flags, kw in GLOBAL:
        assert flags[0] in text and " ".join(kw["help"].split()) in text


@pytest.mark.parametrize("argv,names", [(["instance"], "return"), (["demand"], "put, show"),
                                        (["provider"], "pause, resume, drain"), ([], "run, reload, check-config")])
def test_a_missing_command_names_the_commands_not_an_argument(capsys, argv, names):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "arguments are required" not in err, err
    assert f"missing a command: one of {names}" in err, err


def test_global_options_are_still_taken_after_the_command(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    assert main(["schema", "demand", "--controller", url, "--log-level", "warning"]) == 0
