"""Elastic licenses on a real Slurm (issue 30): MariaDB, slurmdbd, slurmctld and a slurmd (``tests.support.slurmdbd``),
a real daemon lending FlexNet tokens through ``provisioner-flexlm`` (its fake license server and real pool ledger,
``tests.support.licenses``), and the bridge's sync service between them, so Slurm's jobs wait for, get and give
back borrowed tokens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from providers.flexlm.ledger import open_ledger
from slurm.license_commands import LiveLicenses
from slurm.licenses import Command, LicenseError
from tests.support.daemons import wait_until
from tests.support.licenses import LicenseServer, LicenseSite, ledger_held
from tests.support.slurmdbd import AccountedSlurm, installed

pytestmark = pytest.mark.slow
BASE, POOL, IDLE = 2, 10, 3.0


class SlurmSite(LicenseSite):
    """A license site whose config maps ``vcs`` to Slurm's license ``license`` (default ``vcs@flex``)."""

    license = "vcs@flex"

    def config(self, instance: str):
        path = super().config(instance)
        cfg = yaml.safe_load(path.read_text())
        cfg["slurm"] = {"licenses": [{"resource": "vcs", "license": self.license}], "sync_every": "1s",
                        "command_timeout": "20s"}
        path.write_text(yaml.safe_dump(cfg))
        return path


@pytest.fixture
def world(tmp_path):
    assert not installed(), f"Slurm with accounting is not installed ({', '.join(installed())}): .ci/run does it"
    made: dict = {}
    yield made
    for proc in made.get("syncs", []):
        proc.kill()
        proc.wait(10)
    for key in ("site", "site-b"):
        if key in made:
            made[key].close()
            print(made[key].tails())
    for key in ("slurm-b", "slurm"):  # the cluster sharing the first one's slurmdbd stops first
        if key in made:
            print(f"----- slurmctld of {made[key].cluster} -----\n" + made[key].log(60))
            made[key].stop()
    log = tmp_path / "sync.log"
    print("----- sync -----\n" + (log.read_text()[-4000:] if log.exists() else ""))


@pytest.mark.timeout(300)
def test_three_jobs_of_two_tokens_borrow_four_run_and_slurms_total_falls_back_after_the_idle_time(world, tmp_path):
    slurm = world["slurm"] = AccountedSlurm(tmp_path, count=BASE)
    print(f"Slurm with accounting up in {slurm.took}")
    server = LicenseServer(tmp_path / "license-server")
    ledger = f"sqlite://{tmp_path}/ledger.db"
    site = world["site"] = SlurmSite(tmp_path / "site-a", server, ledger, base=BASE, pool=POOL,
                                     idle_time=f"{IDLE}s")
    site.config("a")
    daemon = site.start("a")
    daemon.wait(lambda: site.described(), "the FlexNet provider described to the daemon")
    sync = subprocess.Popen([sys.executable, "-m", "slurm.main", "--config", str(site.tmp / "a.yaml"), "sync"],
                            stdout=open(tmp_path / "sync.log", "ab"), stderr=subprocess.STDOUT, env=slurm.env,
                            start_new_session=True)
    world["syncs"] = [sync]
    sync_log = lambda: (tmp_path / "sync.log").read_text()[-3000:]  # noqa: E731
    # The ceiling is published (base + pool), the units not borrowed held back: jobs may use the base.
    wait_until(lambda: slurm.license() == {"Total": BASE + POOL, "Used": 0, "Reserved": POOL}, 60,
               "Slurm showing the ceiling with the pool held back", said=lambda: sync_log() + slurm.log())

    peak = {"held": 0}

    def look() -> dict[str, int]:
        """Slurm's license now; on every look, what is borrowed covers what Slurm's jobs use beyond the base."""
        lic = slurm.license()
        held = ledger_held(ledger).get("site-a", 0)
        peak["held"] = max(peak["held"], held)
        assert held >= lic["Used"] - BASE, f"{held} borrowed while Slurm's jobs hold {lic['Used']} of a base {BASE}"
        assert lic["Total"] - lic["Reserved"] <= BASE + held, f"Slurm may hand out more than is held: {lic}"
        return lic

    jobs = [slurm.submit("-c1", "-L", "vcs@flex:2", "--wrap", "sleep 8") for _ in range(3)]
    wait_until(lambda: sum(1 for j in jobs if slurm.jobs()[j] == ("PENDING", "Licenses")) == 2, 30,
               "two of the jobs waiting on licenses", said=slurm.log)
    wait_until(lambda: look()["Total"] - look()["Reserved"] == BASE + 4, 60,
               "4 tokens borrowed and Slurm's usable total following them",
               said=lambda: sync_log() + daemon.tail())
    assert ledger_held(ledger) == {"site-a": 4}
    wait_until(lambda: all(slurm.jobs()[j][0] in ("RUNNING", "COMPLETED") for j in jobs) and look() is not None,
               60, "all three jobs running on the borrowed tokens", said=slurm.log)
    wait_until(lambda: all(slurm.jobs()[j][0] == "COMPLETED" for j in jobs), 60, "the three jobs done",
               said=slurm.log)
    wait_until(lambda: ledger_held(ledger) == {} and look() == {"Total": BASE + POOL, "Used": 0, "Reserved": POOL},
               60, "the tokens given back and Slurm's usable total back at the base",
               said=lambda: sync_log() + daemon.tail())
    assert peak["held"] == 4, f"borrowed {peak['held']} at most, for 4 units wanted"
    assert site.published() == (BASE, 0, BASE)
    published = [f.payload for f in site.c.read() if f.kind == "license_published"]
    assert (published[0].count, published[0].reserved) == (BASE + POOL, POOL), "the ceiling first, the pool held"
    assert POOL - 4 in {p.reserved for p in published}, "the reservation shrank by the 4 borrowed"
    assert (published[-1].count, published[-1].reserved) == (BASE + POOL, POOL)
    assert max(p.in_use for p in published) >= 4, "the use of the borrowed tokens by Slurm's jobs was recorded"


@pytest.mark.timeout(300)
def test_kill_9_of_the_owner_while_a_borrow_is_in_flight_the_standby_finishes_it_and_nothing_is_borrowed_twice(
        world, tmp_path):
    slurm = world["slurm"] = AccountedSlurm(tmp_path, count=BASE)
    server = LicenseServer(tmp_path / "license-server")
    ledger = f"sqlite://{tmp_path}/ledger.db"
    site = world["site"] = SlurmSite(tmp_path / "site-a", server, ledger, base=BASE, pool=POOL,
                                     idle_time=f"{IDLE}s")
    site.config("a")
    site.config("b")
    roles = {"planner", "provider:lic"}
    # a dies (SIGKILL) once the provider has lent the tokens, before it records the answer.
    a = site.start("a", failpoints="request.after_script")
    a.wait(lambda: {r for r in roles if site.owner(r) == "a"} == roles and site.described(),
           "a to own the planner and the provider")
    b = site.start("b")
    sync = subprocess.Popen([sys.executable, "-m", "slurm.main", "--config", str(site.tmp / "a.yaml"), "sync"],
                            stdout=open(tmp_path / "sync.log", "ab"), stderr=subprocess.STDOUT, env=slurm.env,
                            start_new_session=True)
    world["syncs"] = [sync]
    sync_log = lambda: (tmp_path / "sync.log").read_text()[-3000:]  # noqa: E731
    wait_until(lambda: slurm.license() == {"Total": BASE + POOL, "Used": 0, "Reserved": POOL}, 60,
               "Slurm showing the ceiling with the pool held back", said=lambda: sync_log() + slurm.log())
    jobs = [slurm.submit("-c1", "-L", "vcs@flex:2", "--wrap", "sleep 6") for _ in range(3)]
    assert a.wait_dead(timeout=60) == -signal.SIGKILL, "a was to die between the grant and its record"
    (call,) = site.calls("request")
    token = call[2]
    # The sync may have seen one job waiting, or both, when a ordered: its request asked 2 or 4.
    asked = site.state().requests[token].count
    assert asked in (2, 4) and ledger_held(ledger) == {"site-a": asked}, "the provider lent before a died"
    fenced = [f for f in site.c.read() if f.kind == "license_published"]
    assert {f.payload.reserved for f in fenced} == {POOL}, "something borrowed was shown before it was recorded"

    wait_until(lambda: {r for r in roles if site.owner(r) == "b"} == roles, site.ttl + 20, "b to take over",
               said=b.tail)
    wait_until(lambda: slurm.license()["Reserved"] == POOL - 4, 60,
               "the standby finishing the borrow and Slurm's usable total following it",
               said=lambda: sync_log() + b.tail())
    calls = site.calls("request")
    assert calls[:2] == [("a", "request", token), ("b", "request", token)], "b repeated a's call, under its token"
    assert ledger_held(ledger) == {"site-a": 4}, "borrowed twice"
    book = open_ledger(ledger)
    try:
        first = next(g for g in book.grants("site-a") if g.token == token)
        assert (first.requested, first.granted) == (asked, asked), "a's call lent once, for b's repeat too"
    finally:
        book.close()
    new_fence = site.c.leases.get("provider:lic").fence
    shown = [f for f in site.c.read() if f.kind == "license_published" and f.payload.reserved < POOL]
    assert shown and {f.fence for f in shown} == {new_fence}, "published under the standby's fence only"
    wait_until(lambda: all(slurm.jobs()[j][0] == "COMPLETED" for j in jobs), 90, "the three jobs run",
               said=slurm.log)
    wait_until(lambda: ledger_held(ledger) == {} and slurm.license() == {"Total": BASE + POOL, "Used": 0,
                                                                         "Reserved": POOL},
               60, "the tokens given back by the standby", said=lambda: sync_log() + b.tail())
    assert site.published() == (BASE, 0, BASE)
    assert b.alive()


@pytest.mark.timeout(400)
def test_two_clusters_on_one_slurmdbd_borrow_from_one_pool_each_total_follows_its_own_and_the_pool_holds(world,
                                                                                                          tmp_path):
    pool = 6  # the two clusters want 4 each at first: more than the pool
    a_slurm = world["slurm"] = AccountedSlurm(tmp_path, count=BASE, cluster="lic", license="vcs@flex-a")
    b_slurm = world["slurm-b"] = AccountedSlurm(tmp_path, count=BASE, cluster="lic2", license="vcs@flex-b",
                                                shared=a_slurm)
    server = LicenseServer(tmp_path / "license-server")
    ledger = f"sqlite://{tmp_path}/ledger.db"
    sites = {}
    for key, name, hosts, lic, slurm in (("site", "site-a", ("cn*",), "vcs@flex-a", a_slurm),
                                         ("site-b", "site-b", ("gn*",), "vcs@flex-b", b_slurm)):
        site = world[key] = SlurmSite(tmp_path / name, server, ledger, name=name, hosts=hosts, base=BASE,
                                      pool=pool, idle_time=f"{IDLE}s")
        site.license = lic
        site.config("a")
        site.start("a").wait(lambda site=site: site.described(), f"{name}'s provider described")
        world.setdefault("syncs", []).append(subprocess.Popen(
            [sys.executable, "-m", "slurm.main", "--config", str(site.tmp / "a.yaml"), "sync"],
            stdout=open(tmp_path / "sync.log", "ab"), stderr=subprocess.STDOUT, env=slurm.env,
            start_new_session=True))
        sites[name] = (site, slurm)
    for name, (site, slurm) in sites.items():
        wait_until(lambda slurm=slurm: slurm.license() == {"Total": BASE + pool, "Used": 0, "Reserved": pool}, 60,
                   f"{name}'s Slurm showing the ceiling with the pool held back",
                   said=lambda: (tmp_path / "sync.log").read_text()[-3000:])
    seen = {"sum": 0, "each": {"site-a": 0, "site-b": 0}}

    def look() -> dict[str, int]:
        """Each cluster's usable total in Slurm; on every look the pool is not over-lent and each cluster's Slurm
        may hand out no more than its base and its own borrowing."""
        held = ledger_held(ledger)
        assert sum(held.values()) <= pool, f"the pool of {pool} over-lent: {held}"
        usable = {}
        for name, (_, slurm) in sites.items():
            lic = slurm.license()
            usable[name] = lic["Total"] - lic["Reserved"]
            assert usable[name] <= BASE + held.get(name, 0), f"{name} may hand out {usable[name]}: held {held}"
            seen["each"][name] = max(seen["each"][name], held.get(name, 0))
        seen["sum"] = max(seen["sum"], sum(held.values()))
        return usable

    jobs = {name: [slurm.submit("-c1", "-L", f"{site.license}:2", "--wrap", "sleep 6") for _ in range(3)]
            for name, (site, slurm) in sites.items()}
    wait_until(lambda: look() and seen["sum"] == pool, 60, "the pool lent out whole between the two clusters",
               said=lambda: (tmp_path / "sync.log").read_text()[-3000:])
    wait_until(lambda: look() is not None and all(all(slurm.jobs()[j][0] == "COMPLETED" for j in jobs[name])
                                                  for name, (_, slurm) in sites.items()), 150,
               "all six jobs run, on each cluster's own borrowing",
               said=lambda: a_slurm.log() + b_slurm.log())
    wait_until(lambda: look() == {"site-a": BASE, "site-b": BASE} and ledger_held(ledger) == {}, 60,
               "both clusters' tokens given back, each Slurm back at its base")
    assert all(n > 0 for n in seen["each"].values()), f"each cluster borrowed: {seen}"
    for name, (site, _) in sites.items():
        assert site.published() == (BASE, 0, BASE), name
        mine = {f.payload.license for f in site.c.read() if f.kind == "license_published"}
        assert mine == {site.license}, f"{name} published another cluster's license: {mine}"


@pytest.mark.timeout(180)
def test_what_a_real_slurm_says_when_it_refuses_is_one_line_naming_the_command(world, tmp_path):
    slurm = world["slurm"] = AccountedSlurm(tmp_path, count=BASE)
    live = LiveLicenses(env=slurm.env, timeout=30)
    live.send(Command("count", "vcs@flex", 12))
    assert live.licenses()["vcs@flex"].total == 12
    assert live.reservation("provisioner-vcs") is None
    live.send(Command("reserve", "vcs@flex", 10, "provisioner-vcs", slurm.user, exists=False))
    assert live.reservation("provisioner-vcs") == {"vcs@flex": 10} and live.licenses()["vcs@flex"].reserved == 10
    with pytest.raises(LicenseError) as unknown:
        live.send(Command("count", "nope@flex", 3))
    assert str(unknown.value) == "sacctmgr -i modify resource name=nope server=flex: exit 1: sacctmgr knows no " \
                                 "such resource (Nothing modified)"
    with pytest.raises(LicenseError) as refused:
        live.send(Command("reserve", "nope@flex", 1, "provisioner-vcs", slurm.user, exists=True))
    assert "scontrol update reservationname=provisioner-vcs licenses=nope@flex:1: exit 1: " in str(refused.value) \
        and "Invalid license specification" in str(refused.value)
    # slurmdbd down: sacctmgr cannot reach it; slurmctld still shows the licenses it knows.
    dbd = int((slurm.tmp / "slurmdbd.pid").read_text())
    os.kill(dbd, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{dbd}/cmdline").exists() or not Path(f"/proc/{dbd}/cmdline").read_bytes(),
               10, "slurmdbd gone")
    with pytest.raises(LicenseError) as down:
        live.send(Command("count", "vcs@flex", 8))
    assert str(down.value).startswith("sacctmgr -i modify resource name=vcs server=flex: exit 1: "), down.value
    print(down.value)
    assert live.licenses()["vcs@flex"].total == 12, "nothing changed"
    live.send(Command("reserve", "vcs@flex", 6, "provisioner-vcs", slurm.user, exists=True))
    assert live.licenses()["vcs@flex"].reserved == 6, "the reservation is slurmctld's: it follows without slurmdbd"
