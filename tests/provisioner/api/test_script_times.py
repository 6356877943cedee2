"""The compact script-times histogram reads exactly as prometheus_client's own Histogram would."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from provisioner.metrics.collector import SCRIPT_BUCKETS, ScriptTimes

pytestmark = pytest.mark.slow


def _samples(registry: CollectorRegistry) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples if not s.name.endswith("_created")}


def test_the_same_observations_give_the_same_series_as_a_prometheus_histogram():
    observed = [("a", "describe", 0.01), ("a", "describe", 0.05), ("a", "describe", 0.051), ("a", "list", 300.0),
                ("b", "list", 301.0), ("b", "request", 2.5), ("a", "describe", 7.0), ("b", "request", 0.0)]
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram(ScriptTimes.NAME, ScriptTimes.HELP, ["provider", "action"], buckets=SCRIPT_BUCKETS,
                          registry=theirs)
    compact = ScriptTimes()
    ours.register(compact)
    for provider, action, seconds in observed:
        reference.labels(provider, action).observe(seconds)
        compact.observe(provider, action, seconds)
    assert _samples(ours) == _samples(theirs)
    assert _samples(ours)[(f"{ScriptTimes.NAME}_count", (("action", "describe"), ("provider", "a")))] == 4
