"""The CLI's global options, given before the command or after it, and the log level they choose.

``provisioner --config x.yaml run`` and ``provisioner run --config x.yaml``
mean the same, as kubectl and git users expect. argparse alone copies a
subcommand's defaults over the values given before it, so after the command
these options default to "not given" (``SUPPRESS``) and only what is written
there replaces what came before.

Only ``provisioner --help`` explains them: a command's help names them in one
line (``AFTER``) rather than repeating their help under every command.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from typing import Any, Callable, NoReturn

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

#: ``add(subs, name, **kw)``: a command's parser under ``subs``, taking the global options after the command too.
Add = Callable[..., argparse.ArgumentParser]
#: Adds an option a group of commands shares (``-o``, ``--reason``) to a command's parser, and returns it.
With = Callable[[argparse.ArgumentParser], argparse.ArgumentParser]

LEVELS = ("debug", "info", "warning", "error", "critical")

#: What a command's help says of the global options, instead of listing them again.
AFTER = ("global options (" + ", ".join(flags[0] for flags, _ in GLOBAL)
         + ") go before or after the command; provisioner --help explains them")


class Formatter(argparse.HelpFormatter):
    """argparse's, but a paragraph is never broken inside a word with a hyphen (``--log-level``)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """A parser whose error for a missing command names the commands there are, not argparse's ``dest``
    (``the following arguments are required: instance`` after ``provisioner instance``)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kw)

    def error(self, message: str) -> NoReturn:
        for action in self._actions:
            if (isinstance(action, argparse._SubParsersAction) and action.choices
                    and message == f"the following arguments are required: {action.dest}"):
                names = ", ".join(action.choices)
                message = f"missing a command: one of {names} ({self.prog} --help says what each does)"
        super().error(message)


def add_global(ap: argparse.ArgumentParser) -> None:
    """The options on the main parser, before any command."""
    for flags, kw in GLOBAL:
        ap.add_argument(*flags, **kw)


def shared(skip: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A parent for every command's parser: the global options, taken after the command too (and left out
    of its help and usage: ``AFTER`` names them there).

    ``skip``: flags the command defines itself (``sim --config`` names its own config).
    """
    parent = argparse.ArgumentParser(add_help=False)
    for flags, kw in GLOBAL:
        if flags[0] not in skip:
            parent.add_argument(*flags, **{**kw, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS})
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
