"""``provisioner plan``: one planning round against the controller's facts, written nowhere.

It reads the controller's log into a projection (from the daemon's snapshot
when its home holds one, as the views do), reads a demand snapshot from a
file, and runs ``policy.rounds.dry_run``: the daemon's own round (the
planner's orders and decisions, bundle items packed, then the budget's
review and its cuts) against the current facts and the providers' latest
descriptions. ``--empty`` plans as if no supply existed: no orders,
requests, hosts or grants (the providers, their steering and their owners
stay as the facts say). Nothing is appended to the controller, the audit
log or a snapshot.

It needs no daemon running: a provider no daemon holds now is planned for
from its last recorded description, as if its owner were there, and each of
its orders and each decision that weighed it says so (``no_owner: ...``).
A provider of the config that was never described has no templates to plan
with, and is named as such.

The answer, as JSON (``-o json``) or as tables for people::

    {"orders": [{"provider", "template", "count", "bundles": {ITEM_ID: N}, "item", "resource", "note"}],
     "cost_per_hour", "unplaced": [{"item", "count", "reason"}], "decisions": [...], "planning_ms",
     "no_owner": [PROVIDER], "never_described": [PROVIDER]}

``bundles`` says how many bundles of which items a packed order's hosts
carry; a host or units order names its ``item`` instead (and ``resource``
for units). ``note`` is null, or says that no daemon holds the provider.
``planning_ms`` times the round alone, without reading the log. Something
left unplaced is an answer, not a failure: the exit status is 0.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from config.models import Config
from messages.demand import DemandSnapshot
from messages.records import (
    DecisionRecord,
    GrantRecord,
    InstanceRecord,
    NodeRecord,
    OrderRecord,
    ProviderRecord,
    RequestRecord,
    ResourceRecord,
)
from persistence.controller import open_controller
from persistence.snapshot import SnapshotStore
from policy.rounds import NO_OWNER, DryRun, dry_run
from policy.settings import PlanSettings, plan_settings
from provisioner.cli.documents import DocumentError, read_document
from provisioner.cli.explained import decision_lines
from provisioner.read.model import ReadModel


class PlanError(ValueError):
    """A demand file that cannot be used: its name, where in it, and what is wrong."""


def read_demand(path: str) -> DemandSnapshot:
    """A demand snapshot from a JSON or YAML file (``-``: stdin), as ``demand put`` takes it."""
    try:
        return read_document(path, DemandSnapshot, 'a demand snapshot ({"items": [...]})')
    except DocumentError as exc:
        raise PlanError(str(exc)) from None


@dataclass
class Supply:
    """The facts as a round reads them (``policy.rounds.PlanState``)."""

    providers: Mapping[str, ProviderRecord]
    resources: Mapping[str, ResourceRecord]
    orders: Mapping[str, OrderRecord] = field(default_factory=dict)
    requests: Mapping[str, RequestRecord] = field(default_factory=dict)
    instances: Mapping[str, InstanceRecord] = field(default_factory=dict)
    grants: Mapping[str, GrantRecord] = field(default_factory=dict)
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    decided: list[DecisionRecord] = field(default_factory=list)


@dataclass(frozen=True)
class Planned:
    result: DryRun
    planning_ms: float
    #: Where the settings came from, for the table's heading.
    settings_from: str
    empty: bool
    #: Providers of the config with no recorded description: nothing to plan with.
    never_described: list[str] = field(default_factory=list)


def plan_round(demand: DemandSnapshot, url: str, home: Path, cfg: Config | None, empty: bool = False,
               now: float | None = None) -> Planned:
    """One round planned on ``demand`` against the controller at ``url``; nothing is written."""
    settings = plan_settings(cfg.policy, cfg.budget, cfg.providers) if cfg is not None else PlanSettings()
    controller = open_controller(url)
    try:
        model = ReadModel(controller, SnapshotStore.for_controller(home, url, quiet=True))
        with model.current() as p:
            state = Supply(p.providers, p.resources) if empty else Supply(
                p.providers, p.resources, p.orders, p.requests, p.instances, p.grants, p.nodes, list(p.decided))
            at = time.time() if now is None else now
            started = time.perf_counter()
            result = dry_run(demand, state, at, settings, ownerless=True)
            took = (time.perf_counter() - started) * 1000.0
            never = [c.name for c in cfg.providers if (rec := p.providers.get(c.name)) is None
                     or rec.description is None] if cfg is not None else []
    finally:
        controller.close()
    return Planned(result, took, "the config's policy, budget and providers" if cfg is not None
                   else "the defaults (no config given)", empty, never)


def _note(reason: str) -> str | None:
    """An order's ``no_owner`` note, from its reason."""
    return next((part for part in reason.split("; ") if part.startswith(f"{NO_OWNER}:")), None)


def as_json(planned: Planned) -> dict[str, Any]:
    r = planned.result
    return {
        "orders": [{"provider": provider, "template": o.template, "count": o.count, "bundles": o.bundles,
                    "item": o.item_id or None, "resource": o.resource, "note": _note(o.reason)}
                   for provider, o in r.orders],
        "cost_per_hour": round(r.cost_per_hour, 6),
        "unplaced": [{"item": u.item, "count": u.count, "reason": u.reason} for u in r.unplaced],
        "decisions": [d.model_dump(mode="json", exclude={"kind"}) for d in r.decisions],
        "planning_ms": round(planned.planning_ms, 3),
        "no_owner": sorted(r.unowned),
        "never_described": planned.never_described,
    }


def as_text(planned: Planned) -> str:
    r = planned.result
    hosts = sum(o.count for _, o in r.orders if o.supply == "hosts")
    units = sum(o.count for _, o in r.orders if o.supply == "units")
    what = ", ".join(x for x in (f"{hosts} hosts" if hosts else "", f"{units} units" if units else "") if x)
    n = len(r.orders)
    lines = [f"plan: {what or 'nothing'} in {n} order{'' if n == 1 else 's'}, {r.cost_per_hour:.4f} per hour "
             f"(planning {planned.planning_ms:.1f} ms)"
             + (", as if no supply existed" if planned.empty else ", counting the supply in flight"),
             f"settings: {planned.settings_from}"]
    if r.unowned:
        its = "its" if len(r.unowned) == 1 else "their"
        lines.append(f"no owner: no daemon holds {', '.join(sorted(r.unowned))} now; planned from {its} last "
                     f"recorded description as {its} owner would (marked {NO_OWNER})")
    if planned.never_described:
        lines.append(f"never described, not planned for: {', '.join(planned.never_described)} (no daemon has "
                     "described it yet)")
    lines.append("")
    noted = any(provider in r.unowned for provider, _ in r.orders)
    lines += _table(["provider", "template", "count", "carries", "for"] + (["note"] if noted else []), [
        [provider, o.template or o.resource or "-", str(o.count),
         ", ".join(f"{item}: {n}" for item, n in sorted(o.bundles.items())) or "-", o.item_id or "-"]
        + ([NO_OWNER if provider in r.unowned else "-"] if noted else [])
        for provider, o in r.orders])
    if r.unplaced:
        lines += ["", "unplaced:"]
        lines += _table(["item", "count", "reason"], [[u.item, str(u.count), u.reason] for u in r.unplaced])
    if r.clamps:
        lines += ["", "budget cuts:"] + [f"  {c.limit}: {c.detail}" for c in r.clamps]
    lines += ["", "decisions, each candidate in rank order:"]
    for d in r.decisions:
        lines += decision_lines(d.model_dump(mode="json"))
    return "\n".join(lines)


def _table(cols: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(none)"]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    out = ["  ".join(c.upper().ljust(w) for c, w in zip(cols, widths)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    return out


def plan_main(demand_file: str, url: str, home: Path, cfg: Config | None, empty: bool, output: str) -> int:
    demand = read_demand(demand_file)
    planned = plan_round(demand, url, home, cfg, empty)
    if output == "json":
        print(orjson.dumps(as_json(planned), option=orjson.OPT_INDENT_2).decode())
    else:
        print(as_text(planned))
    return 0
