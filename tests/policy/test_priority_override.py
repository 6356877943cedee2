"""A site's ``describe.priority`` wins over the priorities a provider's templates report (issue 20, item 1)."""

from __future__ import annotations

from config.models import ProviderConfig
from messages.demand import HostItem
from messages.description import ProviderDescription, Template
from messages.records import ProviderRecord
from policy.catalog import Catalog
from policy.planning import PlanSettings, plan
from providers.describe import merge_description
from state.projection import Projection
from tests.support.policy import T0, demand, view

SETTINGS = PlanSettings(cooldown=60, join_grace=30, order_timeout=600)


def lsf_provider(name: str, price: float, priority: int | None = None,
                 templates: list[Template] | None = None) -> ProviderRecord:
    """What an LSF plugin's getAvailableTemplates says (every template ``priority: 0``), merged with the config."""
    cfg = ProviderConfig.model_validate({"name": name, "kind": "hosts", "script": {"style": "lsf", "path": "/x"},
                                         "describe": {} if priority is None else {"priority": priority}})
    said = ProviderDescription(name=name, kind="hosts", cost_per_hour=price, templates=templates or [
        Template(id=f"{name}-t", max_number=10, priority=0, attributes={"ncpus": 8})])
    return ProviderRecord(name=name, owner="a", description=merge_description(cfg, said))


def test_the_configured_priority_wins_over_templates_reporting_priority_0():
    providers = {"first": lsf_provider("first", price=3.0, priority=20),
                 "second": lsf_provider("second", price=1.0), "third": lsf_provider("third", price=2.0)}
    out = plan(demand(HostItem(id="d", count=5)), providers, view(Projection()), T0, SETTINGS)
    assert [(o.count, p) for p, o in out.orders] == [(5, "first")]


def test_a_template_priority_orders_templates_within_its_provider_only():
    templates = [Template(id="cheap", max_number=10, priority=1, attributes={"ncpus": 8}, cost_per_hour=0.1),
                 Template(id="preferred", max_number=10, priority=9, attributes={"ncpus": 8}, cost_per_hour=5.0)]
    providers = {"site": lsf_provider("site", price=1.0, priority=20, templates=templates),
                 # A template of a less preferred provider reporting a high priority stays behind.
                 "other": lsf_provider("other", price=0.1, priority=5, templates=[
                     Template(id="loud", max_number=10, priority=99, attributes={"ncpus": 8})])}
    offers, _ = Catalog(providers).offers(HostItem(id="d", count=1))
    assert [(o.provider, o.key) for o in offers] == [("site", "preferred"), ("site", "cheap"), ("other", "loud")]


def test_without_an_override_template_priorities_rank_as_lsf_ranks_them():
    """LSF ranks templates of every plugin by their own priority: kept when no provider sets one."""
    providers = {"a": lsf_provider("a", price=1.0, templates=[Template(id="low", max_number=5, priority=1)]),
                 "b": lsf_provider("b", price=2.0, templates=[Template(id="high", max_number=5, priority=7)])}
    offers, _ = Catalog(providers).offers(HostItem(id="d", count=1))
    assert [o.key for o in offers] == ["high", "low"]
