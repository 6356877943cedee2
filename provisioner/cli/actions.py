"""Operators' actions: ``provider pause|resume|drain``, ``instance return``, ``instances return|drain``,
``orphan return``. Each is a fact the owner of the provider carries out, recorded with ``--reason``."""

from __future__ import annotations

import argparse
from typing import cast

from provisioner.cli import bulk as bulk_cli
from provisioner.cli.arguments import reason
from provisioner.cli.options import Add, With
from provisioner.cli.output import print_json, table
from provisioner.cli.where import CliError, closing, source
from provisioner.surface.protocol import Steer


def cmd_steer(args: argparse.Namespace) -> int:
    reason(args)
    with closing(source(args)) as s:
        done = s.steer(args.name, cast(Steer, args.action), args.reason)  # argparse's choices
    print(done["message"])
    return 0


def cmd_return_instance(args: argparse.Namespace) -> int:
    reason(args)
    with closing(source(args)) as s:
        done = s.return_instance(args.id, args.reason)
    print(done["message"])
    return 0


def cmd_bulk(args: argparse.Namespace) -> int:
    """``instances return|drain``: every matching host (``provisioner/cli/bulk.py``)."""
    reason(args)
    with closing(source(args)) as s:
        return bulk_cli.run(args, s, CliError, table, print_json)


def cmd_return_orphan(args: argparse.Namespace) -> int:
    reason(args)
    with closing(source(args)) as s:
        done = s.return_orphan(args.id, args.reason)
    print(done["message"])
    return 0


def add_parsers(sub: argparse._SubParsersAction, add: Add, why: With) -> None:
    provider = add(sub, "provider", help="steer a provider").add_subparsers(dest="provider", required=True)
    for action, text in (("pause", "stop new requests"),
                         ("resume", "undo pause or drain, or revive a provider the daemon disabled (script exit 77 "
                                    "or 78, or one that cannot start) once its cause is fixed; ends its cooldowns too"),
                         ("drain", "stop new requests; what it holds goes back as it falls idle")):
        p = why(add(provider, action, help=f"{text} (its owner carries it out)"))
        p.add_argument("name")
        p.set_defaults(fn=cmd_steer, action=action)
    instance = add(sub, "instance", help="act on a host").add_subparsers(dest="instance", required=True)
    p = why(add(instance, "return", help="give a host back (its owner carries it out)"))
    p.add_argument("id", help="PROVIDER/MACHINE_ID, a machine id or a host name")
    p.set_defaults(fn=cmd_return_instance)
    orphan = add(sub, "orphan", help="act on an orphan").add_subparsers(dest="orphan", required=True)
    p = why(add(orphan, "return", help="give back an orphaned host or grant"))
    p.add_argument("id", help="its id in the orphans list")
    p.set_defaults(fn=cmd_return_orphan)
