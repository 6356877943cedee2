"""The daemon's own commands: ``run`` it, have it ``reload`` its config, ``check-config`` a file."""

from __future__ import annotations

import argparse
import logging
import sys
import threading

from persistence.private import private_dir
from provisioner.cli import reload as reload_cli
from provisioner.cli.checkconfig import check_config_main
from provisioner.cli.demo import default_home, revive_moved, sim_admin
from provisioner.cli.options import Add
from provisioner.cli.stores import check_run_store
from provisioner.cli.where import config_path, remote, resolve_config
from provisioner.daemon.pidfile import pid_file

log = logging.getLogger("provisioner")


def cmd_run(args: argparse.Namespace) -> int:
    from provisioner.daemon.memory import fix_mmap_threshold, limit_arenas
    from provisioner.daemon.resetguard import EXIT, ControllerReset
    from provisioner.daemon.root import Daemon, connect, stop_signals

    fix_mmap_threshold()
    limit_arenas()
    cfg, home, is_demo = resolve_config(args.config)
    if not is_demo:
        check_run_store(cfg.controller.url, home)
    private_dir(home)
    reload = threading.Event()
    with stop_signals(reload) as done, pid_file(home):
        controller = connect(cfg, done)
        if controller is None:
            return 0
        daemon = Daemon(cfg, home, controller=controller, serve_api=True, accept_reset=args.accept_reset_controller,
                        config_file=None if is_demo else config_path(args.config), listen=args.listen)
        daemon.reload_asked = reload
        workload = None
        if is_demo:
            from sim.workload import DemoWorkload  # the demo's scheduler only: a configured daemon never loads it

            log.info("no config given: running the built-in demo with state in %s", home)
            for name in revive_moved(controller, cfg):
                log.warning("demo: provider %s resumed: a run from another checkout disabled it, its script "
                            "being where that checkout had it", name)
            workload = DemoWorkload(controller, set_license_use=lambda n: sim_admin(
                home, "sim-licenses", "set-in-use", "vcs", str(n)))
        try:
            return daemon.run_until(done, extra_stop=workload.stop if workload else None,
                                    on_started=workload.start if workload else None)
        except ControllerReset as exc:
            print(f"provisioner: {exc}", file=sys.stderr)
            return EXIT


def cmd_reload(args: argparse.Namespace) -> int:
    """Have the running daemon read its config again (``provisioner/cli/reload.py``)."""
    r = remote(args)
    if r is not None:
        return reload_cli.over_rest(r)
    return reload_cli.by_signal(config_path(args.config), default_home())


def cmd_check_config(args: argparse.Namespace) -> int:
    return check_config_main(args.file, check_files=not args.no_file_checks)


def add_parsers(sub: argparse._SubParsersAction, add: Add) -> None:
    p = add(sub, "run", help="run the daemon", description="Run the daemon on the config of --config (else "
            "$PROVISIONER_CONFIG, else ./provisioner.yaml, else the built-in demo). SIGTERM or Ctrl-C stops it; "
            "SIGHUP reloads its config.")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="serve the REST API here instead of api.listen (default 127.0.0.1:8787); port 0 picks a "
                        "free one, which the log names (api: serving URL)")
    p.add_argument("--accept-reset-controller", action="store_true",
                   help="start even though the controller lacks facts this daemon saw committed (docs/recovery.md)")
    p.set_defaults(fn=cmd_run)
    add(sub, "reload", help="have the running daemon read its config again (as SIGHUP does)",
        description="Have the running daemon read its config file again: providers added, removed or changed, "
                    "policy and budget, without losing state; an invalid file changes nothing. With --url, through "
                    "its REST API (POST /v1/reload, an operator token), which answers what changed; else the config "
                    "is checked here and the daemon on its home gets SIGHUP.").set_defaults(fn=cmd_reload)
    p = add(sub, "check-config", help="check a config file")
    p.add_argument("file")
    p.add_argument("--no-file-checks", action="store_true",
                   help="leave out the checks of the files it names (scripts, env files, tokens, TLS): for a "
                        "config written for another host, or the example on a fresh machine")
    p.set_defaults(fn=cmd_check_config)
