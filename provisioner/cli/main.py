"""provisioner: run the daemon, check a config, feed demand and host events, show state, steer.

Views, inputs and actions talk to the controller directly, so they work with
no daemon running; with ``--url`` they go through a daemon's REST API
instead (``--token-file`` for its bearer token). Either way they show the same
rows and take the same actions. Errors are one line on stderr and a non-zero
exit.
"""

from __future__ import annotations

import argparse
import getpass
import itertools
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError

from config.load import load_config
from config.located import ConfigError, one_line, shown
from config.models import Config, PolicyConfig
from messages.demand import DemandSnapshot, HostEvent, HostEventKind, SupplySnapshot
from messages.errors import ControllerUnavailable
from messages.facts import Fact
from persistence.controller import open_controller
from persistence.port import Controller
from persistence.private import private_dir
from persistence.snapshot import SnapshotStore
from policy.settings import plan_settings
from provisioner.api.auth import TokensError
from provisioner.api.models import ActionBody
from provisioner.api.server import ApiStartError
from provisioner.audit.log import GENESIS, AuditError, AuditLog, follow
from provisioner.cli import bulk as bulk_cli
from provisioner.cli import logging_setup
from provisioner.cli import reload as reload_cli
from provisioner.cli.checkconfig import check_config_main
from provisioner.cli.client import ClientError, Remote, read_token
from provisioner.cli.demo import default_home, demo_config, sim_admin
from provisioner.cli.documents import read_document
from provisioner.cli.explained import decisions_text
from provisioner.cli.options import AFTER, BadLogLevel, Parser, add_global, log_format, log_level, shared
from provisioner.cli.stores import WHERE, NoStore, check_run_store, missing_sqlite, nothing_here
from provisioner.cli.trace_export import ExportError
from provisioner.daemon.pidfile import pid_file
from provisioner.read.model import ReadModel
from provisioner.surface.local import Local
from provisioner.surface.operations import VIEWS, CommitFailed, Conflict, NotFound, Operations
from provisioner.surface.protocol import Steer, Surface
from provisioner.version import version

log = logging.getLogger("provisioner")

#: A document model the CLI reads from a file.
M = TypeVar("M", bound=BaseModel)


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


def _direct(args: argparse.Namespace, store: bool = True) -> tuple[str, Path, Config | None]:
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
    path = _config_path(args.config)
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


class Direct(Local):
    """The operator's surface on the controller itself: ``Local`` on Operations that commit straight to it,
    acting as the user who runs the CLI; facts it appends it also audits, as the daemon does.

    Views start from the daemon's snapshot of this log when its home holds one
    (as the daemon itself starts): a view of a long log then reads only the
    facts written since, not every fact from the first. A snapshot it cannot
    trust, or read, costs a warning and a full replay; the rows are the same.
    """

    def __init__(self, controller: Controller, home: Path, cfg: Config | None, url: str) -> None:
        self.controller = controller
        self.audit_log = AuditLog(home / "audit.log")
        billing = plan_settings(cfg.policy, cfg.budget, cfg.providers).billing_units if cfg else None
        snapshots = SnapshotStore.for_controller(home, url, quiet=True)
        ops = Operations(ReadModel(controller, snapshots), controller, self._commit, self.audit_log,
                         billing_units=billing,
                         max_demand_items=cfg.policy.max_demand_items if cfg else PolicyConfig().max_demand_items)
        super().__init__(ops, _user())

    def _commit(self, facts: list[Fact]) -> list[Fact]:
        result = self.controller.append(facts)
        if result.refused:
            raise CommitFailed("; ".join(r.reason for r in result.refused))
        self.audit_log.catch_up(self.controller)
        return result.accepted

    def close(self) -> None:
        self.controller.close()


def _user() -> str:
    try:
        return f"{getpass.getuser()} via cli"
    except (KeyError, OSError):
        return "cli"




def _remote(args: argparse.Namespace) -> Remote | None:
    url = args.url or os.environ.get("PROVISIONER_URL")
    if not url:
        return None
    token_file = args.token_file or os.environ.get("PROVISIONER_TOKEN_FILE")
    token = read_token(Path(token_file)) if token_file else None
    return Remote(url, token, cafile=args.cacert)


def _source(args: argparse.Namespace) -> Surface:
    remote = _remote(args)
    if remote is not None:
        return remote
    url, home, cfg = _direct(args)
    return Direct(open_controller(url), home, cfg, url)


# --- commands -------------------------------------------------------------------------


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
                        config_file=None if is_demo else _config_path(args.config), listen=args.listen)
        daemon.reload_asked = reload
        workload = None
        if is_demo:
            from sim.workload import DemoWorkload  # the demo's scheduler only: a configured daemon never loads it

            log.info("no config given: running the built-in demo with state in %s", home)
            workload = DemoWorkload(controller, set_license_use=lambda n: sim_admin(
                home, "sim-licenses", "set-in-use", "vcs", str(n)))
        try:
            return daemon.run_until(done, extra_stop=workload.stop if workload else None,
                                    on_started=workload.start if workload else None)
        except ControllerReset as exc:
            print(f"provisioner: {exc}", file=sys.stderr)
            return EXIT


def cmd_reload(args: argparse.Namespace) -> int:
    """Have the running daemon read its config again (``provisioner/reload_cli.py``)."""
    remote = _remote(args)
    if remote is not None:
        return reload_cli.over_rest(remote)
    return reload_cli.by_signal(_config_path(args.config), default_home())


def cmd_check_config(args: argparse.Namespace) -> int:
    return check_config_main(args.file, check_files=not args.no_file_checks)


def cmd_demand_put(args: argparse.Namespace) -> int:
    snapshot = _document(args.file, DemandSnapshot, 'a demand snapshot ({"items": [...]})')
    with _closing(_source(args)) as s:
        stored = s.put_demand(snapshot)
    print(f"demand {stored['seq']} stored: {len(stored['items'])} items")
    for line in stored.get("warnings", []):
        print(f"provisioner: warning: {line}", file=sys.stderr)
    return 0


def cmd_supply_put(args: argparse.Namespace) -> int:
    view = _document(args.file, SupplySnapshot, 'a supply view ({"hosts": [...]})')
    with _closing(_source(args)) as s:
        stored = s.put_supply(view)
    print(f"supply view {stored['seq']} stored: {len(stored['hosts'])} hosts")
    return 0


def _document(file: str, model: type[M], what: str) -> M:
    """A JSON or YAML document (a file, or - for stdin) as ``model``; one line naming the place if not."""
    return read_document(file, model, what)


def cmd_demand_show(args: argparse.Namespace) -> int:
    with _closing(_source(args)) as s:
        demand = s.demand()
    if args.output == "json":
        print(orjson.dumps(demand, option=orjson.OPT_INDENT_2).decode())
        return 0
    if demand is None:
        print("no demand yet")
        return 0
    print(f"demand {demand['seq']}")
    _table([{"id": i["id"], "kind": i["kind"], "count": i["count"],
             "wants": i.get("resource") or i.get("template")
             or " ".join(f"{k}{v if v[:1] in '<>=' else '=' + v}" for k, v in i.get("select", {}).items()) or "any"}
            for i in demand["items"]])
    return 0


def cmd_host(args: argparse.Namespace) -> int:
    # Checked here, as the API checks its path: over REST too a bad name is said before anything is sent.
    _checked(HostEvent, {"name": args.name, "event": args.event, "time": 0.0, "provider": args.provider},
             {"name": "host name", "provider": "--provider"})
    with _closing(_source(args)) as s:
        ev = s.host_event(args.name, cast(HostEventKind, args.event), args.provider)  # argparse's choices
    print(f"host event {ev['seq']}: {ev['name']} {ev['event']}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    where = {f: getattr(args, f) for f in VIEWS[args.view].filters if getattr(args, f, None) is not None}
    with _closing(_source(args)) as s:
        rows = s.rows(args.view, **where)
    if args.view == "decisions" and args.output != "json":
        print(decisions_text(rows))  # a block per decision: its candidates do not fit a table
        return 0
    _emit(rows, args.output, HIDDEN.get(args.view, ()))
    return 0


def _checked(model: type[BaseModel], fields: dict[str, Any], named: dict[str, str], reword: Any = None) -> None:
    """Refuse arguments ``model`` refuses, in one line naming the argument (``named``: field -> option)."""
    try:
        model.model_validate(fields)
    except ValidationError as exc:
        raise CliError(one_line(exc, named=named, reword=reword)) from None


def _reason(args: argparse.Namespace) -> str:
    """``--reason`` as the REST API takes it (one line of text, at most 500 characters), in both modes."""
    _checked(ActionBody, {"reason": args.reason}, {"reason": "--reason"},
             lambda kind, _, value: f"not valid: {shown(value)} (one line of text, no control characters)"
             if kind == "string_pattern_mismatch" else None)
    return args.reason


def cmd_steer(args: argparse.Namespace) -> int:
    _reason(args)
    with _closing(_source(args)) as s:
        done = s.steer(args.name, cast(Steer, args.action), args.reason)  # argparse's choices
    print(done["message"])
    return 0


def cmd_return_instance(args: argparse.Namespace) -> int:
    _reason(args)
    with _closing(_source(args)) as s:
        done = s.return_instance(args.id, args.reason)
    print(done["message"])
    return 0


def cmd_bulk(args: argparse.Namespace) -> int:
    """``instances return|drain``: every matching host (``provisioner/bulk_cli.py``)."""
    _reason(args)
    with _closing(_source(args)) as s:
        return bulk_cli.run(args, s, CliError, _table,
                            lambda doc: print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()))


def cmd_return_orphan(args: argparse.Namespace) -> int:
    _reason(args)
    with _closing(_source(args)) as s:
        done = s.return_orphan(args.id, args.reason)
    print(done["message"])
    return 0


def _audit_reader(args: argparse.Namespace) -> tuple[Any, Any]:
    """``read(after, limit)`` and ``verify()`` of the daemon's audit log (or of the local file)."""
    remote = _remote(args)
    if remote is not None:
        return remote.audit, remote.audit_verify
    url, home, _ = _direct(args, store=False)
    if not (home / "audit.log").exists():
        raise CliError(f"no audit log in {home} (audit.log): nothing written there yet. Give {WHERE} for "
                       "the daemon's")
    log_ = AuditLog(home / "audit.log")

    def verify() -> dict[str, Any]:
        with _closing(open_controller(url)) as controller:
            return log_.verify(controller).to_dict()

    return (lambda after, limit: log_.read(after=after, limit=limit)), verify


def cmd_audit(args: argparse.Namespace) -> int:
    read, _ = _audit_reader(args)
    last = read(None, args.limit)
    if not args.follow:
        _emit(last, args.output, HIDDEN["audit"])
        return 0
    # Like tail -f: the last lines, then each new one as it is written.
    for line in itertools.chain(last, follow(read, last[-1]["hash"] if last else GENESIS)):
        if args.output == "json":
            print(orjson.dumps(line).decode(), flush=True)
        else:
            print(f"{_cell(line['at'])}  {line['kind']:<16} {line['provider'] or '-':<12} {line['what']}", flush=True)
    return 0


def cmd_audit_verify(args: argparse.Namespace) -> int:
    _, verify = _audit_reader(args)
    result = verify()
    if args.output == "json":
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    if not result["ok"]:
        print(f"provisioner: audit log broken: {result['problem']}", file=sys.stderr)
        return 1
    if args.output != "json":
        note = " (its start was rotated away)" if result["starts_after_rotation"] else ""
        print(f"audit log intact: {result['lines']} lines{note}")
    return 0


def cmd_import_lsf(args: argparse.Namespace) -> int:
    """``provisioner import-lsf FILE``: the providers: section for an LSF hostProviders.json, on stdout."""
    from provisioner.cli.lsf_import import LsfImportError, bases_from_env, providers_section

    try:
        text = Path(args.file).read_text(encoding="utf-8")
        print(providers_section(text, source=args.file, **bases_from_env(os.environ)), end="")
    except OSError as exc:
        raise CliError(f"{args.file}: {exc.strerror or exc}") from None
    except (LsfImportError, UnicodeDecodeError) as exc:
        raise CliError(str(exc)) from None
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from provisioner.cli.schema import schema

    print(orjson.dumps(schema(args.what), option=orjson.OPT_INDENT_2).decode())
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """A dry run of one planning round on a demand file (provisioner/plan.py)."""
    from provisioner.cli.plan import plan_main

    if _remote(args) is not None:
        raise CliError("plan reads the controller itself: give --config or --controller, not --url")
    url, home, cfg = _direct(args)
    return plan_main(args.demand, url, home, cfg, args.empty, args.output)


def cmd_sim(args: argparse.Namespace) -> int:
    """Replay a demand trace against simulated providers under one or more policy variants."""
    from sim.from_daemon import load_any
    from sim.report import NoPlots, simulate, table, variants, write_outputs
    from sim.trace import read_trace

    if not args.config:
        raise CliError("sim: give --config FILE: a simulator config (examples/sim.yaml) or the daemon's own")
    _, raw, daemons = load_any(Path(args.config))
    if daemons:
        print(f"{args.config}: the daemon's config: {len(raw['providers'])} providers as they describe themselves, "
              "its policy and budget (instance, controller and api are not used)")
    trace = read_trace(Path(args.trace))
    chosen = variants(args.policy_set, args.compare)
    results = simulate(raw, trace, chosen, "--policy-set/--compare")
    out = Path(args.out)
    try:
        written, no_plots = write_outputs(out, results, trace, args.config, plots=not args.no_plots), None
    except NoPlots as exc:  # the report is written: show it, then say why the plots are missing
        written, no_plots = [out / "report.json", out / "series.csv"], exc
    print(f"{trace.file}: {len(trace.steps)} steps over {trace.span / 3600:.1f} h, {len(results)} variant(s)")
    for line in dict.fromkeys(w for r in results for w in r.warnings):
        print(f"warning: {line}")
    print(table(results))
    print(f"wrote {', '.join(str(p.relative_to(out)) for p in written)} in {out}")
    if no_plots is not None:
        raise CliError(str(no_plots))
    return 0


def cmd_trace_generate(args: argparse.Namespace) -> int:
    """Write a synthetic demand trace (daily cycle, bursts, seeded)."""
    from sim.synth import Shape, generate, parse_load, problems
    from sim.trace import DEFAULT_START, write_trace

    loads = [parse_load("hosts", h) for h in args.hosts] + [parse_load("units", u) for u in args.units] + [
        parse_load("bundles", b) for b in args.bundles]
    if not loads:
        raise CliError("trace generate: give at least one --hosts, --units or --bundles item")
    start = DEFAULT_START
    if args.start:
        from sim.trace import Header

        try:
            start = Header.model_validate({"start": args.start}).start
        except ValidationError as exc:
            raise CliError(one_line(exc, named={"start": "--start"})) from None
    shape = Shape(days=args.days, step=_duration("--step", args.step), weekend=args.weekend, noise=args.noise,
                  bursts_per_day=args.bursts_per_day, burst_size=args.burst_size,
                  failovers=tuple(_pair(f, int, "--failover PROVIDER:COUNT") for f in args.failover),
                  lost=tuple(_pair(x, float, "--lost PROVIDER:PER_DAY") for x in args.lost))
    wrong = problems(loads, shape)
    if wrong:
        raise CliError("trace generate: " + "; ".join(wrong))
    note = f"provisioner trace generate --seed {args.seed}"
    n = write_trace(Path(args.out), generate(loads, shape, start, args.seed), start, note)
    print(f"{args.out}: {n} steps over {args.days:g} days")
    return 0


def cmd_trace_export(args: argparse.Namespace) -> int:
    """The controller's past demand as a simulator trace (``provisioner/trace_export.py``)."""
    from provisioner.cli.trace_export import export_main

    if _remote(args) is not None:
        raise CliError("trace export reads the controller itself: give --config or --controller, not --url")
    since, step = _duration("--since", args.since), _duration("--step", args.step)
    url, _, _ = _direct(args)
    return export_main(url, Path(args.out), since, step)


def _duration(option: str, value: str) -> float:
    from config.values import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}") from None


def _pair(spec: str, kind: type, form: str) -> tuple[str, Any]:
    name, sep, value = spec.partition(":")
    try:
        if not sep or not name:
            raise ValueError
        return name, kind(value)
    except ValueError:
        raise CliError(f"{spec!r}: expected {form}") from None


# --- output ---------------------------------------------------------------------------


#: Columns too wide for a table; ``-o json`` has them.
HIDDEN: dict[str, tuple[str, ...]] = {
    "providers": ("description", "status_reason"),
    "daemons": ("roles",),
    "audit": ("id", "lease", "fence", "payload", "prev", "hash"),
}


def _emit(rows: list[dict[str, Any]], output: str, hidden: Sequence[str] = ()) -> None:
    if output == "json":
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    else:
        _table([{k: v for k, v in r.items() if k not in hidden} for r in rows])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_brief(v) for v in value) or "-"
    if isinstance(value, float):
        if value > 1e9:  # an epoch time
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        return f"{value:.4g}"
    return str(value)


def _brief(value: Any) -> str:
    """A chosen or rejected entry of a decision, in a few words."""
    if isinstance(value, dict):
        if "reason" in value:
            return f"{value.get('provider')}: {value['reason']}"
        what = value.get("template") or value.get("resource")
        return f"{value.get('count')} {value.get('provider')}" + (f"/{what}" if what else "")
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
    def __init__(self, c: Any) -> None:
        self.c = c

    def __enter__(self) -> Any:
        return self.c

    def __exit__(self, *exc: object) -> None:
        self.c.close()


# --- parser ---------------------------------------------------------------------------


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
    demand = add(sub, "demand", help="put or show the demand").add_subparsers(dest="demand", required=True)
    p = add(demand, "put", help="replace the demand with a snapshot (JSON or YAML file, or - for stdin)")
    p.add_argument("file")
    p.set_defaults(fn=cmd_demand_put)
    out(add(demand, "show", help="show the current demand")).set_defaults(fn=cmd_demand_show, reads_only=True)
    p = add(sub, "host", help="report a host event as the scheduler would")
    p.add_argument("event", choices=["joined", "idle", "busy"])
    p.add_argument("name", help="the machine name the provider reported")
    p.add_argument("--provider", help="whose host it is (needed when two providers have a live host of that name)")
    p.set_defaults(fn=cmd_host)
    supply = add(sub, "supply", help="the scheduler's view of its hosts").add_subparsers(dest="supply",
                                                                                              required=True)
    p = add(supply, "put", help="replace it with a view (JSON or YAML file, or - for stdin): "
                                      '{"hosts": [{"name", "provider" (optional), "state": "idle" | "busy"}]}')
    p.add_argument("file")
    p.set_defaults(fn=cmd_supply_put)
    for name, view in VIEWS.items():
        p = out(add(sub, name, help=f"list {name}"))
        for field in view.filters:
            allowed = view.choices.get(field)
            p.add_argument(f"--{field}", choices=allowed, metavar=field.upper() if allowed else None,
                           help=f"only rows with this {field}" + (f": {', '.join(allowed)}" if allowed else ""))
        p.set_defaults(fn=cmd_view, view=name, reads_only=True)
        if name == "instances":
            bulk_cli.add_parsers(p, add, why, out, cmd_bulk)
    provider = add(sub, "provider", help="steer a provider").add_subparsers(dest="provider", required=True)
    for action, text in (("pause", "stop new requests"),
                         ("resume", "undo pause or drain, or revive a provider the daemon disabled (script exit 77 "
                                    "or 78, or one that cannot start) once its cause is fixed; ends its cooldowns too"),
                         ("drain", "stop new requests; what it holds goes back as it falls idle")):
        p = why(add(provider, action, help=f"{text} (its owner carries it out)"))
        p.add_argument("name")
        p.set_defaults(fn=cmd_steer, action=action)
    instance = add(sub, "instance", help="act on a host").add_subparsers(dest="instance", required=True)
    p = why(add(instance, "return", help="give a host back (its owner carries it out)"))
    p.add_argument("id", help="PROVIDER/MACHINE_ID, a machine id or a host name")
    p.set_defaults(fn=cmd_return_instance)
    orphan = add(sub, "orphan", help="act on an orphan").add_subparsers(dest="orphan", required=True)
    p = why(add(orphan, "return", help="give back an orphaned host or grant"))
    p.add_argument("id", help="its id in the orphans list")
    p.set_defaults(fn=cmd_return_orphan)
    p = add(sub, "import-lsf", help="print a providers: section for an LSF resource connector's "
                                    "hostProviders.json (paste it into the config, then check-config)")
    p.add_argument("file", help="the hostProviders.json (in LSF_ENVDIR/resource_connector)")
    p.set_defaults(fn=cmd_import_lsf)
    p = add(sub, "schema", help="print the JSON Schema of a demand snapshot, a host event, a supply view or a fact")
    p.add_argument("what", choices=["demand", "host-event", "supply", "fact"])
    p.set_defaults(fn=cmd_schema)
    p = out(add(sub, "plan", help="what one planning round would order for a demand file; writes nothing"))
    p.add_argument("--demand", required=True, help="demand snapshot, JSON or YAML file (- for stdin)")
    p.add_argument("--empty", action="store_true", help="plan as if no supply existed (nothing held or in flight)")
    p.set_defaults(fn=cmd_plan, reads_only=True)
    p = add(sub, "sim", help="evaluate policy offline: replay a demand trace against simulated providers",
            parents=[shared(skip=("--config",))])
    p.add_argument("--config", default=argparse.SUPPRESS,
                   help="simulator config (see examples/sim.yaml), or the daemon's own config file")
    p.add_argument("--trace", required=True, help="demand trace, JSON lines (see docs/offline-evaluation.md)")
    p.add_argument("--policy-set", action="append", default=[], metavar="KEY=VALUE",
                   help="change a setting for every run, e.g. idle_time=5m or budget.max_hosts=50")
    p.add_argument("--compare", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                   help="run a variant side by side with the base run")
    p.add_argument("--out", required=True, help="folder for report.json, series.csv and the plots")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.set_defaults(fn=cmd_sim)
    trace = add(sub, "trace", help="demand traces").add_subparsers(dest="trace", required=True)
    p = add(trace, "generate", help="write a synthetic trace: daily cycle, weekends, bursts, seeded")
    p.add_argument("--out", required=True, help="trace file to write")
    p.add_argument("--hosts", action="append", default=[], metavar="ID:PEAK[:BASE[:SELECT]]",
                   help="a host item, e.g. batch:40:4:ncpus>=16;type=X86_64")
    p.add_argument("--units", action="append", default=[], metavar="ID:RESOURCE:PEAK[:BASE]",
                   help="a license item, e.g. lic:vcs:30:5 (counts include the owned base)")
    p.add_argument("--bundles", action="append", default=[], metavar="ID:RESOURCES:PEAK[:BASE[:SELECT]]",
                   help="a bundle item, e.g. sim:ncpus=2;mem=8192:400:40:type=X86_64")
    p.add_argument("--days", type=float, default=7.0)
    p.add_argument("--step", default="1m", help="time between samples of the want (default 1m)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", help="start time, e.g. 2024-05-06T00:00:00Z (default 2024-01-01)")
    p.add_argument("--weekend", type=float, default=0.3, help="share of the daily swing on weekends")
    p.add_argument("--noise", type=float, default=0.05, help="relative noise on every sample")
    p.add_argument("--bursts-per-day", type=float, default=2.0)
    p.add_argument("--burst-size", type=float, default=0.5, help="a burst's size as a share of the item's peak")
    p.add_argument("--failover", action="append", default=[], metavar="PROVIDER:COUNT",
                   help="fail the provider's owner over COUNT times, evenly spread")
    p.add_argument("--lost", action="append", default=[], metavar="PROVIDER:PER_DAY",
                   help="the provider takes hosts back at random, PER_DAY on average")
    p.set_defaults(fn=cmd_trace_generate)
    p = add(trace, "export", help="write the controller's past demand (and what served it) as a trace for sim",
            description="Write the demand snapshots the controller kept (35 days), with the hosts busy for each "
                        "item, the license units in use, hosts lost and failovers, as a trace for provisioner sim. "
                        "Reads the controller itself: give --config or --controller.")
    p.add_argument("--since", default="30d", help="how far back (default 30d)")
    p.add_argument("--out", required=True, help="trace file to write")
    p.add_argument("--step", default="1m", help="time between samples (default 1m)")
    p.set_defaults(fn=cmd_trace_export, reads_only=True)
    audit = out(add(sub, "audit", help="show the audit log, or check its hash chain"))
    audit.add_argument("--follow", "-f", action="store_true", help="keep printing lines as they are written")
    audit.add_argument("--limit", type=int, default=50, help="how many of the last lines (default 50)")
    audit.set_defaults(fn=cmd_audit)
    check = audit.add_subparsers(dest="audit")
    out(add(check, "verify", help="check the hash chain; exit 1 if it is broken")).set_defaults(
        fn=cmd_audit_verify)
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
