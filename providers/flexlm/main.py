"""``provisioner-flexlm <action> -f <input.json>``: the v2 calling convention, exit codes and one JSON answer.

This is the only part that touches the process: arguments, the input file,
the environment, stdout and the exit code. Every failure the provider can
name leaves as one line on stderr and the exit code the contract gives it;
anything else is exit 1 (the daemon retries it by policy) with the type of
the error, never a traceback with local values in it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from providers.flexlm import settings as settings_file
from providers.flexlm.actions import ACTIONS, LEDGER_ACTIONS, PLAIN_ACTIONS
from providers.flexlm.errors import BadInput, BadUsage, ProviderError
from providers.flexlm.ledger import open_ledger
from providers.flexlm.lmutil import lmstat_reader

PROG = "provisioner-flexlm"
USAGE = f"usage: {PROG} {{{'|'.join(ACTIONS)}}} -f INPUT.json"


def main(argv: list[str] | None = None) -> int:
    try:
        out = run(sys.argv[1:] if argv is None else argv, dict(os.environ))
    except ProviderError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the contract's "other" exit, with no detail that could leak
        print(f"{PROG}: internal error: {type(exc).__name__}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def run(argv: list[str], environ: dict[str, str]) -> dict[str, Any]:
    action, doc = _command_line(argv)
    if action in ("request", "return") and "token" not in doc and environ.get("PROVISIONER_TOKEN"):
        doc = {**doc, "token": environ["PROVISIONER_TOKEN"]}
    settings = settings_file.load(environ)
    read = lmstat_reader(settings.lmutil, environ)
    if action in PLAIN_ACTIONS:
        return PLAIN_ACTIONS[action](settings, None, read, doc)
    ledger = open_ledger(settings.ledger)
    try:
        return LEDGER_ACTIONS[action](settings, ledger, read, doc)
    finally:
        ledger.close()


def _command_line(argv: list[str]) -> tuple[str, dict[str, Any]]:
    if len(argv) != 3 or argv[1] != "-f" or argv[0] not in ACTIONS:
        raise BadUsage(USAGE)
    try:
        with open(argv[2], "rb") as f:
            doc = json.load(f)
    except OSError as exc:
        raise BadUsage(f"cannot read input {argv[2]}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BadInput(f"input {argv[2]} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadInput(f"input {argv[2]} is not a JSON object")
    return argv[0], doc


if __name__ == "__main__":
    sys.exit(main())
