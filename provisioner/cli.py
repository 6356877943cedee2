"""``provisioner``: run the daemon, check a config, feed demand and host events, show state.

Views and inputs talk to the controller directly, so they work with no
daemon running. Errors are one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import orjson
from pydantic import ValidationError

from lease.port import ControllerUnavailable
from messages.demand import DemandSnapshot
from persistence.controller import open_controller
from persistence.port import Controller
from provisioner import views
from provisioner.config import Config
from provisioner.configfile import ConfigError, check_config_main, load_config
from provisioner.demo import default_home, demo_config, sim_admin

log = logging.getLogger("provisioner")


class CliError(Exception):
    """A user-facing failure: printed as one line, exit 1."""


def _config_path(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    env = os.environ.get("PROVISIONER_CONFIG")
    if env:
        return Path(env)
    local = Path("provisioner.yaml")
    return local if local.exists() else None


def resolve_config(arg: str | None) -> tuple[Config, Path, bool]:
    """The config to use, the daemon's home, and whether it is the built-in demo."""
    path = _config_path(arg)
    if path is None:
        home = default_home()
        return demo_config(home), home, True
    if not path.exists():
        raise CliError(f"{path}: no such config file")
    cfg = load_config(path)
    home = cfg.home or default_home()
    return cfg, home, False


def _controller(args: argparse.Namespace) -> Controller:
    if args.controller:
        return open_controller(args.controller)
    path = _config_path(args.config)
    if path is None:
        url = f"sqlite:///{(default_home() / 'state.db').resolve()}"
    else:
        if not path.exists():
            raise CliError(f"{path}: no such config file")
        url = load_config(path, check_files=False).controller.url
    return open_controller(url)


# --- commands -------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from provisioner.daemon import Daemon
    from sim.workload import DemoWorkload

    cfg, home, is_demo = resolve_config(args.config)
    home.mkdir(parents=True, exist_ok=True)
    daemon = Daemon(cfg, home)
    workload = None
    if is_demo:
        log.info("no config given: running the built-in demo with state in %s", home)
        workload = DemoWorkload(daemon.controller,
                                set_license_use=lambda n: sim_admin(home, "sim-licenses", "set-in-use", "vcs", str(n)))
        workload.start()
    return daemon.run_until_signal(extra_stop=workload.stop if workload else None)


def cmd_check_config(args: argparse.Namespace) -> int:
    return check_config_main(args.file)


def cmd_demand_put(args: argparse.Namespace) -> int:
    data = sys.stdin.buffer.read() if args.file == "-" else _read(args.file)
    where = "stdin" if args.file == "-" else args.file
    try:
        doc = orjson.loads(data) if data.lstrip()[:1] in (b"{", b"[") else _yaml(data, where)
        snapshot = DemandSnapshot.model_validate(doc)
    except orjson.JSONDecodeError as exc:
        raise CliError(f"{where}: not valid JSON: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"])
        raise CliError(f"{where}: {path}: {first['msg']}" + (f" ({len(exc.errors()) - 1} more)"
                                                               if len(exc.errors()) > 1 else "")) from None
    with _closing(_controller(args)) as c:
        stored = c.put_demand(snapshot)
    print(f"demand {stored.seq} stored: {len(stored.items)} items")
    return 0


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


def _yaml(data: bytes, where: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise CliError(f"{where}: not valid JSON or YAML: {exc}") from None


def cmd_demand_show(args: argparse.Namespace) -> int:
    with _closing(_controller(args)) as c:
        demand = c.get_demand()
    if args.output == "json":
        print(orjson.dumps(demand.to_dict() if demand else None, option=orjson.OPT_INDENT_2).decode())
        return 0
    if demand is None:
        print("no demand yet")
        return 0
    print(f"demand {demand.seq}")
    _table([{"id": i.id, "kind": i.kind, "count": i.count,
             "wants": getattr(i, "resource", None) or getattr(i, "template", None)
             or " ".join(f"{k}{v if v[:1] in '<>=' else '=' + v}" for k, v in i.select.items()) or "any"}
            for i in demand.items])
    return 0


def cmd_host(args: argparse.Namespace) -> int:
    with _closing(_controller(args)) as c:
        ev = c.post_host_event(args.name, args.event, time.time())
    print(f"host event {ev.seq}: {ev.name} {ev.event}")
    return 0


def _view(fn: Callable[[Any, Controller], list[dict[str, Any]]]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        with _closing(_controller(args)) as c:
            rows = fn(views.replay(c), c)
        _emit(rows, args.output)
        return 0

    return run


cmd_providers = _view(lambda p, c: views.providers(p, c.leases.all(), time.time()))
cmd_requests = _view(lambda p, c: views.requests(p))
cmd_instances = _view(lambda p, c: views.instances(p, time.time()))
cmd_resources = _view(lambda p, c: views.resources(p))


# --- output ---------------------------------------------------------------------------


def _emit(rows: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    else:
        _table(rows)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value > 1e9:  # an epoch time
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        return f"{value:.4g}"
    return str(value)


def _table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


class _closing:
    def __init__(self, c: Controller) -> None:
        self.c = c

    def __enter__(self) -> Controller:
        return self.c

    def __exit__(self, *exc: object) -> None:
        self.c.close()


# --- parser ---------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="provisioner", description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="config file (default: $PROVISIONER_CONFIG, ./provisioner.yaml, the demo)")
    ap.add_argument("--controller", help="controller URL, e.g. sqlite:///var/lib/provisioner/state.db")
    ap.add_argument("--log-level", default=os.environ.get("PROVISIONER_LOG", "INFO"))
    sub = ap.add_subparsers(dest="command", required=True)

    def out(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("-o", "--output", choices=["table", "json"], default="table")
        return p

    sub.add_parser("run", help="run the daemon").set_defaults(fn=cmd_run)
    p = sub.add_parser("check-config", help="check a config file")
    p.add_argument("file")
    p.set_defaults(fn=cmd_check_config)
    demand = sub.add_parser("demand", help="put or show the demand").add_subparsers(dest="demand", required=True)
    p = demand.add_parser("put", help="replace the demand with a snapshot (JSON or YAML file, or - for stdin)")
    p.add_argument("file")
    p.set_defaults(fn=cmd_demand_put)
    out(demand.add_parser("show", help="show the current demand")).set_defaults(fn=cmd_demand_show)
    p = sub.add_parser("host", help="report a host event as the scheduler would")
    p.add_argument("event", choices=["joined", "idle", "busy"])
    p.add_argument("name", help="the machine name the provider reported")
    p.set_defaults(fn=cmd_host)
    for name, fn in (("providers", cmd_providers), ("requests", cmd_requests), ("instances", cmd_instances),
                     ("resources", cmd_resources)):
        out(sub.add_parser(name, help=f"list {name}")).set_defaults(fn=fn)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        return args.fn(args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (CliError, ControllerUnavailable, ValueError) as exc:
        print(f"provisioner: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
