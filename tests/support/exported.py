"""What the daemon's ``/metrics`` exports, read from a real scrape rather than a list kept by hand.

``exported(tmp)`` builds the daemon's ``Metrics`` over a SQLite controller
holding one of everything (providers, a failed request, a running and an
orphaned host, a borrowed resource, a demand, budget caps, a failed script
run, a commit, an answer the controller has not taken), scrapes its exposition and answers, for every sample name a
query may use, the label names its samples carry (Prometheus adds ``job``
and ``instance`` when it scrapes; they are not here).
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from config.models import Config
from messages.demand import DemandSnapshot, HostItem, UnitItem
from messages.description import Pool, ProviderDescription, Template
from messages.facts import (
    InstanceSeen,
    ProviderAdmin,
    ProviderDescribed,
    RequestChanged,
    RequestPlanned,
    ResourceTotalChanged,
    UsageObserved,
    make_fact,
)
from messages.scripts import ScriptResult
from persistence.controller import open_controller
from provisioner.metrics.collector import Metrics
from provisioner.read.model import ReadModel

#: The sample names a family of each type gives in the text format, for a family with no sample yet.
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",),
            "summary": ("", "_count", "_sum"), "info": ("_info",), "unknown": ("",)}

#: Labels Prometheus itself puts on every series it scrapes.
TARGET_LABELS = frozenset({"job", "instance"})


def exporter(tmp: Path) -> tuple[Metrics, object]:
    """A daemon's metrics over a controller with one of everything; the caller closes the controller."""
    cfg = Config.model_validate({
        "instance": {"id": "a", "serves": ["hosts", "units"], "planner": True},
        "controller": {"url": f"sqlite:///{tmp / 'state.db'}"},
        "providers": [],
        "budget": {"max_hosts": 20, "max_units": 10, "max_cost_per_hour": 100.0,
                   "max_spend": {"amount": 1000, "per": "month"}},
        "home": str(tmp / "home"),
    })
    controller = open_controller(cfg.controller.url)
    hosts = ProviderDescription(name="hosts", kind="hosts", cost_per_hour=0.5,
                                templates=[Template(id="small", max_number=10, attributes={"ncpus": 8})])
    units = ProviderDescription(name="units", kind="units", pools=[Pool(resource="vcs", capacity=10,
                                                                        cost_per_unit_hour=2.0)])
    controller.append([
        make_fact(ProviderDescribed(description=hosts), provider="hosts"),
        make_fact(ProviderDescribed(description=units), provider="units"),
        make_fact(RequestPlanned(action="request", supply="hosts", template="small", count=1), provider="hosts",
                  fact_id="request-1"),
        make_fact(RequestChanged(kind="request_failed", request_id="request-1", state="failed",
                                 outcome="capacity"), provider="hosts"),
        make_fact(InstanceSeen(machine_id="m1", name="h1", template="small", state="running"), provider="hosts"),
        make_fact(InstanceSeen(machine_id="m2", name="h2", template="small", state="orphaned",
                               reason="found by the orphan search"), provider="hosts"),
        make_fact(ResourceTotalChanged(resource="vcs", base=2, borrowed=0, total=2), provider="units"),
        make_fact(UsageObserved(resource="vcs", in_use=1), provider="units"),
        make_fact(ProviderAdmin(kind="provider_disabled", reason="exit 77"), provider="units"),
    ])
    controller.put_demand(DemandSnapshot(items=[HostItem(id="d1", count=2, select={"ncpus": ">=8"}),
                                                UnitItem(id="d2", resource="vcs", count=2)]))
    metrics = Metrics(ReadModel(controller), controller, cfg, unrecorded=lambda: {"hosts": 1})
    metrics.script_done(ScriptResult(provider="hosts", action="describe", outcome="transient", duration_s=0.2,
                                     reason="try again"))
    metrics.committed([], 0.002)
    return metrics, controller


def exported(tmp: Path) -> dict[str, set[str]]:
    """Sample name -> label names, for every sample name the exposition's families may give."""
    metrics, controller = exporter(tmp)
    try:
        text = metrics.exposition().decode()
    finally:
        controller.close()
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
        if not family.samples:
            for suffix in SUFFIXES[family.type]:
                names[family.name + suffix] = set()
    return names
