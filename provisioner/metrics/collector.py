"""Prometheus metrics: state computed from the facts at scrape time, plus live timings.

Everything the fact log can tell (requests, instances, units, costs, budget
room, facts) is computed by a collector from the read model when Prometheus
scrapes, so every daemon instance reports the same cluster-wide numbers and a
restart loses no counter. What facts do not record (how long scripts and
commits took, why a script failed) is measured live in this process.

Each daemon has its own registry, so several daemons can share one process
(tests) without their series mixing.
"""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from collections import Counter as Tally
from collections.abc import Mapping
from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from config.models import Config
from messages.description import ON_DEMAND
from messages.facts import Fact
from messages.records import ProviderRecord
from messages.scripts import ScriptResult
from messages.states import REQUEST
from persistence.port import Controller
from policy.budget import Usage, period_start, usage
from policy.costs import costs as policy_costs
from policy.costs import host_costs_by
from policy.settings import budget_limits, plan_settings
from policy.supply import SupplyView
from providers.persistent import Status
from provisioner.metrics.health import BuildInfo, ControllerAnswered, cluster_health
from provisioner.read import views
from provisioner.read.model import ReadModel

SCRIPT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: The kinds of demand item, each reported even when the snapshot has none of it.
DEMAND_KINDS = ("hosts", "units", "bundles")
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self, read_model: ReadModel, controller: Controller, cfg: Config,
                 clock: Callable[[], float] = time.time,
                 unrecorded: Callable[[], dict[str, int]] = dict) -> None:
        """``unrecorded``: answers per provider that this process keeps because the controller refused their
        facts (``actors.answers``)."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.script_duration = ScriptTimes()
        self.registry.register(self.script_duration)
        self.script_failures = Counter(
            "provisioner_script_failures", "Provider script runs that did not succeed, by outcome class.",
            ["provider", "action", "reason"], registry=self.registry)
        self.journal_commit = Histogram(
            "provisioner_journal_commit_seconds", "How long one group commit of facts to the controller took.",
            buckets=COMMIT_BUCKETS, registry=self.registry)
        self.registry.register(BuildInfo())
        self.state = StateCollector(read_model, controller, cfg, clock)
        self.registry.register(ControllerAnswered(self.state))
        #: Host events refused, by reason (``unknown``, ``ambiguous``): the journal and the REST API count them.
        self.refused_events: Tally[str] = Tally()
        self.registry.register(RefusedEvents(self.refused_events))
        self.registry.register(Unrecorded(unrecorded))
        self.processes = ProcessCollector()
        self.registry.register(self.processes)

    def reconfigure(self, cfg: Config) -> None:
        """A reloaded config: the caps and billing units the state families are read with."""
        self.state.configure(cfg)

    def watch_process(self, provider: str, status: Callable[[], Status]) -> None:
        """Follow a persistent provider's process (its health and restarts) from now on."""
        self.processes.watch(provider, status)

    def script_done(self, result: ScriptResult) -> None:
        self.script_duration.observe(result.provider, result.action, result.duration_s)
        if not result.ok and result.outcome != "not_started":  # not run: no failure of the script
            self.script_failures.labels(result.provider, result.action, result.outcome).inc()

    def committed(self, _facts: list[Fact], seconds: float) -> None:
        self.journal_commit.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class RefusedEvents(Collector):
    """``provisioner_host_events_refused_total``: host events that named no live host, or a name live at
    several providers with no provider named."""

    def __init__(self, tally: Tally[str]) -> None:
        self.tally = tally

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("provisioner_host_events_refused", "Host events refused: no live host of "
                                     "that name (unknown), or live at several providers (ambiguous).",
                                     labels=["reason"])
        for reason in ("unknown", "ambiguous"):
            family.add_metric([reason], self.tally[reason])
        yield family


class Unrecorded(Collector):
    """``provisioner_answers_unrecorded``: answers of request and return calls this process holds because the
    controller refused their facts; while above 0 the process must not stop (what they made is in no fact)."""

    def __init__(self, count: Callable[[], dict[str, int]]) -> None:
        self.count = count

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("provisioner_answers_unrecorded", "Answers of request and return calls kept "
                                   "by this process because the controller refused their facts.",
                                   labels=["provider"])
        for provider, n in sorted(self.count().items()):
            family.add_metric([provider], n)
        yield family


class ScriptTimes(Collector):
    """``provisioner_script_duration_seconds``: a histogram by provider and action, kept compact.

    prometheus_client's Histogram keeps a locked value object per bucket and
    series: with a thousand providers and three or four actions each, 10 MiB.
    Here each series is one array of counts, under one lock for them all.
    """

    NAME = "provisioner_script_duration_seconds"
    HELP = "How long provider scripts ran, by provider and action."

    def __init__(self, buckets: tuple[float, ...] = SCRIPT_BUCKETS) -> None:
        self.buckets = buckets
        self.lock = threading.Lock()
        #: (provider, action) -> a count per bucket (the last for +Inf), then the sum of the times
        self.series: dict[tuple[str, str], array] = {}

    def observe(self, provider: str, action: str, seconds: float) -> None:
        with self.lock:
            counts = self.series.get((provider, action))
            if counts is None:
                counts = self.series[(provider, action)] = array("d", bytes(8 * (len(self.buckets) + 2)))
            counts[bisect.bisect_left(self.buckets, seconds)] += 1
            counts[-1] += seconds

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.NAME, self.HELP, labels=["provider", "action"])]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.NAME, self.HELP, labels=["provider", "action"])
        with self.lock:
            series = [(labels, counts.tolist()) for labels, counts in sorted(self.series.items())]
        for labels, counts in series:
            cumulative, total = [], 0.0
            for le, n in zip((*map(str, self.buckets), "+Inf"), counts):
                total += n
                cumulative.append((le, total))
            family.add_metric(list(labels), cumulative, counts[-1])
        yield family


class ProcessCollector(Collector):
    """The persistent providers' processes: up, degraded, and restarted how often, read at scrape time.

    A provider's process is followed through the runner that owns it; when a
    new runner takes over (the lease came back), the restarts of the one before
    carry over, so the counter only grows while the daemon lives.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.status: dict[str, Callable[[], Status]] = {}
        self.earlier: dict[str, int] = {}

    def watch(self, provider: str, status: Callable[[], Status]) -> None:
        with self.lock:
            before = self.status.get(provider)
            if before is not None:
                self.earlier[provider] = self.earlier.get(provider, 0) + before().restarts
            self.status[provider] = status

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            rows = [(name, status(), self.earlier.get(name, 0)) for name, status in sorted(self.status.items())]
        yield _family(GaugeMetricFamily, "provisioner_provider_process_up", "1 while a persistent provider's "
                      "process is serving calls.", ["provider"],
                      [((name, ), float(s.phase in ("ready", "draining"))) for name, s, _ in rows])
        yield _family(GaugeMetricFamily, "provisioner_provider_degraded", "1 while a persistent provider cannot "
                      "start or keeps dying (its calls fail as transient).", ["provider"],
                      [((name, ), float(bool(s.degraded))) for name, s, _ in rows])
        yield _family(CounterMetricFamily, "provisioner_provider_restarts", "Starts of a persistent provider's "
                      "process after its first (after it exited, hung or misbehaved, could not start, or its env_file "
                      "changed).",
                      ["provider"], [((name, ), s.restarts + earlier) for name, s, earlier in rows])


class StateCollector(Collector):
    def __init__(self, read_model: ReadModel, controller: Controller, cfg: Config,
                 clock: Callable[[], float]) -> None:
        self.read_model = read_model
        self.controller = controller
        self.clock = clock
        self.configure(cfg)

    def configure(self, cfg: Config) -> None:
        # One assignment per attribute: a scrape on another thread reads either the old or the new.
        self.cfg = cfg
        self.limits = budget_limits(cfg.budget)
        self.settings = plan_settings(cfg.policy, cfg.budget, cfg.providers)

    def describe(self) -> list[Metric]:
        # Registering must not scrape the controller; the families are known only at collect time.
        return []

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        leases = {lease.name: lease.holder for lease in self.controller.leases.all()}
        demand = self.controller.get_demand()
        supply = self.controller.get_supply()
        held = supply.resources if supply is not None else {}
        with self.read_model.current() as p:
            requests = Tally((r.provider, r.action, r.state) for r in p.requests.values()
                             if r.state in REQUEST.terminal)
            instances = Tally((i.provider, i.state) for i in p.instances.values())
            kind = capacity_types(p.providers)
            typed = Tally((i.provider, kind(i.provider, i.template), i.state) for i in p.instances.values())
            typed_costs = host_costs_by(p.providers, p.instances, now, kind, self.settings.billing_units)
            units = [(r.name, r.base, r.borrowed, r.total, r.in_use) for r in p.resources.values()]
            costs = views.costs(p, now, self.settings.billing_units)
            used = usage(SupplyView(orders=p.orders, requests=p.requests, instances=p.instances, grants=p.grants),
                         p.providers, now, self.settings.order_timeout)
            spent = 0.0 if self.limits.max_spend is None else policy_costs(
                p.providers, p.instances, p.grants, now, self.settings.billing_units,
                since=period_start(now, self.limits.spend_per)).total
            providers = sorted(set(p.providers) | set(self.cfg.instance.serves))
            facts = dict(self.read_model.facts_by_kind)
            health = cluster_health(p, now)

        yield _family(CounterMetricFamily, "provisioner_requests", "Requests finished, by provider, action "
                      "(request or return) and outcome (their final state).", ["provider", "action", "outcome"],
                      requests.items())
        yield _family(GaugeMetricFamily, "provisioner_instances", "Host instances by provider and state.",
                      ["provider", "state"], instances.items())
        rows: list[tuple[tuple[str, ...], float]] = []
        drift: list[tuple[tuple[str, ...], float]] = []
        for name, base, borrowed, total, in_use in units:
            rows += [((name, "base"), base), ((name, "borrowed"), borrowed), ((name, "total"), total)]
            if in_use is not None:
                rows.append(((name, "in_use"), in_use))
            if name in held:
                rows.append(((name, "scheduler_in_use"), held[name]))
                if in_use is not None:
                    drift.append(((name,), in_use - held[name]))
        yield _family(GaugeMetricFamily, "provisioner_units", "Shared resource units: base, borrowed, total, "
                      "observed in use at the source, and held by the scheduler's jobs.", ["resource", "kind"], rows)
        yield _family(GaugeMetricFamily, "provisioner_units_drift", "Units in use at the source (license server) "
                      "beyond what the scheduler says its jobs hold.", ["resource"], drift)
        yield _family(CounterMetricFamily, "provisioner_cost", "Cost so far, in the providers' currency.",
                      ["provider"], [((c["provider"],), c["cost_so_far"]) for c in costs])
        yield _family(GaugeMetricFamily, "provisioner_cost_per_hour", "What held supply costs per hour now.",
                      ["provider"], [((c["provider"],), c["cost_per_hour_now"]) for c in costs])
        # The same hosts and their cost split by their template's capacity type (spot, on-demand): new families
        # beside the ones above, whose label sets the alert rules and dashboards rely on as they are.
        yield _family(GaugeMetricFamily, "provisioner_instances_by_capacity_type", "Host instances by provider, "
                      "their template's capacity type (spot or on-demand) and state.",
                      ["provider", "capacity_type", "state"], typed.items())
        yield _family(CounterMetricFamily, "provisioner_cost_by_capacity_type", "Hosts' cost so far, by provider "
                      "and their template's capacity type.", ["provider", "capacity_type"],
                      [(key, so_far) for key, (so_far, _) in sorted(typed_costs.items())])
        yield _family(GaugeMetricFamily, "provisioner_cost_per_hour_by_capacity_type", "What held hosts cost per "
                      "hour now, by provider and their template's capacity type.", ["provider", "capacity_type"],
                      [(key, rate) for key, (_, rate) in sorted(typed_costs.items())])
        yield _family(GaugeMetricFamily, "provisioner_lease_owned", "1 when this daemon holds the provider's lease.",
                      ["provider"], [((name,), float(leases.get(f"provider:{name}") == self.cfg.instance.id))
                                     for name in providers])
        unmet = dict.fromkeys(DEMAND_KINDS, 0)
        for item in demand.items if demand else []:
            unmet[item.kind] = unmet.get(item.kind, 0) + item.count
        yield _family(GaugeMetricFamily, "provisioner_demand_unmet", "The scheduler's unmet need in the current "
                      "demand snapshot, by kind (hosts, license units, bundles of work).", ["kind"],
                      [((k,), v) for k, v in unmet.items()])
        yield _family(CounterMetricFamily, "provisioner_facts", "Facts in the controller's log, by kind.",
                      ["kind"], [((k,), v) for k, v in sorted(facts.items())])
        yield _family(GaugeMetricFamily, "provisioner_budget_remaining", "Room left under each configured budget "
                      "limit (hosts, units, currency per hour, currency this period).", ["limit"],
                      self._budget(used, spent))
        yield from health

    def _budget(self, used: Usage, spent: float) -> list[tuple[tuple[str, ...], float]]:
        """What each configured cap still allows, measured as the budget review measures it."""
        lim = self.limits
        rows: list[tuple[tuple[str, ...], float]] = []
        if lim.max_hosts is not None:
            rows.append((("max_hosts",), lim.max_hosts - used.hosts))
        if lim.max_units is not None:
            rows.append((("max_units",), lim.max_units - used.units))
        if lim.max_cost_per_hour is not None:
            rows.append((("max_cost_per_hour",), round(lim.max_cost_per_hour - used.cost_per_hour, 6)))
        if lim.max_spend is not None:
            rows.append((("max_spend",), round(lim.max_spend - spent, 6)))
        return rows


def capacity_types(providers: Mapping[str, ProviderRecord]) -> Callable[[str, str | None], str]:
    """A host's capacity type by its provider and template (``ProviderDescription.capacity_type``), each pair
    looked up once: a scrape asks it of every host."""
    found: dict[tuple[str, str | None], str] = {}

    def kind(provider: str, template: str | None) -> str:
        k = found.get((provider, template))
        if k is None:
            rec = providers.get(provider)
            desc = rec.description if rec is not None else None
            k = found[(provider, template)] = desc.capacity_type(template) if desc is not None else ON_DEMAND
        return k

    return kind


def _family(cls: Any, name: str, doc: str, labels: list[str], samples: Any) -> Metric:
    family = cls(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(list(values), float(value))
    return family
