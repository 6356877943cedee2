"""Elastic resources as Slurm licenses (issue 30): what the bridge reads of Slurm, what it decides to publish, that it
records the publication under the provider's lease before it sends it, and what it does when Slurm says no.

The fixtures are real Slurm 22.05 output: three jobs of ``-L vcs@flex:2`` with a base of 2 free, one running and
two pending on ``Licenses``; ``scontrol -o show licenses`` with 10 reserved; the reservation that holds them.
"""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from config.load import load_config
from config.located import ConfigError
from messages.description import Pool, ProviderDescription
from messages.facts import LicensePublished, ProviderDescribed, ResourceTotalChanged, make_fact
from persistence.controller import open_controller
from slurm.formats import jobs as read_jobs
from slurm.licenses import (
    Command,
    LicenseBridge,
    LicenseError,
    Seen,
    asked,
    commands,
    decide,
    parse_licenses,
    parse_reservation,
    waiting,
)
from slurm.sync import Sync
from state.projection import Projection
from tests.support.policy import T0

FIXTURES = Path(__file__).parent / "fixtures"
CONFIG = """
instance: {id: a, serves: [lic], planner: true}
controller: {url: "sqlite:///%s"}
providers:
  - {name: lic, kind: units, script: {style: v2, path: /bin/true}}
  - {name: lic2, kind: units, script: {style: v2, path: /bin/true}}
resources:
  - {name: vcs, elastic: true, base: 2, provider: lic}
  - {name: xl, elastic: true, base: 1, provider: lic2}
slurm:
  licenses:
    - {resource: vcs, license: vcs@flex}
"""


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- reading Slurm ------------------------------------------------------------------------------------------------


def test_scontrol_show_licenses_and_a_reservation_read_as_slurm_prints_them():
    seen = parse_licenses(text("scontrol-show-lic-22.05.txt"))
    assert seen == {"vcs@flex": Seen("vcs@flex", total=12, used=2, reserved=10)}
    assert parse_reservation(text("scontrol-show-reservation-22.05.txt"), "scontrol show res") == {"vcs@flex": 10}
    with pytest.raises(LicenseError, match=r"scontrol -o show licenses: line 1 is not a license's"):
        parse_licenses("slurm_load_license error: Unable to contact slurm controller\n")


def test_pending_jobs_waiting_on_licenses_are_the_units_asked_and_finished_or_running_jobs_are_not():
    jobs = read_jobs(text("squeue-22.05-licenses.json"))
    assert sorted((j.state, j.reason) for j in jobs) == [("PENDING", "Licenses"), ("PENDING", "Licenses"),
                                                         ("RUNNING", "None")]
    assert waiting(jobs, "vcs@flex") == 4
    assert waiting(jobs, "other@flex") == 0
    assert asked("vcs@flex:2,xl@lm,vcs@flex:1") == {"vcs@flex": 3, "xl@lm": 1}
    with pytest.raises(LicenseError, match="job 7: 'vcs@flex:two' is not NAME"):
        asked("vcs@flex:two", "job 7")


# --- deciding -------------------------------------------------------------------------------------------------------


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "provisioner.yaml"
    path.write_text(textwrap.dedent(CONFIG % (tmp_path / "state.db")))
    return load_config(path, check_files=False)


def facts(borrowed: int, pool: int = 10, in_use: int | None = None) -> Projection:
    p = Projection()
    desc = ProviderDescription(name="lic", kind="units", pools=[Pool(resource="vcs", capacity=pool)])
    p.apply_all([make_fact(ProviderDescribed(description=desc), provider="lic", seq=1, now=T0),
                 make_fact(ResourceTotalChanged(resource="vcs", base=2, borrowed=borrowed, total=2 + borrowed),
                           provider="lic", seq=2, now=T0)])
    if in_use is not None:
        p.resource("vcs").observe(T0, in_use)
    return p


def test_the_ceiling_is_published_and_the_units_not_borrowed_are_held_back(cfg):
    (lic,) = cfg.slurm.licenses
    # Base 2, nothing borrowed, one job holds 2 and two wait for 2 each: 4 units wanted.
    want = decide(lic, cfg, facts(borrowed=0), Seen("vcs@flex", 2, 2, 0), pending=4)
    assert (want.count, want.reserved, want.in_use, want.demand) == (12, 10, 2, 4)
    # 4 borrowed: the reservation shrinks to 6, jobs may use 6, and nothing is wanted any more.
    want = decide(lic, cfg, facts(borrowed=4), Seen("vcs@flex", 12, 2, 10), pending=4)
    assert (want.count, want.reserved, want.demand) == (12, 6, 0)
    # The license server sees more in use than Slurm (a token checked out outside any job): Slurm's count is what
    # is recorded, and the higher of the two is what reclaim keeps.
    p = facts(borrowed=4, in_use=5)
    want = decide(lic, cfg, p, Seen("vcs@flex", 12, 2, 6), pending=0)
    assert want.in_use == 2
    p.apply_all([make_fact(want.fact(), provider="lic", seq=3, now=T0)])
    assert p.resources["vcs"].peak_use(T0) == 5
    p.apply_all([make_fact(LicensePublished(resource="vcs", license="vcs@flex", count=12, reserved=6, in_use=6),
                           provider="lic", seq=4, now=T0)])
    assert p.resources["vcs"].peak_use(T0) == 6
    # Before the provider has described its pool, the ceiling is what is held.
    p = Projection()
    want = decide(lic, cfg, p, None, pending=3)
    assert (want.count, want.reserved, want.demand) == (2, 0, 1), "3 asked, 2 free"


def test_a_rising_total_goes_before_the_reservation_and_a_falling_one_after_it(cfg):
    (lic,) = cfg.slurm.licenses
    up = LicensePublished(resource="vcs", license="vcs@flex", count=12, reserved=10)
    assert commands(lic, up, Seen("vcs@flex", 2, 0, 0), None) == [
        Command("count", "vcs@flex", 12),
        Command("reserve", "vcs@flex", 10, "provisioner-vcs", "root", exists=False)]
    down = LicensePublished(resource="vcs", license="vcs@flex", count=8, reserved=2)
    # Falling: the reservation shrinks first, then the total, then the reservation is sent again (slurmctld
    # forgets what a reservation holds when the total changes).
    assert commands(lic, down, Seen("vcs@flex", 12, 0, 10), {"vcs@flex": 10}) == [
        Command("reserve", "vcs@flex", 2, "provisioner-vcs", "root", exists=True), Command("count", "vcs@flex", 8),
        Command("reserve", "vcs@flex", 2, "provisioner-vcs", "root", exists=True)]
    # A new total with the same reservation: sent again after it.
    assert [c.what for c in commands(lic, up, Seen("vcs@flex", 11, 0, 10), {"vcs@flex": 10})] == ["count",
                                                                                                 "reserve"]
    assert commands(lic, up, Seen("vcs@flex", 12, 0, 10), {"vcs@flex": 10}) == [], "Slurm shows it: nothing sent"
    none = LicensePublished(resource="vcs", license="vcs@flex", count=2, reserved=0)
    assert commands(lic, none, Seen("vcs@flex", 2, 0, 0), None) == [], "no reservation is made to hold nothing"


# --- recording, then sending -----------------------------------------------------------------------------------------


@dataclass
class FakeLicenses:
    """Slurm's license commands as a test says they answer: Slurm shows what was sent; ``refuse`` fails them."""
    controller: object
    shown: dict = field(default_factory=lambda: {"vcs@flex": Seen("vcs@flex", 2, 0, 0)})
    reserved: dict | None = None
    refuse: str = ""
    unreadable: bool = False
    sent: list = field(default_factory=list)
    recorded_when_sent: list = field(default_factory=list)

    def licenses(self):
        if self.unreadable:
            raise LicenseError("scontrol -o show licenses: exit 1: Unable to contact slurm controller")
        return self.shown

    def reservation(self, name):
        return self.reserved

    def send(self, cmd: Command):
        # What the facts say was published, at the moment the command goes out.
        said = [f.payload for f in self.controller.read() if f.kind == "license_published"]
        self.recorded_when_sent.append(said[-1] if said else None)
        if self.refuse:
            raise LicenseError(self.refuse)
        self.sent.append(cmd)
        seen = self.shown[cmd.license]
        if cmd.what == "count":
            self.shown[cmd.license] = Seen(seen.name, cmd.value, seen.used, seen.reserved)
        else:
            self.reserved = {cmd.license: cmd.value}

    # the sync's other commands: no nodes, no jobs
    def nodes(self):
        return []

    def jobs(self):
        return []

    def scontrol(self, args):
        pass


@pytest.fixture
def world(cfg):
    controller = open_controller(cfg.controller.url)
    desc = ProviderDescription(name="lic", kind="units", pools=[Pool(resource="vcs", capacity=10)])
    controller.append([make_fact(ProviderDescribed(description=desc), provider="lic", now=T0)])
    yield cfg, controller
    controller.close()


def bridge(cfg, controller, port) -> tuple[LicenseBridge, Projection]:
    b = LicenseBridge(cfg, controller, port)
    p = Projection()
    facts = controller.read()
    p.apply_all(facts)
    b.saw(facts)
    return b, p


def borrowed(controller, lease, n: int) -> None:
    """The owner of ``lic`` records a total of 2 + n, under its lease."""
    controller.append([make_fact(ResourceTotalChanged(resource="vcs", base=2, borrowed=n, total=2 + n),
                                 provider="lic", lease=lease.name, fence=lease.fence, now=T0)])


def test_the_publication_is_recorded_under_the_owners_lease_before_it_is_sent_and_followed_by_slurm(world):
    cfg, controller = world
    lease = controller.leases.acquire("provider:lic", "a", 60)
    port = FakeLicenses(controller)
    b, p = bridge(cfg, controller, port)
    b.round(p, [], T0)
    (fact,) = [f for f in controller.read() if f.kind == "license_published"]
    assert (fact.lease, fact.fence, fact.provider) == ("provider:lic", lease.fence, "lic")
    assert (fact.payload.count, fact.payload.reserved) == (12, 10)
    assert [c.what for c in port.sent] == ["count", "reserve"]
    assert port.recorded_when_sent == [fact.payload] * 2, "a command went out before its fact was accepted"
    # The owner borrows 4: the reservation shrinks to 6, the total stays.
    borrowed(controller, lease, 4)
    b, p = bridge(cfg, controller, port)
    b.round(p, [], T0 + 1)
    assert port.sent[-1] == Command("reserve", "vcs@flex", 6, "provisioner-vcs", "root", exists=True)
    assert port.shown["vcs@flex"].total == 12 and port.reserved == {"vcs@flex": 6}
    seq = controller.last_seq()
    b.round(p, [], T0 + 2)
    assert len(port.sent) == 3, "what Slurm shows already: nothing more is sent"
    # ... and it is recorded as shown, once: a return the reservation holds back may be called now.
    (shown,) = [f for f in controller.read() if f.seq > seq]
    assert (shown.kind, shown.lease, shown.fence) == ("license_shown", "provider:lic", lease.fence)
    assert (shown.payload.count, shown.payload.reserved) == (12, 6)
    p.apply_all([shown])
    assert p.resources["vcs"].shown_free == 6
    b.round(p, [], T0 + 3)
    assert controller.last_seq() == shown.seq and len(port.sent) == 3, "shown already: nothing more"


def test_with_no_current_owner_nothing_new_is_published_and_the_last_record_is_sent_again_after_a_restart(world,
                                                                                                         caplog):
    cfg, controller = world
    lease = controller.leases.acquire("provider:lic", "a", 60)
    port = FakeLicenses(controller, refuse="sacctmgr -i modify resource name=vcs server=flex: exit 1: Unable to "
                                           "connect to database")
    b, p = bridge(cfg, controller, port)
    caplog.set_level(logging.ERROR, logger="provisioner-slurm")
    out = b.round(p, [], T0)
    assert out is not None and port.sent == []
    assert "license vcs@flex (resource vcs): sacctmgr -i modify resource name=vcs server=flex: exit 1: Unable to " \
           "connect to database; sent again next round" in caplog.text
    # The owner goes; its lease is released. A restarted bridge sends what was recorded, records nothing new.
    borrowed(controller, lease, 4)
    controller.leases.release(lease)
    port.refuse = ""
    b, p = bridge(cfg, controller, port)
    seq = controller.last_seq()
    caplog.clear()
    b.round(p, [], T0 + 1)
    assert controller.last_seq() == seq, "a publication recorded with no owner of provider lic"
    assert "provider lic has no owner now (lease provider:lic is not held): nothing new is published" in caplog.text
    assert port.shown["vcs@flex"].total == 12 and port.reserved == {"vcs@flex": 10}, "the recorded one, sent again"
    # A new owner (a new fence): the 4 borrowed are published under it.
    new = controller.leases.acquire("provider:lic", "b", 60)
    b.round(p, [], T0 + 2)
    last = [f for f in controller.read() if f.kind == "license_published"][-1]
    assert (last.fence, last.payload.reserved) == (new.fence, 6) and port.reserved == {"vcs@flex": 6}


def test_a_publication_under_a_fence_that_has_moved_on_is_refused_and_nothing_is_sent(world, caplog):
    cfg, controller = world
    old = controller.leases.acquire("provider:lic", "a", 60)
    port = FakeLicenses(controller)
    b, p = bridge(cfg, controller, port)
    b.round(p, [], T0)

    class Stale:  # the lease as read a moment ago, before another daemon took it over
        def __init__(self, leases):
            self.leases = leases

        def get(self, name):
            return old

        def __getattr__(self, name):
            return getattr(self.leases, name)

    controller.leases.release(old)
    controller.leases.acquire("provider:lic", "b", 60)
    real = controller.leases
    controller.leases = Stale(real)
    try:
        borrowed_fact = make_fact(ResourceTotalChanged(resource="vcs", base=2, borrowed=4, total=6), provider="lic",
                                  now=T0)
        controller.append([borrowed_fact])
        b, p = bridge(cfg, controller, port)
        caplog.set_level(logging.ERROR, logger="provisioner-slurm")
        sent = len(port.sent)
        b.round(p, [], T0 + 1)
    finally:
        controller.leases = real
    assert "the publication was refused" in caplog.text and f"fact has {old.fence}" in caplog.text
    assert len(port.sent) == sent, "something was sent that no fact under a current fence says"


def test_a_license_slurm_does_not_know_and_an_unreadable_slurm_name_it_and_the_round_goes_on(world, caplog):
    cfg, controller = world
    controller.leases.acquire("provider:lic", "a", 60)
    port = FakeLicenses(controller, shown={})
    b, p = bridge(cfg, controller, port)
    caplog.set_level(logging.ERROR, logger="provisioner-slurm")
    # Jobs still wait on it (submitted before it was taken out of slurmdbd): nothing is borrowed for it.
    out = b.round(p, read_jobs(text("squeue-22.05-licenses.json")), T0)
    assert out is not None and [i.count for i in out.items] == [0]
    assert "license vcs@flex (resource vcs): Slurm does not know it; make it with sacctmgr add resource name=vcs " \
           "server=flex type=license count=12 percentallowed=100" in caplog.text
    assert port.sent == []
    port.unreadable = True
    assert b.round(p, [], T0 + 1) is None
    assert "Slurm's licenses could not be read, nothing published: scontrol -o show licenses: exit 1" in caplog.text


def test_the_sync_puts_the_units_demand_and_slurms_use_and_keeps_the_demand_when_slurm_cannot_be_read(world):
    cfg, controller = world
    lease = controller.leases.acquire("provider:lic", "a", 60)
    port = FakeLicenses(controller)
    jobs = read_jobs(text("squeue-22.05-licenses.json"))
    port.jobs = lambda: jobs
    port.shown = {"vcs@flex": Seen("vcs@flex", 12, 2, 10)}
    port.reserved = {"vcs@flex": 10}
    sync = Sync(cfg, controller, port, clock=lambda: T0)
    sync.round()
    (item,) = controller.get_demand().items
    assert (item.kind, item.resource, item.count) == ("units", "vcs", 4)
    assert controller.get_supply().resources == {"vcs": 2}
    assert controller.read()[-1].payload.in_use == 2
    borrowed(controller, lease, 4)
    port.unreadable = True
    sync.round()
    assert controller.get_demand().items[0].count == 4, "a round that could not read Slurm changed the demand"
    port.unreadable = False
    sync.round()
    assert controller.get_demand().items[0].count == 0 and port.reserved == {"vcs@flex": 6}


def test_the_config_names_a_license_mapped_to_a_resource_that_is_not_elastic(tmp_path):
    path = tmp_path / "provisioner.yaml"
    path.write_text(textwrap.dedent(CONFIG % (tmp_path / "state.db")) + "    - {resource: gpu, license: g@x}\n"
                    "    - {resource: xl, license: vcs@flex}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path, check_files=False)
    said = str(exc.value)
    assert "slurm.licenses[1].resource" in said and "no elastic resource named 'gpu'" in said
    assert "slurm.licenses[2].license" in said and "vcs@flex is mapped twice" in said
