"""The CLI's global options, given before the command or after it, and the log level they choose.

``provisioner --config x.yaml run`` and ``provisioner run --config x.yaml``
mean the same, as kubectl and git users expect. argparse alone copies a
subcommand's defaults over the values given before it, so after the command
these options default to "not given" (``SUPPRESS``) and only what is written
there replaces what came before.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

#: (flags, argparse keywords) of each global option; defaults are the main parser's.
GLOBAL: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--config",), {"help": "config file (default: $PROVISIONER_CONFIG, ./provisioner.yaml, the demo)"}),
    (("--controller",), {"help": "controller URL, e.g. sqlite:///var/lib/provisioner/state.db"}),
    (("--url",), {"help": "talk to a running daemon's REST API instead (default: $PROVISIONER_URL)"}),
    (("--token-file",), {"help": "file holding the bearer token for --url, mode 0600 (default: "
                                 "$PROVISIONER_TOKEN_FILE)"}),
    (("--cacert",), {"help": "CA certificate to trust for an https --url"}),
    (("--log-level",), {"help": "debug, info, warning, error or critical (default: $PROVISIONER_LOG, info)"}),
    (("--log-format",), {"choices": ["text", "json"],
                         "help": "text or json lines (default: $PROVISIONER_LOG_FORMAT, text)"}),
]

LEVELS = ("debug", "info", "warning", "error", "critical")


def add_global(ap: argparse.ArgumentParser) -> None:
    """The options on the main parser, before any command."""
    for flags, kw in GLOBAL:
        ap.add_argument(*flags, **kw)


def shared(skip: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A parent for every command's parser: the global options, taken after the command too.

    ``skip``: flags the command defines itself (``sim --config`` names its own config).
    """
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("global options (before or after the command)")
    for flags, kw in GLOBAL:
        if flags[0] not in skip:
            group.add_argument(*flags, default=argparse.SUPPRESS, **kw)
    return parent


class BadLogLevel(ValueError):
    """A log level that is not one: one line naming where it came from."""


def log_level(given: str | None) -> str:
    """The level to log at: ``--log-level``, else ``$PROVISIONER_LOG``, else info; a clear error if unknown."""
    where, value = ("--log-level", given) if given is not None else (
        "PROVISIONER_LOG", os.environ.get("PROVISIONER_LOG"))
    if value is None or value == "":
        return "INFO"
    if value.lower() not in LEVELS:
        raise BadLogLevel(f"{where}={value}: not a log level; use one of {', '.join(LEVELS)}")
    return value.upper()


def log_format(given: str | None) -> str:
    """``--log-format``, else ``$PROVISIONER_LOG_FORMAT``, else text."""
    if given is not None:
        return given
    value = os.environ.get("PROVISIONER_LOG_FORMAT") or "text"
    if value not in ("text", "json"):
        raise BadLogLevel(f"PROVISIONER_LOG_FORMAT={value}: use text or json")
    return value
