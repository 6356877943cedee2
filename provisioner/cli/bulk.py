"""``provisioner instances return|drain``: the bulk actions from the command line.

Without ``--yes`` it first asks what would be done (a dry run, the same
call with ``dry_run``), prints the count per provider and asks before
acting; ``--dry-run`` only prints the hosts. Directly on the controller or
through a daemon's REST API (``POST /v1/instances/return`` and ``/drain``),
as every other action.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, cast

from pydantic import ValidationError

from config.located import one_line
from provisioner.surface.bulk import ACTED_ON, Bulk, BulkFilter
from provisioner.surface.protocol import Surface

HELP = {
    "return": "give back every host the filters match, now: busy ones too (their owners carry it out)",
    "drain": "give back every host the filters match once it is not busy: idle ones now, busy ones as their "
             "work ends",
}


def add_parsers(instances: argparse.ArgumentParser, add: Callable[..., argparse.ArgumentParser],
                why: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
                out: Callable[[argparse.ArgumentParser], argparse.ArgumentParser], fn: Callable[..., int]) -> None:
    """``instances return`` and ``instances drain`` under the ``instances`` view (which stays a view alone)."""
    bulk = instances.add_subparsers(dest="bulk", metavar="{return,drain}",
                                    help="act on every matching host instead of listing them")
    for action in ("return", "drain"):
        p = out(why(add(bulk, action, help=HELP[action], description=HELP[action] + ". Filters combine: a "
                        "host must match them all. Without --yes, it shows the count and asks.")))
        # Defaults SUPPRESSed: the view's --state or --provider given before the action still count.
        p.add_argument("--state", choices=ACTED_ON, metavar="STATE", default=argparse.SUPPRESS,
                       help=f"only hosts in this state: {', '.join(ACTED_ON)}")
        p.add_argument("--provider", default=argparse.SUPPRESS, help="only this provider's hosts")
        p.add_argument("--older-than", metavar="DURATION", help="only hosts launched at least this long ago "
                                                                "(2h, 3d)")
        p.add_argument("--name", metavar="GLOB", help="only hosts whose name matches, e.g. 'gpu-*' (quote it)")
        p.add_argument("--all", action="store_true", help="every host, when no other filter is given")
        p.add_argument("--dry-run", action="store_true", help="list the hosts it would act on; write nothing")
        p.add_argument("--yes", "-y", action="store_true", help="do not ask")
        p.set_defaults(fn=fn, action=action)


def run(args: argparse.Namespace, source: Surface, fail: Callable[[str], Exception],
        table: Callable[[list[dict[str, Any]]], None], emit_json: Callable[[Any], None]) -> int:
    action = cast(Bulk, args.action)  # set by the subcommand, one of Bulk
    try:
        f = BulkFilter(state=getattr(args, "state", None), provider=getattr(args, "provider", None),
                       older_than=args.older_than, name=args.name, all=args.all)
    except ValidationError as exc:
        raise fail(one_line(exc, named={f: f"--{f.replace('_', '-')}" for f in BulkFilter.model_fields})) from None
    if args.dry_run or not args.yes:
        preview = source.bulk(action, f, args.reason, dry_run=True)
        if args.dry_run:
            if args.output == "json":
                emit_json(preview)
            else:
                table([{k: h[k] for k in ("id", "provider", "name", "state", "launched_at")}
                       for h in preview["hosts"]])
                print(preview["message"])
            return 0
        if preview["matched"] == 0:
            print(preview["message"])
            return 0
        print(preview["message"])
        if not _confirm(f"{action} these {preview['matched']} hosts? [y/N] "):
            print("nothing done")
            return 1
    done = source.bulk(action, f, args.reason, dry_run=False)
    if args.output == "json":
        emit_json(done)
    else:
        print(done["message"])
    return 0


def _confirm(question: str) -> bool:
    print(question, end="", flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    if not answer:
        print()
    return answer.strip().lower() in ("y", "yes")
