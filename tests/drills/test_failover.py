"""Drills 2 and 3 on SQLite: a standby takes over from a dead or paused owner; the old owner can do no harm."""

from __future__ import annotations

import pytest

from tests.support.drills import kill_9_the_owner, pause_the_owner

pytestmark = pytest.mark.slow


def test_kill_9_the_owner_and_the_standby_finishes_the_work(cluster):
    kill_9_the_owner(cluster)


def test_a_paused_owner_wakes_fenced_out_and_acts_no_more(cluster):
    pause_the_owner(cluster)
