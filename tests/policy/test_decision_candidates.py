"""Decisions explain: every candidate in rank order, what it took or why not, in words (issue 20, item 2)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from messages.demand import BundleItem, DemandSnapshot, HostItem, UnitItem
from messages.description import Template
from messages.records import ProviderRecord
from policy.explain import unservable
from policy.planning import PlanSettings, plan
from state.projection import Projection
from tests.support.policy import T0, demand, failed_request, hosts, units, view

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def said(decision) -> list[tuple[str, str | None, int, str]]:
    return [(c.provider, c.template or c.resource, c.count, c.why) for c in decision.candidates]


def test_every_candidate_in_rank_order_with_what_it_took_or_why_not():
    p = Projection()
    failed_request(p, "cool", "cool-t", "r1", at=T0 - 10)
    paused = hosts("paused", priority=8)
    paused.status = "paused"
    provs = {"cool": hosts("cool", priority=9), "paused": paused, "full": hosts("full", priority=7, max_number=0),
             "aws-east": hosts("aws-east", priority=6), "dear": hosts("dear", priority=1, price=9.0),
             "small": hosts("small", ncpus=4), "gpu-less": hosts("gpu-less", priority=3)}
    out = plan(demand(HostItem(id="batch", count=3, select={"ncpus": ">=8"})), provs, view(p), T0, SETTINGS)
    cands = said(out.decisions[0])
    until = datetime.fromtimestamp(T0 - 10 + 60, tz=UTC).strftime("%H:%M:%S")
    assert cands == [
        ("cool", "cool-t", 0, f"cooling down until {until} UTC after capacity error on cool-t"),
        ("paused", "paused-t", 0, "paused"),
        ("full", "full-t", 0, "capacity: room for 0"),
        ("aws-east", "aws-east-t", 3, ""),
        ("gpu-less", "gpu-less-t", 0, "not needed: covered by aws-east"),
        ("dear", "dear-t", 0, "not needed: covered by aws-east"),
        ("small", None, 0, "ncpus 4 < 8"),
    ]
    assert out.decisions[0].note == ""


def test_a_selector_no_template_can_satisfy_says_what_is_missing():
    provs = {"sim-hosts": hosts("sim-hosts")}
    out = plan(demand(HostItem(id="g", count=1, select={"gpus": ">=1"}),
                      HostItem(id="t", count=1, template="huge")), provs, view(Projection()), T0, SETTINGS)
    assert said(out.decisions[0]) == [("sim-hosts", None, 0, "no template has attribute gpus")]
    assert said(out.decisions[1]) == [("sim-hosts", None, 0, "no template named huge (it has sim-hosts-t)")]
    assert out.decisions[0].rejected[0].reason == "no template has attribute gpus"


def test_a_candidate_that_takes_part_of_the_need_says_what_stopped_it():
    provs = {"a": hosts("a", priority=9, max_number=2), "b": hosts("b")}
    out = plan(demand(HostItem(id="d", count=5)), provs, view(Projection()), T0, SETTINGS)
    assert said(out.decisions[0]) == [("a", "a-t", 2, "capacity: room for 2"), ("b", "b-t", 3, "")]


def test_units_candidates_name_the_pool_and_providers_that_lend_other_things():
    other = units("other")
    other.description = other.description.model_copy(update={"pools": []})
    provs = {"flexlm": units("flexlm", capacity=3), "other": other}
    out = plan(demand(UnitItem(id="lic", count=5, resource="vcs")), provs, view(Projection()), T0, SETTINGS)
    assert said(out.decisions[0]) == [("flexlm", "vcs", 3, "capacity: room for 3"),
                                      ("other", None, 0, "lends no vcs (it lends nothing)")]


def test_bundle_candidates_say_which_providers_carry_and_why_the_others_do_not():
    small = hosts("tiny", templates=[Template(id="tiny-2", max_number=10, attributes={"ncpus": 2, "ngpus": 0})])
    big = hosts("big", templates=[Template(id="big-8", max_number=10, attributes={"ncpus": 8, "ngpus": 1})])
    dear = hosts("dear", price=5.0, templates=[Template(id="dear-8", max_number=10,
                                                        attributes={"ncpus": 8, "ngpus": 1})])
    out = plan(demand(BundleItem(id="gpu", count=2, resources={"ncpus": 4, "ngpus": 1})),
               {"tiny": small, "big": big, "dear": dear}, view(Projection()), T0, SETTINGS)
    assert said(out.decisions[0]) == [
        ("big", "big-8", 2, ""),
        ("tiny", None, 0, "too small: no template holds one bundle (ncpus 2 < 4, ngpus 0 < 1)"),
        ("dear", None, 0, "not needed: covered by big")]


def test_a_long_list_of_candidates_is_cut_and_the_rest_counted():
    provs = {f"p{n:02d}": hosts(f"p{n:02d}") for n in range(30)}
    out = plan(demand(HostItem(id="d", count=1)), provs, view(Projection()), T0, SETTINGS)
    d = out.decisions[0]
    assert len(d.candidates) == 11 and d.candidates[0].count == 1
    assert d.note == "19 more candidates not listed"


def test_a_demand_no_configured_provider_can_serve_is_named_with_why():
    provs = {"sim-hosts": hosts("sim-hosts", ncpus=4), "sim-licenses": units("sim-licenses")}
    snap = DemandSnapshot(items=[
        HostItem(id="fine", count=1, select={"ncpus": ">=4"}),
        HostItem(id="gpu", count=1, select={"gpus": ">=1"}),
        HostItem(id="named", count=1, template="nope"),
        UnitItem(id="lic", count=1, resource="matlab"),
        BundleItem(id="big", count=1, resources={"ncpus": 64})])
    warnings = unservable(snap, provs)
    assert warnings == [
        "item gpu: no provider can serve it (sim-hosts: no template has attribute gpus)",
        "item named: no provider can serve it (sim-hosts: no template named nope (it has sim-hosts-t))",
        "item lic: no provider can serve it (sim-licenses: lends no matlab (it lends vcs))",
        "item big: no provider can serve it (sim-hosts: too small: no template holds one bundle (ncpus 4 < 64))",
    ]
    hosts_only = DemandSnapshot(items=[UnitItem(id="lic", count=1, resource="vcs")])
    assert unservable(hosts_only, {"sim-hosts": provs["sim-hosts"]}) == [
        "item lic: no configured provider offers units"]
    starting = {**provs, "new": ProviderRecord(name="new")}
    assert unservable(snap, starting) == [
        w.replace("no provider", "no described provider") + "; not described yet: new" for w in warnings], \
        "a provider not described yet is named, and silences nothing the others' descriptions tell"
    assert unservable(hosts_only, {"sim-hosts": provs["sim-hosts"], "new": ProviderRecord(name="new")}) == [
        "item lic: no described provider offers units; not described yet: new"]
    assert unservable(snap, {"new": ProviderRecord(name="new")}) == [
        "demand not checked: no provider has described itself yet (new)"]
    assert unservable(snap, {}) == []


def test_cooldown_times_read_as_a_clock():
    p = Projection()
    failed_request(p, "a", "a-t", "r1", at=T0, outcome="failed")
    failed_request(p, "a", "a-t", "r2", at=T0 + 61, outcome="failed")
    out = plan(demand(HostItem(id="d", count=1)), {"a": hosts("a")}, view(p), T0 + 62, SETTINGS)
    assert re.fullmatch(r"cooling down until \d\d:\d\d:\d\d UTC after a failed request \(2 in a row\)",
                        out.decisions[0].candidates[0].why)
