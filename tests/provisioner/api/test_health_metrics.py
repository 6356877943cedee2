"""The metrics alerts read: provider status, orphans, whether the controller answered, the build."""

from __future__ import annotations

import logging
from importlib.metadata import version

from prometheus_client.parser import text_string_to_metric_families

from messages.facts import ProviderAdmin, RequestChanged, RequestPlanned, make_fact
from tests.support.exported import exporter


def scrape(metrics) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


def series(samples, name: str) -> dict[frozenset, float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def labels(**kw: str) -> frozenset:
    return frozenset(kw.items())


def test_provider_status_and_orphans_follow_the_facts(tmp_path):
    metrics, controller = exporter(tmp_path)
    try:
        m = scrape(metrics)
        assert series(m, "provisioner_provider_status") == {labels(provider="hosts", status="active"): 1,
                                                             labels(provider="units", status="disabled"): 1}
        # The failed request's outcome is known (capacity): of the orphans view's rows, only the host is one.
        assert series(m, "provisioner_orphans") == {labels(provider="hosts", kind="instance"): 1}
        assert series(m, "provisioner_controller_up") == {labels(): 1}

        controller.append([
            make_fact(ProviderAdmin(kind="provider_resumed", reason="fixed"), provider="units"),
            make_fact(RequestPlanned(action="request", supply="hosts", template="small", count=1), provider="hosts",
                      fact_id="request-2"),
            make_fact(RequestChanged(kind="request_timed_out", request_id="request-2", state="timed_out"),
                      provider="hosts"),
        ])
        m = scrape(metrics)
        assert series(m, "provisioner_provider_status") == {labels(provider="hosts", status="active"): 1,
                                                             labels(provider="units", status="active"): 1}
        assert series(m, "provisioner_orphans") == {labels(provider="hosts", kind="instance"): 1,
                                                     labels(provider="hosts", kind="request"): 1}
    finally:
        controller.close()


def test_an_unreachable_controller_is_a_gauge_at_0_and_the_scrape_still_answers(tmp_path, caplog):
    metrics, controller = exporter(tmp_path)
    assert series(scrape(metrics), "provisioner_controller_up") == {labels(): 1}
    controller.close()  # every read now raises ControllerUnavailable, as an unreachable controller does
    with caplog.at_level(logging.INFO, logger="provisioner.metrics.health"):
        m = scrape(metrics)
        scrape(metrics)
    assert [r.levelname for r in caplog.records] == ["WARNING"], "said once, not at every scrape"
    assert series(m, "provisioner_controller_up") == {labels(): 0}
    assert series(m, "provisioner_build_info") == {labels(version=version("provisioner")): 1}
    assert series(m, "provisioner_script_duration_seconds_count") == {labels(provider="hosts", action="describe"): 1}
    # Numbers the controller would have given are left out rather than reported as zero.
    for name in ("provisioner_instances", "provisioner_provider_status", "provisioner_orphans",
                 "provisioner_requests_total", "provisioner_demand_unmet"):
        assert series(m, name) == {}, name
