"""The built-in demo: its config runs, and its workload drives the whole loop."""

from __future__ import annotations

import pytest

from persistence.replay import replay
from provisioner.cli.demo import demo_config, sim_admin
from provisioner.daemon.root import Daemon
from sim.workload import BUSY_FOR, PHASES, DemoWorkload
from tests.support.daemons import wait_until

pytestmark = pytest.mark.slow


def test_demo_workload_gets_hosts_and_licenses_then_returns_idle_hosts(tmp_path):
    home = tmp_path / "home"
    cfg = demo_config(home, idle_time="0s", lead_time=0.0)
    daemon = Daemon(cfg, home, tick=0.05).start()
    c = daemon.controller
    used: list[int] = []

    def set_use(n: int) -> None:
        used.append(n)
        sim_admin(home, "sim-licenses", "set-in-use", "vcs", str(n))

    # The workload runs on a virtual clock the test moves; the daemon runs for real.
    workload = DemoWorkload(c, set_license_use=set_use, clock=lambda: 0.0)
    try:
        _, hosts, units = PHASES[0]
        # The workload sets its license use when it steps; the borrowed units may show up in the
        # replay just after a step, so the use is judged at the next one.
        wait_until(lambda: _step_and_check(workload, 1.0, c, lambda p: sum(
            1 for i in p.instances.values() if i.state == "busy") == hosts and (
            p.resources.get("vcs") and p.resources["vcs"].borrowed == units)) and used[-1:] == [
            units + cfg.resources[0].base],
            what="the first phase's hosts busy, licenses borrowed, and all of them in use")
        assert used and used[-1] == units + cfg.resources[0].base
        quiet_at = PHASES[1][0] + BUSY_FOR + 1
        wait_until(lambda: _step_and_check(workload, quiet_at, c, lambda p: p.instances and all(
            i.state == "returned" for i in p.instances.values())), what="idle hosts returned")
        p = replay(c)
        assert len(p.instances) == hosts, "the demand was met once, never again while supply was in flight"
    finally:
        daemon.stop()


def _step_and_check(workload: DemoWorkload, at: float, controller, condition) -> bool:
    workload.step(at)
    return bool(condition(replay(controller)))


def test_a_restarted_demo_gives_back_the_hosts_busy_at_the_stop(tmp_path):
    """Stopped while its hosts were busy and run again, the demo's scheduler knows none of them: its first
    view lists none, so they serve no one and go back; the demo ends with nothing live (nothing billed)."""
    home = tmp_path / "home"
    hosts = PHASES[0][1]
    daemon = Daemon(demo_config(home, idle_time="0s", lead_time=0.0, unlisted_grace="1s"), home, tick=0.05).start()
    try:
        first = DemoWorkload(daemon.controller, clock=lambda: 0.0)
        wait_until(lambda: _step_and_check(first, 1.0, daemon.controller, lambda p: sum(
            1 for i in p.instances.values() if i.state == "busy") == hosts), what="the first phase's hosts busy")
    finally:
        daemon.stop()
    # Run it again: a new daemon on the same home, and the workload afresh, now in a quiet phase.
    daemon = Daemon(demo_config(home, idle_time="0s", lead_time=0.0, unlisted_grace="1s"), home, tick=0.05).start()
    try:
        again = DemoWorkload(daemon.controller, clock=lambda: 0.0)
        quiet = PHASES[1][0] + 1
        wait_until(lambda: _step_and_check(again, quiet, daemon.controller, lambda p: len(p.instances) == hosts and all(
            i.state == "returned" for i in p.instances.values())), what="the hosts busy at the stop returned")
        assert again.viewed is not None and again.viewed.hosts == [], "its view named no host of the last run"
    finally:
        daemon.stop()
