"""Commands that run no daemon and ask none: ``import-lsf``, ``schema``, ``plan``, ``sim``, ``trace generate|export``.

``plan`` and ``trace export`` read the controller itself (``--config`` or
``--controller``, never ``--url``); the simulator's modules are imported only
by the commands that run it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pydantic import ValidationError

from config.located import one_line
from provisioner.cli.arguments import duration, pair
from provisioner.cli.options import Add, With, shared
from provisioner.cli.output import print_json
from provisioner.cli.where import CliError, direct, remote


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

    print_json(schema(args.what))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """A dry run of one planning round on a demand file (provisioner/cli/plan.py)."""
    from provisioner.cli.plan import plan_main

    if remote(args) is not None:
        raise CliError("plan reads the controller itself: give --config or --controller, not --url")
    url, home, cfg = direct(args)
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
    shape = Shape(days=args.days, step=duration("--step", args.step), weekend=args.weekend, noise=args.noise,
                  bursts_per_day=args.bursts_per_day, burst_size=args.burst_size,
                  failovers=tuple(pair(f, int, "--failover PROVIDER:COUNT") for f in args.failover),
                  lost=tuple(pair(x, float, "--lost PROVIDER:PER_DAY") for x in args.lost))
    wrong = problems(loads, shape)
    if wrong:
        raise CliError("trace generate: " + "; ".join(wrong))
    note = f"provisioner trace generate --seed {args.seed}"
    n = write_trace(Path(args.out), generate(loads, shape, start, args.seed), start, note)
    print(f"{args.out}: {n} steps over {args.days:g} days")
    return 0


def cmd_trace_export(args: argparse.Namespace) -> int:
    """The controller's past demand as a simulator trace (``provisioner/cli/trace_export.py``)."""
    from provisioner.cli.trace_export import export_main

    if remote(args) is not None:
        raise CliError("trace export reads the controller itself: give --config or --controller, not --url")
    since, step = duration("--since", args.since), duration("--step", args.step)
    url, _, _ = direct(args)
    return export_main(url, Path(args.out), since, step)


def add_parsers(sub: argparse._SubParsersAction, add: Add, out: With) -> None:
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
