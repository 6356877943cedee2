"""Fixtures of the actors' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence.sqlite import SqliteController
from tests.support.lease_world import Clock


@pytest.fixture
def world(tmp_path: Path):
    clock = Clock()
    controller = SqliteController(str(tmp_path / "state.db"), clock=clock)
    yield clock, controller
    controller.close()
