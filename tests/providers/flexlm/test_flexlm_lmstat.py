"""The lmstat parser on recorded-style output: features of two vendor daemons, every kind of user line, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.flexlm import lmstat
from providers.flexlm.lmstat import Checkout, Reservation

DATA = Path(__file__).parent / "data"


def parsed(name: str) -> lmstat.Lmstat:
    return lmstat.parse((DATA / name).read_text())


@pytest.fixture(scope="module")
def two_vendors() -> lmstat.Lmstat:
    return parsed("two_vendors.txt")


def only(status: lmstat.Lmstat, name: str) -> lmstat.Feature:
    (feature,) = status.find(name)
    return feature


def test_every_feature_with_its_vendor_daemon_and_totals(two_vendors):
    assert two_vendors.reachable and two_vendors.error is None
    assert [(s.host, s.up, s.master) for s in two_vendors.servers] == [("lic1", True, True)]
    assert [(v.name, v.up) for v in two_vendors.vendors] == [("snpslmd", True), ("cdslmd", True)]
    assert [(f.name, f.vendor, f.state, f.issued, f.in_use) for f in two_vendors.features] == [
        ("VCSRuntime_Net", "snpslmd", "counted", 50, 13),
        ("VCS_Compiler_Net", "snpslmd", "uncounted", 0, 0),
        ("Formality", "snpslmd", "error", 0, 0),
        ("Xcelium_Single_Core", "cdslmd", "counted", 20, 4),
        ("Genus_Synthesis", "cdslmd", "error", 0, 0),
    ]


def test_a_user_line_gives_user_host_display_version_server_handle_start_and_count(two_vendors):
    alice = only(two_vendors, "VCSRuntime_Net").checkouts[0]
    assert alice == Checkout(user="alice", host="cn001", display="cn001", version="v2024.03", server="lic1",
                             port=27000, handle=1201, start="Mon 3/3 9:15", count=4)


def test_a_user_name_with_spaces_leaves_host_and_display_in_place(two_vendors):
    smith, ci = only(two_vendors, "Xcelium_Single_Core").checkouts
    assert (smith.user, smith.host, smith.display, smith.count) == ("John Smith", "ws-js", "WS-JS", 3)
    assert (ci.host, ci.count) == ("gpu-12.hpc.example", 1)


def test_lingering_and_borrowed_licenses_are_held_checkouts(two_vendors):
    by_user = {c.user: c for c in only(two_vendors, "VCSRuntime_Net").checkouts}
    assert (by_user["bob"].display, by_user["bob"].linger, by_user["bob"].count) == (":0.0", (3600,), 1)
    # A license borrowed to a laptop lingers for the borrow period; lmstat prints two figures then.
    assert (by_user["erin"].host, by_user["erin"].linger, by_user["erin"].start) == (
        "laptop-erin", (604800, 432000), "Fri 2/28 17:30")
    assert (by_user["frank"].count, by_user["frank"].linger, by_user["frank"].version) == (2, (300,), "v2023.12")
    assert by_user["alice"].linger == ()


def test_reservations_are_kept_apart_from_checkouts(two_vendors):
    vcs = only(two_vendors, "VCSRuntime_Net")
    assert vcs.reservations == (Reservation(1, "GROUP", "verif_leads", "lic1", 27000),
                                Reservation(2, "HOST", "ws40", "lic1", 27000))
    assert "ws40" not in {c.host for c in vcs.checkouts}
    # Everything lmstat counts in use is a checkout or a reservation, and nothing else.
    assert sum(c.count for c in vcs.checkouts) + sum(r.count for r in vcs.reservations) == vcs.in_use


def test_a_queued_request_is_no_checkout(two_vendors):
    vcs = only(two_vendors, "VCSRuntime_Net")
    assert [(q.user, q.host, q.count) for q in vcs.queued] == [("carol", "cn007", 2)]
    assert "carol" not in {c.user for c in vcs.checkouts}


def test_uncounted_and_failing_features_keep_what_lmstat_said(two_vendors):
    assert only(two_vendors, "VCS_Compiler_Net").message == "Uncounted, node-locked"
    assert only(two_vendors, "Formality").message == "Error: 2 licenses, unsupported by licensed server"
    assert only(two_vendors, "Genus_Synthesis").message.startswith("Error getting status: Cannot find license file")
    assert only(two_vendors, "Genus_Synthesis").checkouts == ()


def test_a_server_that_cannot_be_reached():
    down = parsed("server_down.txt")
    assert not down.reachable
    assert down.error == 'Cannot connect to license server system. (-15,570:111 "Connection refused")'
    assert down.features == () and down.servers == ()


def test_a_triad_with_one_member_down_still_answers():
    triad = parsed("triad_one_down.txt")
    assert triad.spec == "27000@lic1,27000@lic2,27000@lic3"
    assert [(s.host, s.up) for s in triad.servers] == [("lic1", True), ("lic2", True), ("lic3", False)]
    assert triad.servers[2].message == "Cannot read data from license server system. (-16,287)"
    assert triad.reachable
    assert only(triad, "VCSRuntime_Net").in_use == 5


def test_a_triad_without_its_quorum_does_not():
    triad = parsed("triad_two_down.txt")
    assert [s.up for s in triad.servers] == [True, False, False]
    assert not triad.reachable


def test_a_vendor_daemon_that_is_down():
    status = parsed("vendor_down.txt")
    assert status.reachable
    assert status.vendor("snpslmd") == lmstat.Vendor("snpslmd", False, "The desired vendor daemon is down. (-97,121)")
    assert status.features == ()


def test_the_same_feature_name_under_two_vendor_daemons_stays_two_features():
    text = ("License server status: 27000@licsrv\n    licsrv: license server UP (MASTER) v11.16.2\n"
            "Vendor daemon status (on licsrv):\n       MLM: UP v11.16.2\nFeature usage info:\n"
            "Users of solver:  (Total of 4 licenses issued;  Total of 1 license in use)\n"
            "Vendor daemon status (on licsrv):\n       cdslmd: UP v11.16.2\nFeature usage info:\n"
            "Users of solver:  (Total of 8 licenses issued;  Total of 2 licenses in use)\n")
    status = lmstat.parse(text)
    assert [(f.vendor, f.issued, f.in_use) for f in status.find("solver")] == [("MLM", 4, 1), ("cdslmd", 8, 2)]
    assert [f.issued for f in status.find("solver", "cdslmd")] == [8]


def test_lines_it_does_not_know_are_skipped():
    text = ("License server status: 27000@lic1\n  lic1: license server UP (MASTER) v11.19.5\n"
            "Vendor daemon status (on lic1):\n  snpslmd: UP v11.19.5\nFeature usage info:\n"
            "Users of f:  (Total of 3 licenses issued;  Total of 1 license in use)\n"
            "  something a newer lmstat prints\n"
            "    u h d (v1.0) (lic1/27000 7), start Tue 3/4 1:02\n")
    (f,) = lmstat.parse(text).features
    assert [(c.user, c.host, c.display, c.start) for c in f.checkouts] == [("u", "h", "d", "Tue 3/4 1:02")]
