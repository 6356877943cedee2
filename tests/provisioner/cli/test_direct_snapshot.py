"""The CLI's direct views start from the daemon's snapshot of the log, and show the same rows either way."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.ready import fill
from persistence.controller import open_controller
from persistence.snapshot import SnapshotStore
from provisioner.cli.direct import Direct
from provisioner.read.model import ReadModel

pytestmark = pytest.mark.slow

NOW = 1_900_000_000.0
VIEWS = ("instances", "requests", "providers", "costs")


@pytest.fixture
def log(tmp_path: Path):
    """A log of 400 facts, a snapshot of it in ``home`` (as a daemon writes one), then 40 facts more."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    fill(url, 400)
    c = open_controller(url)
    ReadModel(c, SnapshotStore.for_controller(tmp_path / "home", url)).write_snapshot()
    c.close()
    fill(url, 40, start=1_000)
    return url


def _direct(url: str, home: Path) -> tuple[Direct, list[int]]:
    """A direct source whose controller counts the facts read from it."""
    c = open_controller(url)
    read, counted = c.read, []

    def counting_read(after: int = 0, limit: int = 10_000):
        facts = read(after=after, limit=limit)
        counted.append(len(facts))
        return facts

    c.read = counting_read  # type: ignore[method-assign]
    d = Direct(c, home, None, url)
    d.ops.clock = lambda: NOW
    return d, counted


def _rows(d: Direct) -> dict[str, list]:
    try:
        return {view: d.rows(view) for view in VIEWS}
    finally:
        d.close()


def test_a_view_reads_only_the_facts_after_the_snapshot(log, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="persistence.snapshot")
    from_snapshot, read = _direct(log, tmp_path / "home")
    replayed, read_all = _direct(log, tmp_path / "elsewhere")
    assert _rows(from_snapshot) == _rows(replayed)
    assert sum(read_all) == 440
    # the 40 written since, and the one fact that proves the snapshot belongs to this log
    assert sum(read) == 41
    # where the replay starts is not news to a CLI user
    assert "loaded seq" not in caplog.text and "none at" not in caplog.text


def test_a_damaged_snapshot_is_said_and_the_whole_log_replayed(log, tmp_path, caplog):
    store = SnapshotStore.for_controller(tmp_path / "home", log)
    data = bytearray(store.path.read_bytes())
    data[-1] ^= 0xFF
    store.path.write_bytes(bytes(data))
    caplog.set_level(logging.INFO, logger="persistence.snapshot")
    damaged, read = _direct(log, tmp_path / "home")
    replayed, _ = _direct(log, tmp_path / "elsewhere")
    assert _rows(damaged) == _rows(replayed)
    assert sum(read) == 440
    assert f"ignoring {store.path}: damaged" in caplog.text
    # only the problem is said, not where the replay starts
    assert "none at" not in caplog.text


def test_the_cli_finds_the_snapshot_of_its_config_and_prints_only_rows(log, tmp_path):
    # A fact the snapshot covers no longer decodes: only a full replay reads it, and says so.
    db = sqlite3.connect(tmp_path / "state.db")
    with db:
        db.execute("UPDATE facts SET payload = ? WHERE seq = 5", (b'{"from": "a newer schema"}',))
    db.close()
    config = tmp_path / "provisioner.yaml"

    def instances(home: Path) -> subprocess.CompletedProcess:
        config.write_text(yaml.safe_dump({"instance": {"id": "cli", "serves": []}, "controller": {"url": log},
                                          "home": str(home)}))
        return subprocess.run([sys.executable, "-m", "provisioner.cli", "--config", str(config), "instances",
                               "-o", "json"], capture_output=True, text=True, timeout=60)

    shown = instances(tmp_path / "home")
    assert shown.returncode == 0 and shown.stderr == ""
    assert len(json.loads(shown.stdout)) == 110  # 100 instances before the snapshot, 10 after
    replayed = instances(tmp_path / "elsewhere")
    assert replayed.returncode == 0 and "skipping fact seq 5 that does not decode" in replayed.stderr
