"""``provisioner audit``: the audit log's last lines (``--follow``: as they are written), ``audit verify`` its chain.

With ``--url`` through the daemon's REST API; else the file in the daemon's
home, which needs no store to show (verifying it reads the controller).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import orjson

from persistence.controller import open_controller
from provisioner.audit.log import GENESIS, AuditLog, follow
from provisioner.cli.options import Add, With
from provisioner.cli.output import HIDDEN, cell, emit, print_json
from provisioner.cli.stores import WHERE
from provisioner.cli.where import CliError, closing, direct, remote


def _audit_reader(args: argparse.Namespace) -> tuple[Any, Any]:
    """``read(after, limit)`` and ``verify()`` of the daemon's audit log (or of the local file)."""
    r = remote(args)
    if r is not None:
        return r.audit, r.audit_verify
    url, home, _ = direct(args, store=False)
    if not (home / "audit.log").exists():
        raise CliError(f"no audit log in {home} (audit.log): nothing written there yet. Give {WHERE} for "
                       "the daemon's")
    log_ = AuditLog(home / "audit.log")

    def verify() -> dict[str, Any]:
        with closing(open_controller(url)) as controller:
            return log_.verify(controller).to_dict()

    return (lambda after, limit: log_.read(after=after, limit=limit)), verify


def cmd_audit(args: argparse.Namespace) -> int:
    read, _ = _audit_reader(args)
    last = read(None, args.limit)
    if not args.follow:
        emit(last, args.output, HIDDEN["audit"])
        return 0
    # Like tail -f: the last lines, then each new one as it is written.
    for line in itertools.chain(last, follow(read, last[-1]["hash"] if last else GENESIS)):
        if args.output == "json":
            print(orjson.dumps(line).decode(), flush=True)
        else:
            print(f"{cell(line['at'])}  {line['kind']:<16} {line['provider'] or '-':<12} {line['what']}", flush=True)
    return 0


def cmd_audit_verify(args: argparse.Namespace) -> int:
    _, verify = _audit_reader(args)
    result = verify()
    if args.output == "json":
        print_json(result)
    if not result["ok"]:
        print(f"provisioner: audit log broken: {result['problem']}", file=sys.stderr)
        return 1
    if args.output != "json":
        note = " (its start was rotated away)" if result["starts_after_rotation"] else ""
        print(f"audit log intact: {result['lines']} lines{note}")
    return 0


def add_parsers(sub: argparse._SubParsersAction, add: Add, out: With) -> None:
    audit = out(add(sub, "audit", help="show the audit log, or check its hash chain"))
    audit.add_argument("--follow", "-f", action="store_true", help="keep printing lines as they are written")
    audit.add_argument("--limit", type=int, default=50, help="how many of the last lines (default 50)")
    audit.set_defaults(fn=cmd_audit)
    check = audit.add_subparsers(dest="audit")
    out(add(check, "verify", help="check the hash chain; exit 1 if it is broken")).set_defaults(
        fn=cmd_audit_verify)
