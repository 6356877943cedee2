"""``provisioner-slurm``: the Slurm bridge's commands.

``resume``, ``suspend`` and ``resume-fail`` are Slurm's ResumeProgram,
SuspendProgram and ResumeFailProgram (one-line wrappers in slurm.conf, see
docs/slurm.md): each records what Slurm asked in the controller and exits.
``sync`` is the long-running service that reads Slurm's nodes and jobs.
Errors are one line on stderr and a non-zero exit: 1 when the controller
cannot be reached or a name is mapped by no node set (the others are
recorded), 2 for a bad config or hostlist.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from config.hostlists import HostlistError, compress_hostlist
from config.load import load_config
from config.located import ConfigError
from config.models import Config
from messages.errors import ControllerUnavailable
from persistence.controller import open_controller
from slurm.power import asked, resume_timeout

PROG = "provisioner-slurm"


class Failed(Exception):
    """One line for stderr, and the exit code."""

    def __init__(self, line: str, code: int = 1) -> None:
        super().__init__(line)
        self.code = code


def config(arg: str | None) -> Config:
    """The daemon's config (``--config``, else ``$PROVISIONER_CONFIG``, else ./provisioner.yaml), with its slurm
    section."""
    path = Path(arg) if arg else Path(os.environ["PROVISIONER_CONFIG"]) if os.environ.get("PROVISIONER_CONFIG") \
        else Path("provisioner.yaml")
    if not path.exists():
        raise Failed(f"no config: {path} does not exist (give --config FILE or set PROVISIONER_CONFIG)", 2)
    try:
        cfg = load_config(path, check_files=False)
    except ConfigError as exc:
        raise Failed(str(exc).splitlines()[0], 2) from None
    if cfg.slurm is None:
        raise Failed(f"{path}: no slurm section: the bridge needs one (docs/slurm.md)", 2)
    return cfg


def power(program: str, hostlist: str, cfg: Config) -> int:
    """Record what Slurm asked of ``hostlist``'s nodes; never waits for a host."""
    assert cfg.slurm is not None
    try:
        result = asked(program, hostlist, cfg.slurm, resume_timeout() if program == "resume" else None, time.time())
    except HostlistError as exc:
        raise Failed(f"{program} {hostlist}: {exc}", 2) from None
    if result.facts:
        try:
            controller = open_controller(cfg.controller.url)
            try:
                controller.append(result.facts)
            finally:
                controller.close()
        except ControllerUnavailable as exc:
            raise Failed(f"{program} {hostlist}: nothing recorded, the controller is unreachable: {exc}") from None
    if result.unmapped:
        raise Failed(f"{program}: no node set of the config's slurm.nodes has {compress_hostlist(result.unmapped)}"
                     + (" (the others are recorded)" if result.facts else ""))
    return 0


def sync(cfg: Config) -> int:
    """The sync service: a round every ``slurm.sync_every`` until SIGTERM or SIGINT."""
    import logging
    import signal
    import threading

    from slurm.commands import LiveSlurm
    from slurm.license_commands import LiveLicenses
    from slurm.sync import Sync

    assert cfg.slurm is not None
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        controller = open_controller(cfg.controller.url)
    except ControllerUnavailable as exc:
        raise Failed(f"sync: the controller is unreachable: {exc}") from None
    try:
        live = (LiveLicenses if cfg.slurm.licenses else LiveSlurm)(timeout=cfg.slurm.command_timeout)
        Sync(cfg, controller, live).run(stopping)
    finally:
        controller.close()
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description="Connects Slurm to the provisioner daemon.")
    top.add_argument("--config", help="the daemon's config (default: $PROVISIONER_CONFIG, ./provisioner.yaml)")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, what in (("resume", "ResumeProgram: make hosts for these nodes"),
                       ("suspend", "SuspendProgram: give back the hosts of these nodes"),
                       ("resume-fail", "ResumeFailProgram: Slurm gave up on these nodes")):
        cmd = sub.add_parser(name, help=what, description=what)
        cmd.add_argument("hostlist", help="Slurm's node list, e.g. cloud[1-4]")
        cmd.add_argument("--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    what = "the service: Slurm's nodes and jobs to the daemon, every slurm.sync_every, drift fixed"
    cmd = sub.add_parser("sync", help=what, description=what)
    cmd.add_argument("--config", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cfg = config(args.config)
        if args.command in ("resume", "suspend", "resume-fail"):
            return power(args.command, args.hostlist, cfg)
        if args.command == "sync":
            return sync(cfg)
        raise Failed(f"unknown command {args.command}", 2)
    except Failed as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
