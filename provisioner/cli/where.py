"""Where a command finds the state: the config and the daemon's home, the controller, or a daemon's REST API.

Views, inputs and actions ask the operator's surface (``provisioner.surface``):
``source`` gives the remote one when ``--url`` (or ``$PROVISIONER_URL``) is
set, else the direct one on the controller of the config. A command that only
reads never invents the store it reads (``provisioner.cli.stores``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from config.load import load_config
from config.models import Config
from persistence.controller import open_controller
from provisioner.cli.client import Remote, read_token
from provisioner.cli.demo import default_home, demo_config
from provisioner.cli.direct import Direct
from provisioner.cli.stores import missing_sqlite, nothing_here
from provisioner.surface.protocol import Surface


class CliError(Exception):
    """A user-facing failure: printed as one line, exit 1."""


def config_path(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    env = os.environ.get("PROVISIONER_CONFIG")
    if env:
        return Path(env)
    local = Path("provisioner.yaml")
    return local if local.exists() else None


def resolve_config(arg: str | None) -> tuple[Config, Path, bool]:
    """The config to use, the daemon's home, and whether it is the built-in demo."""
    path = config_path(arg)
    if path is None:
        home = default_home()
        return demo_config(home), home, True
    if not path.exists():
        raise CliError(f"{path}: no such config file")
    cfg = load_config(path)
    home = cfg.home or default_home()
    return cfg, home, False


def direct(args: argparse.Namespace, store: bool = True) -> tuple[str, Path, Config | None]:
    """The controller URL, the daemon's home (where its audit log is) and its config, for direct access.

    A command that only reads (``reads_only``) never invents the store it reads: with no config, no
    controller and no state in the default home, or with a SQLite file that is not there, it says so
    (``store``: whether the command reads the store at all; the audit log lives in the home).
    """
    reads = getattr(args, "reads_only", False) and store
    if args.controller and not args.config:
        url, home, cfg = args.controller, default_home(), None
        if reads and (missing := missing_sqlite(url)) is not None:
            raise CliError(f"--controller {url}: no such database file {missing}: nothing to show "
                           "(a view creates no store)")
        return url, home, cfg
    path = config_path(args.config)
    if path is None:
        home = default_home()
        url = f"sqlite:///{(home / 'state.db').resolve()}"
        if reads and missing_sqlite(url) is not None:
            raise CliError(nothing_here(home))
        return url, home, None
    if not path.exists():
        raise CliError(f"{path}: no such config file")
    cfg = load_config(path, check_files=False)
    url = args.controller or cfg.controller.url
    if reads and (missing := missing_sqlite(url)) is not None:
        raise CliError(f"{path}: controller.url names {missing}, which does not exist: nothing to show "
                       "(a view creates no store; has the daemon run with this config?)")
    return url, cfg.home or default_home(), cfg


def remote(args: argparse.Namespace) -> Remote | None:
    url = args.url or os.environ.get("PROVISIONER_URL")
    if not url:
        return None
    token_file = args.token_file or os.environ.get("PROVISIONER_TOKEN_FILE")
    token = read_token(Path(token_file)) if token_file else None
    return Remote(url, token, cafile=args.cacert)


def source(args: argparse.Namespace) -> Surface:
    """The operator's surface the command asks: a daemon's over REST with ``--url``, else the controller's."""
    r = remote(args)
    if r is not None:
        return r
    url, home, cfg = direct(args)
    return Direct(open_controller(url), home, cfg, url)


class closing:
    """``with closing(source(args)) as s``: the surface (or controller) closed when the command is done."""

    def __init__(self, c: Any) -> None:
        self.c = c

    def __enter__(self) -> Any:
        return self.c

    def __exit__(self, *exc: object) -> None:
        self.c.close()
