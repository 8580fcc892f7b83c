"""``harness run``: one cell measured and written into results/<campaign>/; with ``--cell``, a
campaign's cell measured again with the campaign's own settings."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .. import cells, layout, libraries, paths, stats
from ..algorithms import harness_names, load_plugin
from ..campaign import config as _config
from ..campaign import plan, rerun, runner
from ..campaign.config import OVERSUBSCRIBE_FACTOR, too_many_ranks
from ..campaign.plan import launch_env
from ..cells import Cell, Run
from ..delays import DELAY_MODES, SYNC_MODES
from ..dnn import workload
from ..measure import preflight
from ..measure.buffers import check as check_buffers
from ..memory import too_big
from ..results import store as results
from ..units import format_size, format_time, parse_size, parse_time
from ..verify import DTYPES, OPS
from .args import int_at_least, load_campaign, positive_float, probability, typed


def register(sub) -> None:
    """Add ``run`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "run", help="measure one cell and write it into results/<campaign>/",
        description="Measure one cell (library x algorithm x P x size x dtype x op x delay) "
                    "with the stopping rule, write it into results/<campaign>/ (replacing "
                    "that cell's older row in summary.csv) and print a short summary.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--library", default="mpich", help="MPI library (see `harness algorithms`)")
    p.add_argument("--algorithm", default="native:auto",
                   help="native:<name> (the library's own, forced) or a harness algorithm")
    p.add_argument("--procs", "-n", type=int_at_least(1), default=4, help="number of MPI processes P")
    p.add_argument("--oversubscribe", action="store_true",
                   help="allow more than 4 ranks per core of this machine")
    p.add_argument("--size", type=typed(parse_size, "size"), default="1MiB",
                   help="message size per rank, e.g. 8B, 64KiB, 4MiB (0B: a call with no data; "
                        "a local run is refused when its 3 buffers per rank x P exceed the "
                        "available memory)")
    p.add_argument("--dtype", choices=DTYPES, default="float64")
    p.add_argument("--op", choices=OPS, default="sum")
    p.add_argument("--delay", choices=DELAY_MODES, default="none", help="process-arrival delay mode")
    p.add_argument("--max-delay", type=typed(parse_time, "time"), default="0",
                   help="maximum arrival delay, e.g. 20ms")
    p.add_argument("--late-rank", type=int_at_least(0), default=1,
                   help="the late rank of --delay one-late")
    p.add_argument("--base-compute", type=typed(parse_time, "time"), default="0",
                   help="compute phase every rank spends before each repetition")
    p.add_argument("--sync", choices=SYNC_MODES, default="auto",
                   help="start of each repetition: two barriers, or a common start time after "
                        "them (window); auto = window when a delay mode is set")
    p.add_argument("--thread-level", choices=("auto",) + cells.THREAD_LEVELS, default="auto",
                   help="MPI thread level of the launch (default auto: single, or multiple where "
                        "the cell needs threads, e.g. knowledge=online)")
    p.add_argument("--timing", choices=cells.TIMING_MODES, default="percall",
                   help="percall: each repetition synchronised and timed alone; imb: IMB-MPI1's "
                        "Allreduce loop (-sync 1), t_avg over ranks")
    p.add_argument("--buffers", choices=cells.BUFFER_MODES, default="reuse",
                   help="reuse: every call on the same (warm) buffers; rotate: each call on the "
                        "next of enough buffer pairs to exceed the last-level cache (default: "
                        "%(default)s)")
    p.add_argument("--campaign", default="adhoc", help="results go to results/<campaign>/")
    g = p.add_argument_group("stopping rule")
    g.add_argument("--confidence", type=probability, default=0.95)
    g.add_argument("--rule", choices=stats.RULES, default="student-t",
                   help="student-t: the mean's t-interval (the papers' rule); median-ci: the "
                        "median's order-statistics interval (no assumption on the distribution)")
    g.add_argument("--precision", type=positive_float, default=0.025,
                   help="stop when the interval's half-width is at most this fraction of the "
                        "mean (median-ci: of the median, on both sides)")
    g.add_argument("--min-reps", type=int_at_least(2), default=10)
    g.add_argument("--max-reps", type=int_at_least(2), default=1000)
    g.add_argument("--time-budget", type=typed(parse_time, "time"), default="60s",
                   help="measuring time per cell before it is marked not converged")
    g.add_argument("--max-volume", type=typed(parse_size, "size"), default="0",
                   help="at most this many bytes of messages per cell: max_reps = "
                        "min(max_reps, volume/size) as IMB scales iterations (0: no limit)")
    g.add_argument("--imb-iterations", type=int_at_least(0), default=0,
                   help="calls per sample with --timing imb (0: IMB's min(1000, 40MiB/size))")
    g.add_argument("--warmup", type=int_at_least(0), default=3, help="uncounted repetitions")
    g.add_argument("--launches", type=int_at_least(1), default=1,
                   help="independent MPI launches; with more than one the mean and its CI are "
                        "taken over the launch means")
    g.add_argument("--metric", choices=("mean", "max", "min", "span"), default="mean",
                   help="per-repetition elapsed time the rule is applied to")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm parameter, e.g. grid=4x2 or segment_size=65536 (repeatable); "
                        "workload=resnet50 (with fusion=ddp|horovod, precision=fp32|fp16) "
                        "times one training iteration's gradient calls instead, and --size is "
                        "the iteration's bytes")
    p.add_argument("--seed", type=int, default=0, help="seed of rand-late delays")
    p.add_argument("--timeout", type=typed(parse_time, "time"), default="10min",
                   help="wall-time limit of the MPI launch")
    p.add_argument("--plugin", action="append", default=[],
                   help="Python file registering extra algorithms (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the job script, write nothing")
    g = p.add_argument_group("a campaign's cell")
    g.add_argument("--cell", default=None, metavar="CELL_ID",
                   help="measure this cell of --campaign again with the campaign's own settings "
                        "(every other option is ignored) and replace its result")
    g.add_argument("--configfile", "--config", default=None, dest="configfile",
                   help="a campaign config: with --cell, the campaign's (default "
                        "config/experiments.yaml); without, where --library is declared (an "
                        "installation under its libraries:)")
    p.set_defaults(func=cmd_run)


def _installation(args, err):
    """The installation ``--library`` names (declared in ``--config``, or a wheel), read and
    checked by the pre-flight before anything is launched; a one-line error otherwise."""
    site, launch = None, "local"
    if args.configfile:
        try:
            cfg = _config.load(args.configfile)
        except (OSError, _config.ConfigError) as exc:
            err(f"argument --config: {exc}")
        site, launch = cfg.libraries.get(args.library), cfg.launch
        if site is None and args.library not in libraries.FAMILIES:
            err(f"argument --library: {args.library!r} is not declared in {args.configfile}; "
                f"expected one of {', '.join(sorted(set(cfg.libraries) | set(libraries.FAMILIES)))}")
    try:
        lib = libraries.get_library(args.library, site)
        if not lib.installed():
            err(f"argument --library: {lib.name} is not installed under {lib.prefix}; run "
                f"`make setup`")
        lib = plan.installation(args.library, site, launch)
        return libraries.restrict(lib, preflight.preflight(lib))
    except preflight.InstallationError as exc:
        print(f"harness run: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except (KeyError, ValueError) as exc:
        err(f"argument --library: {exc.args[0]}")


def _refuse_ignored(args, parser) -> None:
    """With ``--cell`` the campaign decides the cell: an option given beside it is an error."""
    defaults = vars(parser.parse_args(["--cell", args.cell]))
    for action in parser._actions:
        if action.dest in ("cell", "campaign", "configfile") or not action.option_strings:
            continue
        if getattr(args, action.dest, None) != defaults.get(action.dest):
            parser.error(f"argument {action.option_strings[0]}: not used with --cell (the "
                         f"campaign's own settings measure the cell); leave it out")


def cmd_run(args, parser) -> int:
    err = lambda msg: parser.error(msg)  # noqa: E731
    if args.cell:
        _refuse_ignored(args, parser)
        return _rerun_cell(args, parser)
    lib = _installation(args, err)
    for plugin in args.plugin:
        if not os.path.isfile(plugin):
            err(f"argument --plugin: no such file {plugin!r}")
        load_plugin(plugin)
    if args.algorithm.startswith("native:"):
        try:
            lib.native(args.algorithm)
        except KeyError as exc:
            err(f"argument --algorithm: {exc.args[0]}; harness algorithms: "
                f"{', '.join(harness_names()) or 'none'}")
    elif args.algorithm not in harness_names():
        err(f"argument --algorithm: unknown algorithm {args.algorithm!r}; valid: "
            + ", ".join(lib.native_names() + harness_names()))
    if lib.local and not args.oversubscribe and too_many_ranks(args.procs):
        err(f"argument --procs: {args.procs} ranks on this machine's {os.cpu_count()} cores is "
            f"more than {OVERSUBSCRIBE_FACTOR} per core; add --oversubscribe to run it anyway")
    if args.late_rank >= args.procs:
        err(f"argument --late-rank: {args.late_rank} is not a rank of P={args.procs} "
            f"(expected 0..{args.procs - 1})")
    if args.timing == "imb" and args.delay != "none":
        err(f"argument --timing: imb times calls back to back and takes no delay mode, "
            f"got --delay {args.delay}")
    if args.delay != "none" and args.max_delay == 0:
        err(f"argument --max-delay: delay mode {args.delay} needs --max-delay > 0")
    itemsize = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}[args.dtype]
    if args.size % itemsize and not any(p.startswith("workload=") for p in args.param):
        err(f"argument --size: {args.size} bytes is not a whole number of {args.dtype} "
            f"elements ({itemsize} bytes each)")
    rule = stats.StoppingRule(args.confidence, args.precision, args.min_reps, args.max_reps,
                              args.time_budget, args.rule)
    try:
        rule.check()
    except ValueError as exc:
        err(f"stopping rule: {exc}" if "min_reps" not in str(exc) else
            f"argument --min-reps: {args.min_reps} exceeds --max-reps {args.max_reps}")
    if not args.campaign or "/" in args.campaign or args.campaign.startswith("."):
        err(f"argument --campaign: expected a plain name, got {args.campaign!r}")

    params = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            err(f"argument --param: expected KEY=VALUE, got {item!r}")
        params[key] = int(value) if value.isdigit() else value
    if workload.is_workload(params):  # a training iteration: its size comes from the trace
        try:
            if "iteration_compute" in params:
                params["iteration_compute"] = parse_time(str(params["iteration_compute"]))
            workload.check(params)
        except ValueError as exc:
            err(f"argument --param: {exc}")
        args.size = workload.size(params, args.dtype)
    if "layout" in params or "ppn" in params:  # node layout (harness/layout.py)
        try:
            kind, ppn = layout.parse(params)
            if kind == "emulated":
                layout.emulated(args.procs, ppn)
        except layout.LayoutError as exc:
            err(f"argument --param: {exc}")
    if lib.local:  # the buffers of every rank must fit in this machine's memory
        why = too_big(args.size, args.procs, args.buffers)
        if why:
            err(f"argument --size: {why}")
    try:
        level = cells.resolve_thread_level(args.thread_level, args.algorithm, params)
    except ValueError as exc:
        err(f"argument --thread-level: {exc}")
    cell = Cell(library=lib.name, algorithm=args.algorithm, procs=args.procs, size=args.size,
                dtype=args.dtype, op=args.op, delay=args.delay,
                max_delay=args.max_delay if args.delay != "none" else 0.0,
                late_rank=args.late_rank if args.delay == "one-late" else 0,
                params=tuple(sorted(params.items())), thread_level=level, timing=args.timing,
                buffers=args.buffers)
    try:
        check_buffers(cell.algorithm, cell.params, cell.buffers)
    except ValueError as exc:
        err(f"argument --buffers: {exc}")
    try:
        force_env = launch_env(lib, cell.algorithm, cell.params)
    except KeyError as exc:
        err(f"argument --param: {exc.args[0]}")
    run = Run(library=lib.name, env=force_env, procs=args.procs,
              nodes=1, cells=(cell,), thread_level=level)
    settings = {"rule": rule.kind, "confidence": rule.confidence, "precision": rule.precision,
                "min_reps": rule.min_reps, "max_reps": rule.max_reps,
                "time_budget": rule.time_budget, "warmup": args.warmup,
                "base_compute": args.base_compute, "metric": args.metric, "sync": args.sync,
                "max_volume": args.max_volume, "imb_iterations": args.imb_iterations}
    store = results.CampaignStore(paths.results_root(), args.campaign)
    launches = plan.replicate([run], args.launches, args.seed)
    specs = [runner.prepare(r, lib, store, settings, seed=args.seed, plugins=args.plugin,
                            launches=args.launches) for r in launches]
    if args.dry_run:
        sys.stdout.write(specs[0][0])
        return 0

    outcome = None
    for k, (script, spec) in enumerate(specs):
        runner.write(store, script, spec)
        runner.fresh(spec)
        print(f"run {spec['run_id']}: {lib.title} {cell.algorithm} P={cell.procs} "
              f"size={format_size(cell.size)} {cell.dtype} {cell.op} delay={cell.delay}"
              + (f" max={format_time(cell.max_delay)}" if cell.delay != "none" else "")
              + (f" (launch {k + 1} of {len(specs)})" if len(specs) > 1 else ""), flush=True)
        outcome = runner.execute(store, spec, timeout=args.timeout)
    df = results.rebuild_summary(store)
    row = df[df.cell_id == cell.cell_id]
    if row.empty:
        print(f"error: run {outcome}, no result for cell {cell.cell_id}", file=sys.stderr)
        return 1
    r = row.iloc[0]
    _print_row(r, store)
    return 0 if r.status in results.TIMED else 1


def _rerun_cell(args, parser) -> int:
    """``--campaign <c> --cell <id>``: the campaign's cell measured again with its settings."""
    if args.campaign == "adhoc":
        parser.error("argument --cell: name the campaign the cell belongs to (--campaign)")
    campaign = load_campaign(args.configfile, args.campaign, parser, "--campaign")
    try:
        hits = rerun.find(campaign.runs.values(), args.cell)
    except rerun.UnknownCell as exc:
        parser.error(f"argument --cell: {exc}")
    for planned, cell in hits:
        lib = plan.library_for(campaign.cfg, planned.library)
        if lib.local and campaign.cfg.launch != "srun":  # launched here: it must fit
            why = too_big(cell.size, cell.procs, cell.buffers)
            if why:
                parser.error(f"argument --cell: {args.cell}: {why}")
    try:
        updated = rerun.rerun(campaign, args.cell, timeout=campaign.cfg.run_walltime)
    except rerun.UnknownCell as exc:
        parser.error(f"argument --cell: {exc}")
    # the row the next aggregate will write (summary.csv itself is left to the workflow, so
    # that `snakemake` rebuilds the aggregate, its check, and the report)
    df = results.summary_frame(campaign.store, keep={args.cell}, runs=set(campaign.runs))
    r = df.iloc[0]
    _print_row(r, campaign.store)
    print(f"  replaced in run(s) {', '.join(updated)}; now `snakemake` rebuilds summary.csv "
          f"and the report (nothing is measured)")
    return 0 if r.status in results.TIMED else 1


def _present(value) -> bool:
    return value is not None and value == value


def _bandwidth(value) -> str:
    """Bytes per second in MiB/s; n/a where there is none (a 0-byte message, no mean)."""
    return f"{value / 2**20:.1f} MiB/s" if _present(value) and value > 0 else "n/a"


def _print_row(r, store) -> None:
    if r.status in results.TIMED and _present(r["mean"]):
        hw = (r.ci_high - r.ci_low) / 2 if _present(r.ci_high) else float("nan")
        many = _present(r.get("launches")) and int(r.launches) > 1
        how = r.get("ci_method")
        print(f"  mean {format_time(r['mean'])} ± {format_time(hw)} (95% CI"
              + (f" over {int(r.launches)} launches" if many else "")
              + (", of the log times: the t-interval reached below zero" if how == "log-t"
                 else "") + "), "
              f"median {format_time(r['median'])}"
              + (f" [{format_time(r.median_ci_low)}, {format_time(r.median_ci_high)}]"
                 if _present(r.get("median_ci_low")) and not many else "")
              + f", n={int(r.within_n if many else r.n)}, "
              f"converged={'yes' if r.converged else 'no'}, status={r.status}")
        if not many and _present(r.get("p5")):
            rejected = r.get("t_rejected")
            print(f"  p5 {format_time(r.p5)}, p95 {format_time(r.p95)}, "
                  f"{int(r.outliers)} Tukey outlier(s) (kept), lag-1 autocorrelation "
                  f"{r.lag1:.2f} (effective n {r.effective_n:.0f})"
                  + (f"; the data reject the t-interval's {rejected}"
                     if isinstance(rejected, str) and rejected != "none" else ""))
        print(f"  algbw {_bandwidth(r.algbw)}, busbw {_bandwidth(r.busbw)}"
              + (" (a 0-byte message moves no data)" if int(r["size"]) == 0 else ""))
    else:
        print(f"  status={r.status}" + (f" after {int(r.n)} repetition(s)" if _present(r.n) else ""))
    if isinstance(r.error, str) and r.error:
        print(f"  error: {r.error}")
    _print_counts(r)
    print(f"  results: {store.dir}/summary.csv (cell {r.cell_id}, run {r.run_id})")


def _print_counts(r) -> None:
    """The node layout and message counts of the record (harness/measure/counting.py), if any."""
    try:
        rec = json.loads(r["record"]) if isinstance(r["record"], str) else {}
    except ValueError:
        return
    if "inter_msgs" in rec:
        print(f"  layout {rec.get('layout')}: {rec.get('n_nodes')} node(s) x ppn {rec.get('ppn')}; "
              f"messages per call, most of one rank: inter-node {rec['inter_msgs']} "
              f"({rec['inter_bytes']} B), intra-node {rec['intra_msgs']} ({rec['intra_bytes']} B)")
