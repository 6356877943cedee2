"""What lmstat's answer means for a pool: whose hosts hold what, and which failures are 75 or 78."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.flexlm import counting, lmstat
from providers.flexlm.errors import ConfigError, Transient
from providers.flexlm.settings import Feature

DATA = Path(__file__).parent / "data"


def status(name: str) -> lmstat.Lmstat:
    return lmstat.parse((DATA / name).read_text())


def feature(name: str = "VCSRuntime_Net", vendor: str | None = None) -> Feature:
    return Feature(feature=name, resource="vcs", pool=40, vendor=vendor)


def test_hosts_match_by_glob_without_case_by_full_or_short_name():
    assert counting.host_matches("CN002.hpc.example", ("cn00[1-8]",))
    assert counting.host_matches("gpu-12.hpc.example", ("gpu-*.hpc.example",))
    assert not counting.host_matches("ws12", ("cn*", "gpu-*"))


def test_a_clusters_use_is_its_hosts_checkouts():
    vcs = counting.feature_usage(status("two_vendors.txt"), feature())
    # alice 4 on cn001, dave 2 on CN002.hpc.example; carol on cn007 is only queued.
    assert counting.held_by(vcs, ("cn*",)) == 6
    assert counting.held_by(vcs, ("gpu-*",)) == 2


def test_use_outside_the_borrowing_clusters_is_all_the_rest():
    vcs = counting.feature_usage(status("two_vendors.txt"), feature())
    # 13 in use: the desktop, the borrowed laptop and 3 reserved tokens are outside both clusters.
    assert counting.held_outside(vcs, [("cn*",), ("gpu-*",)]) == 5
    assert counting.held_outside(vcs, [("cn*",)]) == 7


def test_what_lmstat_counts_but_does_not_list_is_outside():
    text = ("License server status: 27000@lic1\n  lic1: license server UP (MASTER) v11\n"
            "Users of f:  (Total of 10 licenses issued;  Total of 6 licenses in use)\n"
            "    u cn1 cn1 (v1) (lic1/27000 7), start Tue 3/4 1:02, 2 licenses\n")
    (f,) = lmstat.parse(text).features
    assert counting.held_outside(f, [("cn*",)]) == 4


def test_a_server_that_cannot_be_reached_is_transient():
    with pytest.raises(Transient, match="cannot be reached: Cannot connect to license server system") as caught:
        counting.feature_usage(status("server_down.txt"), feature())
    assert caught.value.exit_code == 75
    with pytest.raises(Transient, match="lic2: Cannot read data"):
        counting.feature_usage(status("triad_two_down.txt"), feature())


def test_a_triad_with_one_member_down_serves():
    assert counting.feature_usage(status("triad_one_down.txt"), feature()).in_use == 5


def test_a_vendor_daemon_that_is_down_is_transient_not_a_missing_feature():
    with pytest.raises(Transient, match="vendor daemon snpslmd is down"):
        counting.feature_usage(status("vendor_down.txt"), feature())


def test_a_feature_the_server_does_not_serve_is_a_configuration_error():
    with pytest.raises(ConfigError, match="feature VCSRuntime_Nett is not served by license server 27000@lic1") as c:
        counting.feature_usage(status("two_vendors.txt"), feature("VCSRuntime_Nett"))
    assert c.value.exit_code == 78
    with pytest.raises(ConfigError, match=r"\(vendor daemon cdslmd\) is not served"):
        counting.feature_usage(status("two_vendors.txt"), feature(vendor="cdslmd"))


def test_uncounted_is_a_configuration_error_and_a_failing_feature_transient():
    with pytest.raises(ConfigError, match="VCS_Compiler_Net is uncounted"):
        counting.feature_usage(status("two_vendors.txt"), feature("VCS_Compiler_Net"))
    with pytest.raises(Transient, match="cannot say how feature Genus_Synthesis is used: Error getting status"):
        counting.feature_usage(status("two_vendors.txt"), feature("Genus_Synthesis"))


def test_a_feature_of_two_vendor_daemons_needs_its_vendor_named():
    text = ("License server status: 27000@licsrv\n    licsrv: license server UP (MASTER) v11.16.2\n"
            "Vendor daemon status (on licsrv):\n       MLM: UP v11.16.2\nFeature usage info:\n"
            "Users of solver:  (Total of 4 licenses issued;  Total of 1 license in use)\n"
            "Vendor daemon status (on licsrv):\n       cdslmd: UP v11.16.2\nFeature usage info:\n"
            "Users of solver:  (Total of 8 licenses issued;  Total of 2 licenses in use)\n")
    with pytest.raises(ConfigError, match="served by vendor daemons MLM, cdslmd: say which one"):
        counting.feature_usage(lmstat.parse(text), feature("solver"))
    assert counting.feature_usage(lmstat.parse(text), feature("solver", "cdslmd")).issued == 8
