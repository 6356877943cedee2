"""The scheduler's inputs by hand: ``demand put|show``, ``host EVENT NAME``, ``supply put``."""

from __future__ import annotations

import argparse
import sys
from typing import cast

from messages.demand import DemandSnapshot, HostEvent, HostEventKind, SupplySnapshot
from provisioner.cli.arguments import checked, document
from provisioner.cli.options import Add, With
from provisioner.cli.output import print_json, table
from provisioner.cli.where import closing, source


def cmd_demand_put(args: argparse.Namespace) -> int:
    snapshot = document(args.file, DemandSnapshot, 'a demand snapshot ({"items": [...]})')
    with closing(source(args)) as s:
        stored = s.put_demand(snapshot)
    print(f"demand {stored['seq']} stored: {len(stored['items'])} items")
    for line in stored.get("warnings", []):
        print(f"provisioner: warning: {line}", file=sys.stderr)
    return 0


def cmd_supply_put(args: argparse.Namespace) -> int:
    view = document(args.file, SupplySnapshot, 'a supply view ({"hosts": [...]})')
    with closing(source(args)) as s:
        stored = s.put_supply(view)
    print(f"supply view {stored['seq']} stored: {len(stored['hosts'])} hosts")
    return 0


def cmd_demand_show(args: argparse.Namespace) -> int:
    with closing(source(args)) as s:
        demand = s.demand()
    if args.output == "json":
        print_json(demand)
        return 0
    if demand is None:
        print("no demand yet")
        return 0
    print(f"demand {demand['seq']}")
    table([{"id": i["id"], "kind": i["kind"], "count": i["count"],
            "wants": i.get("resource") or i.get("template")
            or " ".join(f"{k}{v if v[:1] in '<>=' else '=' + v}" for k, v in i.get("select", {}).items()) or "any"}
           for i in demand["items"]])
    return 0


def cmd_host(args: argparse.Namespace) -> int:
    # Checked here, as the API checks its path: over REST too a bad name is said before anything is sent.
    checked(HostEvent, {"name": args.name, "event": args.event, "time": 0.0, "provider": args.provider},
            {"name": "host name", "provider": "--provider"})
    with closing(source(args)) as s:
        ev = s.host_event(args.name, cast(HostEventKind, args.event), args.provider)  # argparse's choices
    print(f"host event {ev['seq']}: {ev['name']} {ev['event']}")
    return 0


def add_parsers(sub: argparse._SubParsersAction, add: Add, out: With) -> None:
    demand = add(sub, "demand", help="put or show the demand").add_subparsers(dest="demand", required=True)
    p = add(demand, "put", help="replace the demand with a snapshot (JSON or YAML file, or - for stdin)")
    p.add_argument("file")
    p.set_defaults(fn=cmd_demand_put)
    out(add(demand, "show", help="show the current demand")).set_defaults(fn=cmd_demand_show, reads_only=True)
    p = add(sub, "host", help="report a host event as the scheduler would")
    p.add_argument("event", choices=["joined", "idle", "busy"])
    p.add_argument("name", help="the machine name the provider reported")
    p.add_argument("--provider", help="whose host it is (needed when two providers have a live host of that name)")
    p.set_defaults(fn=cmd_host)
    supply = add(sub, "supply", help="the scheduler's view of its hosts").add_subparsers(dest="supply",
                                                                                          required=True)
    p = add(supply, "put", help="replace it with a view (JSON or YAML file, or - for stdin): "
                                '{"hosts": [{"name", "provider" (optional), "state": "idle" | "busy"}]}')
    p.add_argument("file")
    p.set_defaults(fn=cmd_supply_put)
