"""A clean stop is no trouble: leases given back on the way out log no WARNING (issue 20, item 4)."""

from __future__ import annotations

import logging

from tests.support.lease_world import held, lease_actor


def test_a_clean_stop_gives_every_lease_back_without_a_warning(world, caplog) -> None:
    _, controller = world
    actor, started = lease_actor(world, "a")
    actor.on_start()
    assert held(actor) == {"planner", "provider:hosts", "provider:units"}
    caplog.set_level(logging.INFO, logger="actors.lease")
    actor.on_stop()
    assert all(r.stopped and r.revoked.is_set() for r in started)
    assert controller.leases.all() == [] or all(lease.holder != "a" for lease in controller.leases.all())
    given = [r for r in caplog.records if "given up: daemon stopping" in r.getMessage()]
    assert len(given) == 3 and {r.levelno for r in caplog.records} == {logging.INFO}
