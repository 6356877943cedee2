"""Drills 2, 3 and 4 on SQLite: a standby takes over from a dead or paused owner, or from a process with its id."""

from __future__ import annotations

import pytest

from tests.support.drills import kill_9_the_owner, pause_the_owner, same_id_twice

pytestmark = pytest.mark.slow


def test_kill_9_the_owner_and_the_standby_finishes_the_work(cluster):
    kill_9_the_owner(cluster)


def test_a_paused_owner_wakes_fenced_out_and_acts_no_more(cluster):
    pause_the_owner(cluster)


def test_a_second_process_with_the_same_instance_id_waits_and_the_demand_is_met_once(cluster):
    same_id_twice(cluster)
