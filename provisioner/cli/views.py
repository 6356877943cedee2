"""The views: ``provisioner providers``, ``requests``, ``instances``, ... as tables or ``-o json``."""

from __future__ import annotations

import argparse
from typing import Callable

from provisioner.cli import bulk as bulk_cli
from provisioner.cli.explained import decisions_text
from provisioner.cli.options import Add, With
from provisioner.cli.output import HIDDEN, emit
from provisioner.cli.where import closing, source
from provisioner.surface.operations import VIEWS


def cmd_view(args: argparse.Namespace) -> int:
    where = {f: getattr(args, f) for f in VIEWS[args.view].filters if getattr(args, f, None) is not None}
    with closing(source(args)) as s:
        rows = s.rows(args.view, **where)
    if args.view == "decisions" and args.output != "json":
        print(decisions_text(rows))  # a block per decision: its candidates do not fit a table
        return 0
    emit(rows, args.output, HIDDEN.get(args.view, ()))
    return 0


def add_parsers(sub: argparse._SubParsersAction, add: Add, out: With, why: With,
                bulk: Callable[[argparse.Namespace], int]) -> None:
    """A command per view, each filter an option; ``instances`` also takes ``return|drain`` (``bulk``)."""
    for name, view in VIEWS.items():
        p = out(add(sub, name, help=f"list {name}"))
        for field in view.filters:
            allowed = view.choices.get(field)
            p.add_argument(f"--{field}", choices=allowed, metavar=field.upper() if allowed else None,
                           help=f"only rows with this {field}" + (f": {', '.join(allowed)}" if allowed else ""))
        p.set_defaults(fn=cmd_view, view=name, reads_only=True)
        if name == "instances":
            bulk_cli.add_parsers(p, add, why, out, bulk)
