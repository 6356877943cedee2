"""JSON log lines: one object per line, the message and the exception inside it."""

from __future__ import annotations

import json
import logging

import pytest

from provisioner.cli import logging_setup

pytestmark = pytest.mark.slow


def test_json_lines(capsys):
    before = logging.getLogger().handlers[:], logging.getLogger().level
    try:
        logging_setup.setup("INFO", "json")
        log = logging.getLogger("provisioner.test")
        log.info("instance %s joined", "h-1")
        log.debug("not shown at INFO")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed")
    finally:
        logging.getLogger().handlers[:], level = before
        logging.getLogger().setLevel(level)
    lines = capsys.readouterr().err.splitlines()
    docs = [json.loads(line) for line in lines]
    assert [d["message"] for d in docs] == ["instance h-1 joined", "it failed"]
    assert docs[0]["level"] == "INFO" and docs[0]["logger"] == "provisioner.test" and docs[0]["time"].endswith("Z")
    assert "ValueError: boom" in docs[1]["exception"] and "\n" not in lines[1]
