"""``provisioner-flexlm`` run as the daemon runs it: ``<action> -f input.json``, a minimal environment, a fake lmutil.

Every answer is also read through the daemon's own v2 contract parser: an
answer the daemon could not read would be a failed call however right its
numbers are.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from providers.contract import parse_output

#: The real executable, run as the daemon runs it, for each case.
pytestmark = pytest.mark.slow

GRANT = {"token": "req-1", "resource": "vcs", "count": 5, "tags": {"provisioner": "site-a"}}


def parsed(action: str, out: dict[str, Any]) -> Any:
    return parse_output("v2", "units", action, out, provider="vcs-pool")


def granted(site, *request_ids: str) -> list[int | None]:
    result = site.run("status", {"requests": [{"requestId": r} for r in request_ids]})
    assert result.code == 0, result.err
    return [r.granted for r in parsed("status", result.out).requests]


def held(site) -> dict[str, int]:
    result = site.run("list", {"tags": {}})
    assert result.code == 0, result.err
    return {g.token: g.count for g in parsed("list", result.out).grants}


def test_describe_and_usage(make_site, tmp_path):
    site = make_site(pool=40, step=2)
    described = parsed("describe", site.run("describe").out)
    assert [(p.resource, p.capacity) for p in described.pools] == [("vcs", 40)]
    assert (described.step, described.min_request, described.min_hold_s) == (2, 2, 900.0)

    usage = parsed("usage", site.run("usage", {"resource": "vcs"}).out)
    # cn001 holds 4, CN002.hpc.example 2; the desktop, the laptop, the reservations and gpu-3 are not cn*.
    assert (usage.resource, usage.in_use, usage.total) == ("vcs", 6, 40)
    assert (tmp_path / "lmutil.log").read_text().splitlines() == ["lmstat -a -c 27000@lic1"]


def test_borrow_status_list_and_a_partial_then_whole_return(make_site):
    site = make_site()
    first = site.run("request", GRANT)
    assert first.code == 0, first.err
    assert parsed("request", first.out).provider_request_id == "g-req-1"
    assert site.run("request", GRANT).out["requestId"] == "g-req-1"
    assert held(site) == {"req-1": 5}, "a repeated token borrows nothing more"
    assert granted(site, "g-req-1") == [5]

    part = {"token": "ret-1", "resource": "vcs", "count": 2, "grants": [{"token": "req-1", "count": 2}]}
    assert parsed("return", site.run("return", part).out).provider_request_id == "r-ret-1"
    assert site.run("return", part).code == 0
    assert held(site) == {"req-1": 3}, "a repeated partial return gives back nothing more"
    asked = {"requests": [{"requestId": "g-req-1"}, {"requestId": "r-ret-1"}]}
    status = parsed("status", site.run("status", asked).out)
    assert [(r.status, r.granted) for r in status.requests] == [("complete", 3), ("complete", None)]

    assert site.run("return", {"token": "ret-2", "resource": "vcs", "count": 3, "grants": ["req-1"]}).code == 0
    assert held(site) == {}
    assert granted(site, "g-req-1", "g-nothing") == [0, None]


def test_list_keeps_to_the_tags_asked(make_site):
    site = make_site()
    site.run("request", GRANT)
    site.run("request", {**GRANT, "token": "req-2", "tags": {"provisioner": "other"}})
    result = site.run("list", {"tags": {"provisioner": "site-a"}})
    assert [(g.token, g.request_id, g.resource, g.count) for g in parsed("list", result.out).grants] == [
        ("req-1", "g-req-1", "vcs", 5)]


def test_never_above_the_pool(make_site):
    site = make_site(pool=10)
    assert site.run("request", {**GRANT, "count": 8}).code == 0
    partial = site.run("request", {**GRANT, "token": "req-2", "count": 5})
    assert partial.code == 0
    (state,) = parsed("status", site.run("status", {"requests": [{"requestId": "g-req-2"}]}).out).requests
    assert (state.status, state.granted) == ("complete_with_error", 2)
    full = site.run("request", {**GRANT, "token": "req-3", "count": 1})
    assert full.code == 69
    assert "pool VCSRuntime_Net has no room for 1 (step 1): 10 of 10 lent" in full.err
    assert held(site) == {"req-1": 8, "req-2": 2}


def test_never_above_what_the_server_can_issue_beside_use_outside_the_clusters(make_site):
    # 50 issued; 7 of the 13 in use are outside cn* (a desktop, a borrowed laptop, gpu-3, 3 reserved).
    site = make_site(pool=100)
    assert site.run("request", {**GRANT, "count": 60}).code == 0
    assert held(site) == {"req-1": 43}
    assert site.run("request", {**GRANT, "token": "req-2", "count": 1}).code == 69
    # A second cluster whose hosts are gpu-*: gpu-3's 2 tokens are no longer outside, so 2 more fit.
    other = make_site(cluster="site-b", hosts=("gpu-*",), pool=100)
    assert other.run("request", {**GRANT, "count": 10}).code == 0
    assert held(other) == {"req-1": 2}


def test_a_license_server_that_is_down_is_75_but_the_ledger_still_answers(make_site, lmstat_output):
    site = make_site()
    site.run("request", GRANT)
    lmstat_output("server_down.txt")
    for action, doc in (("usage", {"resource": "vcs"}), ("request", {**GRANT, "token": "req-2"})):
        result = site.run(action, doc)
        assert result.code == 75, result.err
        assert "license server 27000@lic1 cannot be reached: Cannot connect to license server system" in result.err
    assert site.run("request", GRANT).out["requestId"] == "g-req-1", "a repeated token needs no license server"
    assert site.run("return", {"token": "ret-1", "resource": "vcs", "count": 5}).code == 0
    assert held(site) == {}


def test_a_triad_with_one_member_down_lends_and_without_quorum_does_not(make_site, lmstat_output, tmp_path):
    site = make_site(server=["27000@lic1", "27000@lic2", "27000@lic3"])
    lmstat_output("triad_one_down.txt")
    assert site.run("request", GRANT).code == 0
    assert (tmp_path / "lmutil.log").read_text().splitlines() == ["lmstat -a -c 27000@lic1,27000@lic2,27000@lic3"]
    lmstat_output("triad_two_down.txt")
    assert site.run("request", {**GRANT, "token": "req-2"}).code == 75


def test_an_lmstat_that_hangs_is_75_within_the_daemons_deadline(make_site, tmp_path):
    """A wrapper script whose child keeps the pipes open must not hold the call past its budget."""
    hanging = tmp_path / "lmutil-wrapper"
    hanging.write_text("#!/bin/sh\nsleep 30\n")
    hanging.chmod(0o755)
    site = make_site(lmutil=str(hanging))
    started = time.monotonic()
    result = site.run("usage", {"resource": "vcs"}, PROVISIONER_DEADLINE=str(time.time() + 3))
    assert result.code == 75 and "lmstat on 27000@lic1 gave no answer within 1s" in result.err
    assert time.monotonic() - started < 5


def test_an_unknown_feature_or_resource_is_78(make_site):
    site = make_site()
    site.write_settings(features=[{"feature": "VCSRuntime_Nett", "resource": "vcs", "pool": 40}])
    result = site.run("request", GRANT)
    assert (result.code, result.err.strip()) == (
        78, "provisioner-flexlm: feature VCSRuntime_Nett is not served by license server 27000@lic1")
    result = site.run("usage", {"resource": "matlab"})
    assert result.code == 78 and "no feature is lent as resource 'matlab'" in result.err


def test_settings_errors_and_a_missing_lmutil_are_78_naming_the_key(make_site, tmp_path):
    site = make_site()
    site.write_settings(features=[{"feature": "VCSRuntime_Net", "resource": "vcs", "pool": "forty"}])
    result = site.run("describe")
    assert result.code == 78 and "features[0].pool: Input should be a valid integer" in result.err
    site.write_settings(features=[{"feature": "VCSRuntime_Net", "resource": "vcs", "pool": 40}],
                        lmutil=str(tmp_path / "no-lmutil"))
    result = site.run("usage", {"resource": "vcs"})
    assert result.code == 78 and "lmutil: not found" in result.err


def test_bad_input_is_65_and_a_bad_command_line_64(make_site):
    site = make_site()
    result = site.run("request", {"token": "req-1", "resource": "vcs"})
    assert result.code == 65 and "request input: count: Field required" in result.err
    assert site.run("request", {**GRANT, "count": 4}).code == 0
    conflict = site.run("request", {**GRANT, "count": 6})
    assert conflict.code == 65 and "token req-1 was used for a request of 4 vcs, not 6 vcs" in conflict.err
    assert site.run("lend", {}).code == 64
