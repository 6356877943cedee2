"""The persistent providers' process metrics: up, degraded, restarts carried over from runner to runner."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from providers.persistent import Status
from provisioner.metrics.collector import ProcessCollector


def status(phase: str = "ready", restarts: int = 0, degraded: str = "") -> Status:
    return Status(phase=phase, pid=None, restarts=restarts, failures=0, degraded=degraded, outstanding=0, queued=0)


def samples(collector: ProcessCollector) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, s.labels["provider"]): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_each_provider_s_process_up_degraded_and_restarts() -> None:
    c = ProcessCollector()
    c.watch("a", lambda: status(restarts=2))
    c.watch("b", lambda: status("down", restarts=5, degraded="cannot start: no hello"))
    m = samples(c)
    assert (m["provisioner_provider_process_up", "a"], m["provisioner_provider_process_up", "b"]) == (1, 0)
    assert (m["provisioner_provider_degraded", "a"], m["provisioner_provider_degraded", "b"]) == (0, 1)
    assert m["provisioner_provider_restarts_total", "b"] == 5


def test_restarts_carry_over_when_a_new_runner_takes_the_provider_over() -> None:
    c = ProcessCollector()
    c.watch("a", lambda: status("stopped", restarts=3))
    c.watch("a", lambda: status(restarts=1))  # the lease came back: a new runner, counting from 0
    assert samples(c)["provisioner_provider_restarts_total", "a"] == 4
