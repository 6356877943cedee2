"""provisioner: run the daemon, check a config, feed demand and host events, show state, steer.

Views, inputs and actions talk to the controller directly, so they work with
no daemon running; with ``--url`` they go through a daemon's REST API
instead (``--token-file`` for its bearer token). Either way they ask the one
operator's surface (``provisioner.surface.protocol``): the same rows, the same
actions. Errors are one line on stderr and a non-zero exit.

The commands live by group: ``run`` (the daemon's own), ``inputs`` (the
scheduler's), ``views``, ``actions`` (operators'), ``offline`` (no daemon:
import-lsf, schema, plan, sim, trace) and ``audit``; this module builds the
parser from them and turns failures into that one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from pydantic import ValidationError

from config.located import ConfigError, one_line
from messages.errors import ControllerUnavailable
from provisioner.api.auth import TokensError
from provisioner.api.server import ApiStartError
from provisioner.audit.log import AuditError
from provisioner.cli import actions, audit, inputs, logging_setup, offline, run, views
from provisioner.cli import reload as reload_cli
from provisioner.cli.client import ClientError
from provisioner.cli.options import AFTER, BadLogLevel, Parser, add_global, log_format, log_level, shared
from provisioner.cli.stores import NoStore
from provisioner.cli.trace_export import ExportError
from provisioner.cli.where import CliError
from provisioner.surface.operations import CommitFailed, Conflict, NotFound
from provisioner.version import version

#: The first lines of ``provisioner --help``: plain words, no markup.
DESCRIPTION = ("Run the daemon, check a config, feed demand and host events, show state, steer. Views and "
               "actions work on the controller directly, with no daemon running, or through a daemon's REST "
               "API with --url.")


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="provisioner", description=DESCRIPTION)
    ap.add_argument("--version", action="version", version=f"provisioner {version()}")
    add_global(ap)
    sub = ap.add_subparsers(dest="command", required=True)
    common = shared()

    def add(subs: Any, name: str, parents: list[argparse.ArgumentParser] | None = None,
            **kw: Any) -> argparse.ArgumentParser:
        """A command's parser, taking the global options after the command too (named in its help's last line)."""
        return subs.add_parser(name, parents=parents if parents is not None else [common], epilog=AFTER, **kw)

    def out(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("-o", "--output", choices=["table", "json"], default="table")
        return p

    def why(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--reason", default="", help="recorded in the fact and the audit log")
        return p

    # In the order ``provisioner --help`` lists them.
    run.add_parsers(sub, add)
    inputs.add_parsers(sub, add, out)
    views.add_parsers(sub, add, out, why, actions.cmd_bulk)
    actions.add_parsers(sub, add, why)
    offline.add_parsers(sub, add, out)
    audit.add_parsers(sub, add, out)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        logging_setup.setup(log_level(args.log_level), log_format(args.log_format))
    except BadLogLevel as exc:
        print(f"provisioner: {exc}", file=sys.stderr)
        return 2
    try:
        return args.fn(args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except ValidationError as exc:  # a model built from arguments no command checked first: still one line
        print(f"provisioner: {one_line(exc)}", file=sys.stderr)
        return 1
    except (CliError, ControllerUnavailable, ValueError, ClientError, TokensError, ApiStartError, NotFound,
            Conflict, CommitFailed, AuditError, NoStore, reload_cli.ReloadError, ExportError) as exc:
        print(f"provisioner: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
