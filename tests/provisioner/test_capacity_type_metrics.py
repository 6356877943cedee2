"""Hosts, cost per hour and cost so far split by their template's capacity type, beside the families as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from config.models import Config
from messages.description import ProviderDescription, Template
from messages.facts import InstanceChanged, InstanceSeen, ProviderDescribed, make_fact
from persistence.controller import open_controller
from provisioner.metrics.collector import Metrics
from provisioner.read.model import ReadModel

T0 = 1_700_000_000.0
HOUR = 3600.0


def scrape(tmp: Path) -> dict[tuple[str, frozenset], float]:
    """Two hours after launch: an EC2-like provider with a spot and an on-demand template, a provider whose
    templates say nothing (on-demand), and a host returned after an hour."""
    cfg = Config.model_validate({"instance": {"id": "a"}, "controller": {"url": f"sqlite:///{tmp / 'state.db'}"},
                                 "home": str(tmp / "home")})
    controller = open_controller(cfg.controller.url)
    aws = ProviderDescription(name="aws", kind="hosts", templates=[
        Template(id="od", max_number=10, cost_per_hour=1.0, attributes={"capacity_type": "on-demand"}),
        Template(id="sp", max_number=10, cost_per_hour=0.25, attributes={"capacity_type": "spot"})])
    plain = ProviderDescription(name="plain", kind="hosts", cost_per_hour=0.5,
                                templates=[Template(id="t", max_number=10)])
    facts = [make_fact(ProviderDescribed(description=aws), provider="aws", now=T0),
             make_fact(ProviderDescribed(description=plain), provider="plain", now=T0)]
    for provider, machine, template in (("aws", "o1", "od"), ("aws", "s1", "sp"), ("aws", "s2", "sp"),
                                        ("plain", "p1", "t")):
        facts.append(make_fact(InstanceSeen(machine_id=machine, name=machine, template=template, state="running",
                                            launched_at=T0), provider=provider, now=T0))
    facts.append(make_fact(InstanceChanged(kind="instance_lost", machine_id="s2", state="lost", reason="reclaimed"),
                           provider="aws", now=T0 + HOUR))
    controller.append(facts)
    try:
        metrics = Metrics(ReadModel(controller), controller, cfg, clock=lambda: T0 + 2 * HOUR)
        text = metrics.exposition().decode()
    finally:
        controller.close()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(m, name: str, **labels: str) -> float | None:
    return m.get((name, frozenset(labels.items())))


def test_hosts_and_their_cost_are_split_by_capacity_type_and_add_up_to_each_providers(tmp_path):
    m = scrape(tmp_path)
    typed = "provisioner_instances_by_capacity_type"
    assert value(m, typed, provider="aws", capacity_type="spot", state="running") == 1
    assert value(m, typed, provider="aws", capacity_type="spot", state="lost") == 1
    assert value(m, typed, provider="aws", capacity_type="on-demand", state="running") == 1
    assert value(m, typed, provider="plain", capacity_type="on-demand", state="running") == 1, "the default"
    per_hour = "provisioner_cost_per_hour_by_capacity_type"
    assert value(m, per_hour, provider="aws", capacity_type="spot") == 0.25, "the lost host costs nothing now"
    assert value(m, per_hour, provider="aws", capacity_type="on-demand") == 1.0
    so_far = "provisioner_cost_by_capacity_type_total"
    assert value(m, so_far, provider="aws", capacity_type="spot") == pytest.approx(0.25 * 2 + 0.25 * 1)
    assert value(m, so_far, provider="aws", capacity_type="on-demand") == pytest.approx(2.0)
    for provider in ("aws", "plain"):
        for split, whole in ((so_far, "provisioner_cost_total"), (per_hour, "provisioner_cost_per_hour")):
            parts = sum(v for (n, ls), v in m.items() if n == split and ("provider", provider) in ls)
            assert parts == pytest.approx(value(m, whole, provider=provider)), (provider, split)


def test_the_families_the_alert_rules_read_keep_their_labels(tmp_path):
    m = scrape(tmp_path)
    for name in ("provisioner_cost_total", "provisioner_cost_per_hour"):
        assert {frozenset(dict(ls)) for n, ls in m if n == name} == {frozenset({"provider"})}, name
    assert {frozenset(dict(ls)) for n, ls in m if n == "provisioner_instances"} == {
        frozenset({"provider", "state"})}
    assert value(m, "provisioner_instances", provider="aws", state="running") == 2


def test_a_provider_describing_a_capacity_type_other_than_spot_or_on_demand_is_told_where():
    from providers.contract import ContractError, parse_output

    said = {"kind": "hosts", "templates": [{"id": "a", "max_number": 1, "attributes": {"capacity_type": "Spot"}}]}
    with pytest.raises(ContractError) as info:
        parse_output("v2", "hosts", "describe", said, provider="aws")
    assert str(info.value) == "templates[0].attributes: capacity_type: expected one of 'on-demand', 'spot', got 'Spot'"
