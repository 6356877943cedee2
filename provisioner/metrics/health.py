"""The metrics alerts need beyond the state families: build, controller reachability, provider status, orphans.

- ``provisioner_build_info{version}``: always 1; the version is in the label.
- ``provisioner_controller_up``: 1 when the controller answered the reads of
  this scrape, 0 when it could not be reached. The scrape still answers then
  (with the live timings and this gauge, without the state families), so
  Prometheus's own ``up`` keeps meaning "the daemon answers" and this gauge
  tells the two failures apart.
- ``provisioner_provider_status{provider, status}``: 1 on each provider's
  current status (``active``, ``paused``, ``drained``, ``disabled``), as
  ``provisioner providers`` shows it.
- ``provisioner_orphans{provider, kind}``: the rows of ``provisioner
  orphans`` (``instance``, ``grant``, ``request``), counted.

The last two are computed from the same projection, in the same read, as the
other state families (``cluster_health``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from messages.errors import ControllerUnavailable
from provisioner.read import views
from provisioner.version import version
from state.projection import Projection

log = logging.getLogger(__name__)

CONTROLLER_UP = "provisioner_controller_up"


class BuildInfo(Collector):
    NAME = "provisioner_build_info"
    HELP = "Always 1; the daemon's version is in the label."

    def __init__(self) -> None:
        self.version = version()

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["version"])
        family.add_metric([self.version], 1.0)
        yield family


class ControllerAnswered(Collector):
    """Wraps the collector that reads the controller; says whether the controller answered."""

    HELP = "1 when the controller answered this scrape's reads, 0 when it could not be reached."

    def __init__(self, state: Collector) -> None:
        self.state = state
        #: Whether the last scrape's reads were answered (logged when it changes, not at every scrape).
        self.answered = True

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(CONTROLLER_UP, self.HELP)]

    def collect(self) -> Iterator[Metric]:
        try:
            families = list(self.state.collect())
        except ControllerUnavailable as exc:
            if self.answered:
                log.warning("metrics: the controller does not answer; provisioner_controller_up is 0: %s", exc)
            self.answered = False
            yield GaugeMetricFamily(CONTROLLER_UP, self.HELP, value=0.0)
            return
        if not self.answered:
            log.info("metrics: the controller answers again")
        self.answered = True
        yield GaugeMetricFamily(CONTROLLER_UP, self.HELP, value=1.0)
        yield from families


def cluster_health(p: Projection, now: float) -> list[Metric]:
    """Provider status and orphans, from a projection the caller holds still."""
    status = GaugeMetricFamily("provisioner_provider_status", "1 on each provider's current status (active, "
                               "paused, drained, disabled).", labels=["provider", "status"])
    for name in sorted(p.providers):
        status.add_metric([name, p.providers[name].status], 1.0)
    orphans = GaugeMetricFamily("provisioner_orphans", "What may be held at a provider and serves no one, as the "
                                "orphans view lists it: hosts, grants, requests of unknown outcome.",
                                labels=["provider", "kind"])
    for (provider, kind), n in sorted(Counter((r["provider"], r["kind"]) for r in views.orphans(p, now)).items()):
        orphans.add_metric([provider, kind], float(n))
    return [status, orphans]
