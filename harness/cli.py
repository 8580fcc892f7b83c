"""The ``harness`` command. Thin over the modules: parsing, checking, printing.

Exit codes: 0 success; 1 a measurement came out ``wrong``, ``failed`` or ``timeout``;
2 bad input (nothing is written).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import __version__, libraries, paths, plan, results, runner, stats
from .algorithms import harness_names, load_plugin
from .delays import DELAY_MODES, SYNC_MODES
from .turns import launch_turn
from .dnn import workload
from .plan import Cell, Run, launch_env
from .units import format_size, format_time, parse_size, parse_time
from .verify import DTYPES, OPS


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: ``harness run: error: argument --size: …``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _typed(parse, what):
    def conv(text):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    conv.__name__ = what
    return conv


def _int_at_least(low):
    def conv(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        return value
    return conv


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _probability(text):
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _add_run(sub):
    p = sub.add_parser(
        "run", help="measure one cell and write it into results/<campaign>/",
        description="Measure one cell (library x algorithm x P x size x dtype x op x delay) "
                    "with the stopping rule, write it into results/<campaign>/ (replacing "
                    "that cell's older row in summary.csv) and print a short summary.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--library", default="mpich", help="MPI library (see `harness algorithms`)")
    p.add_argument("--algorithm", default="native:auto",
                   help="native:<name> (the library's own, forced) or a harness algorithm")
    p.add_argument("--procs", "-n", type=_int_at_least(1), default=4, help="number of MPI processes P")
    p.add_argument("--oversubscribe", action="store_true",
                   help="allow more than 4 ranks per core of this machine")
    p.add_argument("--size", type=_typed(parse_size, "size"), default="1MiB",
                   help="message size per rank, e.g. 8B, 64KiB, 4MiB (0B: a call with no data; "
                        "a local run is refused when its 3 buffers per rank x P exceed the "
                        "available memory)")
    p.add_argument("--dtype", choices=DTYPES, default="float64")
    p.add_argument("--op", choices=OPS, default="sum")
    p.add_argument("--delay", choices=DELAY_MODES, default="none", help="process-arrival delay mode")
    p.add_argument("--max-delay", type=_typed(parse_time, "time"), default="0",
                   help="maximum arrival delay, e.g. 20ms")
    p.add_argument("--late-rank", type=_int_at_least(0), default=1,
                   help="the late rank of --delay one-late")
    p.add_argument("--base-compute", type=_typed(parse_time, "time"), default="0",
                   help="compute phase every rank spends before each repetition")
    p.add_argument("--sync", choices=SYNC_MODES, default="auto",
                   help="start of each repetition: two barriers, or a common start time after "
                        "them (window); auto = window when a delay mode is set")
    p.add_argument("--thread-level", choices=("auto",) + plan.THREAD_LEVELS, default="auto",
                   help="MPI thread level of the launch (default auto: single, or multiple where "
                        "the cell needs threads, e.g. knowledge=online)")
    p.add_argument("--timing", choices=plan.TIMING_MODES, default="percall",
                   help="percall: each repetition synchronised and timed alone; imb: IMB-MPI1's "
                        "Allreduce loop (-sync 1), t_avg over ranks")
    p.add_argument("--campaign", default="adhoc", help="results go to results/<campaign>/")
    g = p.add_argument_group("stopping rule")
    g.add_argument("--confidence", type=_probability, default=0.95)
    g.add_argument("--precision", type=_positive_float, default=0.025,
                   help="stop when the CI half-width is at most this fraction of the mean")
    g.add_argument("--min-reps", type=_int_at_least(2), default=10)
    g.add_argument("--max-reps", type=_int_at_least(2), default=1000)
    g.add_argument("--time-budget", type=_typed(parse_time, "time"), default="60s",
                   help="measuring time per cell before it is marked not converged")
    g.add_argument("--max-volume", type=_typed(parse_size, "size"), default="0",
                   help="at most this many bytes of messages per cell: max_reps = "
                        "min(max_reps, volume/size) as IMB scales iterations (0: no limit)")
    g.add_argument("--imb-iterations", type=_int_at_least(0), default=0,
                   help="calls per sample with --timing imb (0: IMB's min(1000, 40MiB/size))")
    g.add_argument("--warmup", type=_int_at_least(0), default=3, help="uncounted repetitions")
    g.add_argument("--launches", type=_int_at_least(1), default=1,
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
    p.add_argument("--timeout", type=_typed(parse_time, "time"), default="10min",
                   help="wall-time limit of the MPI launch")
    p.add_argument("--plugin", action="append", default=[],
                   help="Python file registering extra algorithms (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the job script, write nothing")
    g = p.add_argument_group("a campaign's cell")
    g.add_argument("--cell", default=None, metavar="CELL_ID",
                   help="measure this cell of --campaign again with the campaign's own settings "
                        "(every other option is ignored) and replace its result")
    g.add_argument("--configfile", default=None,
                   help="with --cell: the campaign's config (default config/experiments.yaml)")
    p.set_defaults(func=cmd_run)


def cmd_run(args, parser) -> int:
    err = lambda msg: parser.error(msg)  # noqa: E731
    if args.cell:
        return _rerun_cell(args, parser)
    try:
        lib = libraries.get_library(args.library)
    except KeyError as exc:
        err(f"argument --library: {exc.args[0]}")
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
    from .config import OVERSUBSCRIBE_FACTOR, too_many_ranks

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
                              args.time_budget)
    try:
        rule.check()
    except ValueError as exc:
        err(f"stopping rule: {exc}" if "min_reps" not in str(exc) else
            f"argument --min-reps: {args.min_reps} exceeds --max-reps {args.max_reps}")
    if not args.campaign or "/" in args.campaign or args.campaign.startswith("."):
        err(f"argument --campaign: expected a plain name, got {args.campaign!r}")
    if not lib.installed():
        err(f"argument --library: {lib.name} is not installed under {lib.prefix}; run `make setup`")

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
        from .layout import LayoutError, emulated, parse

        try:
            kind, ppn = parse(params)
            if kind == "emulated":
                emulated(args.procs, ppn)
        except LayoutError as exc:
            err(f"argument --param: {exc}")
    if lib.local:  # the buffers of every rank must fit in this machine's memory
        from .memory import too_big

        why = too_big(args.size, args.procs)
        if why:
            err(f"argument --size: {why}")
    try:
        level = plan.resolve_thread_level(args.thread_level, args.algorithm, params)
    except ValueError as exc:
        err(f"argument --thread-level: {exc}")
    cell = Cell(library=lib.name, algorithm=args.algorithm, procs=args.procs, size=args.size,
                dtype=args.dtype, op=args.op, delay=args.delay,
                max_delay=args.max_delay if args.delay != "none" else 0.0,
                late_rank=args.late_rank if args.delay == "one-late" else 0,
                params=tuple(sorted(params.items())), thread_level=level, timing=args.timing)
    try:
        force_env = launch_env(lib, cell.algorithm, cell.params)
    except KeyError as exc:
        err(f"argument --param: {exc.args[0]}")
    run = Run(library=lib.name, env=force_env, procs=args.procs,
              nodes=1, cells=(cell,), thread_level=level)
    settings = {"confidence": rule.confidence, "precision": rule.precision,
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
    return 0 if r.status in ("ok", "not-converged") else 1


def _rerun_cell(args, parser) -> int:
    """``--campaign <c> --cell <id>``: the campaign's cell measured again with its settings."""
    from . import rerun

    if args.campaign == "adhoc":
        parser.error("argument --cell: name the campaign the cell belongs to (--campaign)")
    campaign = _load_campaign(args.configfile, args.campaign, parser, "--campaign")
    try:
        hits = rerun.find(campaign.runs.values(), args.cell)
    except rerun.UnknownCell as exc:
        parser.error(f"argument --cell: {exc}")
    for planned, cell in hits:
        lib = plan.library_for(campaign.cfg, planned.library)
        if lib.local and campaign.cfg.launch != "srun":  # launched here: it must fit
            from .memory import too_big

            why = too_big(cell.size, cell.procs)
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
    return 0 if r.status in ("ok", "not-converged") else 1


def _present(value) -> bool:
    return value is not None and value == value


def _bandwidth(value) -> str:
    """Bytes per second in MiB/s; n/a where there is none (a 0-byte message, no mean)."""
    return f"{value / 2**20:.1f} MiB/s" if _present(value) and value > 0 else "n/a"


def _print_row(r, store) -> None:
    if r.status in ("ok", "not-converged") and _present(r["mean"]):
        hw = (r.ci_high - r.ci_low) / 2 if _present(r.ci_high) else float("nan")
        many = _present(r.get("launches")) and int(r.launches) > 1
        print(f"  mean {format_time(r['mean'])} ± {format_time(hw)} (95% CI"
              + (f" over {int(r.launches)} launches" if many else "") + "), "
              f"median {format_time(r['median'])}, n={int(r.within_n if many else r.n)}, "
              f"converged={'yes' if r.converged else 'no'}, status={r.status}")
        print(f"  algbw {_bandwidth(r.algbw)}, busbw {_bandwidth(r.busbw)}"
              + (" (a 0-byte message moves no data)" if int(r["size"]) == 0 else ""))
    else:
        print(f"  status={r.status}" + (f" after {int(r.n)} repetition(s)" if _present(r.n) else ""))
    if isinstance(r.error, str) and r.error:
        print(f"  error: {r.error}")
    _print_counts(r)
    print(f"  results: {store.dir}/summary.csv (cell {r.cell_id}, run {r.run_id})")


def _print_counts(r) -> None:
    """The node layout and message counts of the record (harness/counting.py), if any."""
    import json

    try:
        rec = json.loads(r["record"]) if isinstance(r["record"], str) else {}
    except ValueError:
        return
    if "inter_msgs" in rec:
        print(f"  layout {rec.get('layout')}: {rec.get('n_nodes')} node(s) x ppn {rec.get('ppn')}; "
              f"messages per call, most of one rank: inter-node {rec['inter_msgs']} "
              f"({rec['inter_bytes']} B), intra-node {rec['intra_msgs']} ({rec['intra_bytes']} B)")


def cmd_algorithms(args, parser) -> int:
    for lib in libraries.catalogue().values():
        print(f"{lib.name} ({lib.title}, {lib.wheel})")
        for alg in lib.algorithms.values():
            forced = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            print(f"  native:{alg.name:<28} {forced}")
    names = harness_names()
    print("harness algorithms: " + (", ".join(names) if names else "none yet"))
    return 0


def cmd_install(args, parser) -> int:
    for lib in libraries.catalogue().values():
        if libraries.install(lib):
            print(f"installed {lib.wheel} into {lib.prefix}")
        else:
            print(f"{lib.wheel}: already installed in {lib.prefix}")
    return 0


def cmd_doctor(args, parser) -> int:
    code = 0
    # every rank joins one allreduce; rank 0 alone prints (the launchers merge the ranks'
    # output, and two ranks' lines can run together): "<ranks that took part> <version>"
    probe = ("from mpi4py import MPI; n = MPI.COMM_WORLD.allreduce(1); "
             "MPI.COMM_WORLD.Get_rank() or print(n, "
             "MPI.Get_library_version().strip().splitlines()[0])")
    for lib in libraries.catalogue().values():
        if not lib.installed():
            print(f"{lib.name:8} NOT INSTALLED (run `make setup`)")
            code = 1
            continue
        env = {**os.environ, **lib.run_env()}
        for var, dirs in lib.prepend().items():
            env[var] = ":".join(dirs + ([env[var]] if env.get(var) else []))
        argv = lib.launch_argv(2) + [sys.executable, "-c", probe]
        try:
            with launch_turn(f"harness doctor: {lib.name}"):
                out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
            ranks, _, version = out.stdout.strip().partition(" ")
            ok = out.returncode == 0 and ranks == "2"
            version = version if ok else (out.stdout + out.stderr).strip()[-200:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, version = False, str(exc)
        print(f"{lib.name:8} launcher {'starts' if ok else 'FAILED'}: {version}")
        code = code or (0 if ok else 1)
    return code


def _load_config(args, parser):
    from .config import ConfigError, load

    try:
        cfg = load(args.config)
        runs = plan.expand(cfg)
    except ConfigError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    return cfg, runs


def cmd_plan(args, parser) -> int:
    cfg, runs = _load_config(args, parser)
    print(f"campaign {cfg.campaign} ({cfg.source}, config {cfg.digest})")
    cells_by_exp = {}
    for ex in cfg.experiments:  # per experiment, before cells shared with another are merged
        sub = type(cfg)(**{**cfg.__dict__, "experiments": (ex,)})
        ex_runs = runs if len(cfg.experiments) == 1 else plan.expand(sub)
        cells_by_exp[ex.name] = (sum(len(r.cells) for r in ex_runs if r.launch == 0), len(ex_runs))
    width = max(len(n) for n in cells_by_exp)
    for name, (ncells, nruns) in cells_by_exp.items():
        print(f"  {name:<{width}}  {ncells:>8} cells  {nruns:>6} runs")
    total = sum(len(r.cells) for r in runs if r.launch == 0)
    launches = int(cfg.stopping.get("launches", 1))
    print(f"  {'total':<{width}}  {total:>8} cells  {len(runs):>6} runs (cells shared by "
          f"experiments are measured once" + (f"; {launches} launches of each run" if launches > 1
                                              else "") + ")")
    for name, e in (cfg.sgd or {}).items():  # distributed SGD (harness/dnn/sgd.py, docs/sgd.md)
        algs = list(e["algorithms"])
        print(f"  sgd {name}: {e['library']} P={e['procs']}, {', '.join(algs)} x "
              f"{e['executions']} executions = {len(algs) * e['executions']} training launches "
              f"of {e['iterations']} iterations")
    if args.runs:
        cores = os.cpu_count() or 1
        for r in runs:
            local = cfg.launch != "srun" and not cfg.libraries.get(r.library)
            forced = " ".join(f"{k}={v}" for k, v in r.env) or "-"
            over = (f"  {r.procs / cores:.1f} ranks/core" if local and r.procs > cores else "")
            print(f"{r.run_id}  {r.library:8} P={r.procs:<4} nodes={r.nodes:<3} "
                  f"launch={r.launch:<3} {len(r.cells):>5} cells  {forced}{over}")
    return 0


def cmd_status(args, parser) -> int:
    """Cells by status, split into launches that fit the cores and oversubscribed ones."""
    import pandas as pd

    path = paths.results_root() / args.campaign / "summary.csv"
    if not path.is_file():
        parser.error(f"argument campaign: no summary at {path} (run the campaign first)")
    df = pd.read_csv(path)
    if "oversubscribed" not in df:
        df["oversubscribed"] = None
    over = df["oversubscribed"].map({True: "P > cores", False: "P <= cores", "True": "P > cores",
                                     "False": "P <= cores"}).fillna("unknown")
    table = pd.crosstab(over, df["status"], margins=True, margins_name="all")
    print(f"campaign {args.campaign}: {len(df)} cells ({path})")
    print(table.to_string())
    fits = df[over == "P <= cores"]
    if len(fits):
        print(f"converged where P <= cores: {(fits.status == 'ok').sum()}/{len(fits)} "
              f"({(fits.status == 'ok').mean():.0%})")
    return 0


def _load_campaign(configfile, name: str, parser, arg: str):
    """The ``harness.workflow.Campaign`` of ``configfile`` (default config/experiments.yaml),
    which must define campaign ``name``; else a one-line error naming ``arg``."""
    import yaml

    from . import config as _config
    from .workflow import Campaign

    path = Path(configfile or _config.DEFAULT_CONFIG)
    try:
        with open(path) as fh:
            campaign = Campaign(yaml.safe_load(fh), source=str(path))
    except (OSError, yaml.YAMLError, _config.ConfigError) as exc:
        parser.error(f"argument --configfile: {path}: {getattr(exc, 'strerror', None) or exc}")
    if campaign.cfg.campaign != name:
        parser.error(f"argument {arg}: {path} defines campaign {campaign.cfg.campaign!r}, "
                     f"not {name!r} (--configfile)")
    return campaign


def _campaign_args(p, config_help: str) -> None:
    p.add_argument("campaign", help="campaign name (results/<campaign>/)")
    p.add_argument("--configfile", default=None, help=config_help)


def _campaign_plan(args, parser):
    """(config, run ids, cell ids) of ``--configfile`` when it defines ``args.campaign``; with
    no ``--configfile``, the default config's when its campaign is that one, else Nones."""
    from . import config as _config

    try:
        cfg = _config.load(args.configfile)
    except _config.ConfigError as exc:
        if args.configfile:
            parser.error(f"argument --configfile: {exc}")
        return None, None, None
    if cfg.campaign != args.campaign:
        if args.configfile:
            parser.error(f"argument --configfile: {args.configfile} defines campaign "
                         f"{cfg.campaign!r}, not {args.campaign!r}")
        return None, None, None
    runs = plan.expand(cfg)
    return cfg, {r.run_id for r in runs}, {c.cell_id for r in runs for c in r.cells}


def _store(args, parser) -> results.CampaignStore:
    store = results.CampaignStore(paths.results_root(), args.campaign)
    if not store.dir.is_dir():
        parser.error(f"argument campaign: no results at {store.dir}")
    return store


def cmd_check(args, parser) -> int:
    """Validate a campaign's store; non-zero on any inconsistency."""
    from . import check

    store = _store(args, parser)
    _, runs, keep = _campaign_plan(args, parser)
    rep = check.check_store(store, runs=runs, keep=keep)
    print(check.render(store, rep))
    return 0 if rep.ok else 1


def cmd_tune(args, parser) -> int:
    """Each library's decision table and tuning files; with --verify, the fresh launches."""
    from . import tune

    try:
        docs = tune.tune(paths.results_root(), args.campaign)
    except tune.TuneError as exc:
        parser.error(str(exc))
    if not args.verify:
        return 0
    from . import tune_verify
    from .report.tuned import make_tuned

    campaign = _load_campaign(args.configfile, args.campaign, parser, "campaign")
    outs = []
    for library in sorted(docs):
        out = campaign.store.dir / "tuning" / f"verify-{library}.json"
        tune_verify.run_library(campaign, library, out)
        outs.append(out)
    for path in make_tuned(outs, campaign.store.dir / "tables", campaign.figures,
                           libraries=sorted(docs)):
        print(path)
    return 0


def cmd_retry(args, parser) -> int:
    """Reset the runs with failed or timeout cells, then run the workflow again."""
    from . import retry

    store = _store(args, parser)
    cfg, runs, _ = _campaign_plan(args, parser)
    if cfg is None:
        parser.error(f"argument campaign: {args.configfile or 'config/experiments.yaml'} does not define "
                     f"campaign {args.campaign!r}; pass the config it was run with "
                     f"(--configfile)")
    todo = retry.plan(store, runs=runs)
    print(retry.describe(todo))
    if args.dry_run:
        return 0
    for moved in retry.reset(store, todo):
        print(f"  moved aside: {moved}")
    if args.no_run:
        print("now run the workflow (snakemake, or make) to measure them")
        return 0
    snakemake = Path(sys.executable).parent / "snakemake"
    cmd = [str(snakemake), "--snakefile", str(paths.REPO_ROOT / "Snakefile")]
    if args.configfile:
        cmd += ["--configfile", str(Path(args.configfile).resolve())]
    cmd += args.passthrough
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=paths.REPO_ROOT)


def cmd_exec(args, parser) -> int:
    """Execute a rendered run (the workflow's measure step)."""
    spec = results.read_json(args.spec)
    store = results.CampaignStore(Path(args.spec).resolve().parent.parent.parent, spec["campaign"])
    try:
        outcome = runner.execute(store, spec, timeout=args.timeout)
    except OSError as exc:  # a full or read-only file system: one line, nothing half-written
        print(f"harness exec: run {spec['run_id']}: cannot write "
              f"{exc.filename or 'the results store'}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"run {spec['run_id']}: {outcome}")
    return 0


def cmd_model_suara2(args, parser) -> int:
    from . import models

    if args.params == "paper":
        params = models.Params.paper()
    else:
        try:
            params = models.Params.from_dict(results.read_json(args.params))
        except (OSError, ValueError, KeyError) as exc:
            parser.error(f"argument --params: cannot read {args.params!r}: {exc}")
    if args.rs_segments:
        from dataclasses import replace

        params = replace(params, rs_segments=args.rs_segments)
    c = models.select_suara2(args.procs, args.size, params)
    rs = models.cost("rs", args.procs, args.size, params) if "rs" in params.algorithms else None
    print(f"SUARA2 model, P={args.procs}, m={format_size(args.size)}, parameters: {args.params}")
    if c.fallback == "no-grid":
        print(f"  no grid 1 < P_c < P divides P={args.procs}: best single algorithm "
              f"{c.best_single} {format_time(c.best_single_time)}")
    else:
        grid = c.best_grid if c.fallback == "single" else c
        print(f"  grid P_r x P_c = {grid.P_r} x {grid.P_c}, combination ({grid.a_r}, {grid.a_c}), "
              f"predicted {format_time(grid.time)}")
        print(f"  best single algorithm {c.best_single}: {format_time(c.best_single_time)}; "
              f"predicted speedup {c.best_single_time / grid.time:.3f}")
        if rs:
            print(f"  single-level segmented ring (rs): {format_time(rs)}; "
                  f"predicted speedup over rs {rs / grid.time:.3f}")
        if c.fallback == "single":
            print("  the model prefers the single algorithm at this P and size")
    return 0


def cmd_fit(args, parser) -> int:
    """Fit the Table 1 models (native allreduce cells) and the ping-pong and max-rate
    parameters (pingpong, reduce_local cells) to a campaign's summary; write them as one JSON
    file (harness/netparams.py)."""
    from . import models, netparams

    store = results.CampaignStore(paths.results_root(), args.campaign)
    if not store.summary.is_file():
        parser.error(f"argument campaign: no summary at {store.summary}; run the campaign first")
    try:
        doc = netparams.fit_file(store.summary, campaign=args.campaign, library=args.library,
                                 source=args.source, gamma=args.gamma)
    except ValueError as exc:
        print(f"harness fit: error: {exc}", file=sys.stderr)
        return 1
    params = models.Params.from_dict(doc)
    out = Path(args.output) if args.output else store.dir / "model_params.json"
    results.write_json(out, doc)
    fits = params.provenance.get("fits", {})
    g_from = params.provenance.get("gamma_from", {})
    print(f"fitted from {store.summary}; gamma = {params.gamma:.3g} s/B "
          f"({g_from.get('from', g_from) if isinstance(g_from, dict) else g_from})")
    if not fits:
        print(f"  Table 1 (alpha, beta) of every algorithm: {params.provenance.get('assumed')}")
    for lib, f in doc.get("pingpong", {}).items():
        print(f"  ping-pong {lib:8} level {f['level']:7} alpha {format_time(f['alpha']):>9}  "
              f"beta {f['beta']:.3g} s/B ({1 / f['beta'] / 1e9 if f['beta'] > 0 else float('inf'):.3g} GB/s)  "
              f"R^2 {f['r2']:.4f}  n {f['n']}  sizes {format_size(f['sizes'][0])}..{format_size(f['sizes'][1])}")
    if "maxrate_error" in params.provenance:
        print(f"  no max-rate parameters: {params.provenance['maxrate_error']}")
    if "maxrate" in doc:
        mr = doc["maxrate"]
        print(f"  max-rate ({mr['provenance']['library']}): alpha_l {format_time(mr['alpha_l'])}, "
              f"beta_l {mr['beta_l']:.3g} s/B, alpha {format_time(mr['alpha'])}, "
              f"R_b {mr['R_b'] / 1e9:.3g} GB/s, R_N {mr['R_N'] / 1e9:.3g} GB/s, gamma {mr['gamma']:.3g} s/B")
        for role, why in mr["provenance"].get("fallbacks", {}).items():
            print(f"    {role}: {why}")
    if fits:
        print(f"  Table 1 fit of {args.library}'s {args.source} algorithms:")
    print(f"  {'model':6} {'alpha':>10} {'beta [s/B]':>11} {'1/beta':>11} {'R^2':>6} {'cells':>5}")
    for name in models.ALL6:
        f = fits.get(name)
        if f is None:
            continue
        if "error" in f:
            print(f"  {name:6} not fitted: {f['error']}")
            continue
        bw = f"{1 / f['beta'] / 2**30:.2f}GiB/s" if f["beta"] > 0 else "-"
        print(f"  {name:6} {format_time(f['alpha']):>10} {f['beta']:>11.3g} {bw:>11} {f['r2']:>6.3f} {f['n']:>5}")
    print(f"wrote {out}")
    return 0


MAXRATE_OPTIONS = (("alpha_l", "--alpha-l", "s", "intra-node latency"),
                   ("beta_l", "--beta-l", "s/B", "intra-node cost per byte"),
                   ("alpha", "--alpha", "s", "inter-node latency"),
                   ("R_b", "--rb", "B/s", "inter-process bandwidth (1/beta)"),
                   ("R_N", "--rn", "B/s", "injection bandwidth of a node"),
                   ("gamma", "--gamma", "s/B", "reduction cost per byte"))


def cmd_model_maxrate(args, parser) -> int:
    """``harness model rd|smp|nap``: the max-rate model (harness/maxrate.py) for one case."""
    from . import maxrate

    params = maxrate.MaxRateParams.defaults()
    source = "defaults (illustrative)"
    if args.params:
        try:
            params = maxrate.MaxRateParams.from_dict(results.read_json(args.params))
        except (OSError, ValueError) as exc:
            parser.error(f"argument --params: cannot use {args.params!r}: {exc}")
        source = args.params
    given = {}
    for key, flag, *_ in MAXRATE_OPTIONS:
        value = getattr(args, key)
        if value is None:
            continue
        try:
            params = maxrate.MaxRateParams.from_dict({key: value}, base=params)
        except ValueError as exc:
            parser.error(f"argument {flag}: {exc}")
        given[key] = value
    if given:
        source += " + " + ", ".join(given)
    if (args.procs is None) == (args.nodes is None):
        parser.error("give exactly one of --procs and --nodes")
    if args.nodes is None:
        if args.procs % args.ppn:
            parser.error(f"argument --procs: P={args.procs} is not a multiple of --ppn {args.ppn}")
        nodes = args.procs // args.ppn
    else:
        nodes = args.nodes
    if args.model == "nap" and args.ppn < 2 and nodes > 1:
        parser.error(f"argument --ppn: NAP needs ppn >= 2 (log_ppn n is undefined), got {args.ppn}")
    eq = {"rd": 4, "smp": 5, "nap": 6}
    c = maxrate.cost(args.model, nodes, args.ppn, args.size, params, args.steps)
    inter = "(alpha + s/R_b)" if args.model == "smp" else "(alpha + ppn s/min(R_N, ppn R_b))"
    print(f"{args.model.upper()} max-rate model (Bienz et al., eq. {eq[args.model]}): "
          f"P={nodes * args.ppn} = {nodes} node(s) x {args.ppn}, s={format_size(args.size)}, "
          f"steps: {args.steps}")
    print(f"  intra-node  {c.intra_steps:.4g} x (alpha_l + beta_l s) = {format_time(c.intra)}")
    print(f"  inter-node  {c.inter_steps:.4g} x {inter} = {format_time(c.inter)}")
    print(f"  reduction   {c.compute_steps:.4g} x gamma s = {format_time(c.compute)}")
    print(f"  predicted   {format_time(c.total)}")
    others = []
    for name in maxrate.ALGORITHMS:
        if name == "nap" and args.ppn < 2 and nodes > 1:
            continue
        others.append(f"{name.upper()} {format_time(maxrate.cost(name, nodes, args.ppn, args.size, params, args.steps).total)}")
    print("  all three:  " + ", ".join(others))
    print("  parameters: " + ", ".join(f"{key}={getattr(params, key):g} {unit}"
                                       for key, _, unit, _ in MAXRATE_OPTIONS) + f" ({source})")
    return 0


def cmd_model_project(args, parser) -> int:
    """``harness model project``: the models' predictions up to --max-procs (figures, table)."""
    from .report import projection

    campaign = args.campaign
    store = results.CampaignStore(paths.results_root(), campaign)
    if campaign != "adhoc" and not store.dir.is_dir():
        parser.error(f"argument --campaign: no results for campaign {args.campaign!r} at {store.dir}")
    if args.ppn > args.max_procs:
        parser.error(f"argument --ppn: expected at most --max-procs {args.max_procs}, got {args.ppn}")
    if args.params:
        try:
            projection.load_params(args.params)
        except ValueError as exc:
            parser.error(f"argument --params: {exc}")
    try:
        out = projection.make_projection(store.summary if store.summary.is_file() else None,
                                         store.dir / "tables", paths.figures_root() / campaign,
                                         params_file=args.params, max_procs=args.max_procs,
                                         ppn=args.ppn)
    except ValueError as exc:
        parser.error(str(exc))
    pp = out["params"]
    print(f"Model projection to P={args.max_procs} (models only, no contention), campaign {campaign}")
    print(f"  Hockney parameters:  {pp.hockney_source}")
    print(f"  max-rate parameters: {pp.maxrate_source}")
    region = out["suara_region"]
    print("  measured SUARA cells: " + (f"P {region.p_min}..{region.p_max}, size "
          f"{format_size(region.s_min)}..{format_size(region.s_max)} ({region.cells} cells)"
          if region else "none"))
    for ppn, r in sorted(out["node_aware_regions"].items()):
        print(f"  measured RD/SMP/NAP cells at ppn {ppn}: P {r.p_min}..{r.p_max}, size "
              f"{format_size(r.s_min)}..{format_size(r.s_max)} ({r.cells} cells)")
    print()
    print(projection.tables.plain_markdown(projection.HEADER, projection.table_rows(out["table"])))
    for m, f in out["fits"].items():
        print(f"  {format_size(m)}: best grid speedup ~ P^{f['exponent_best_single']:.2f} over the "
              f"best single, ~ P^{f['exponent_rs']:.2f} over rs (fit over P >= {projection.FIT_FROM})")
    for path in out["written"]:
        print(f"wrote {path}")
    return 0


def _add_maxrate(msub) -> None:
    names = {"rd": "recursive doubling (eq. 4)", "smp": "SMP, master per node (eq. 5)",
             "nap": "node-aware parallel NAP (eq. 6)"}
    for name, what in names.items():
        q = msub.add_parser(name, help=f"max-rate model of {what} (Bienz et al.)",
                            description=f"Predicted cost of {what} with the max-rate model "
                                        "(harness/maxrate.py); every parameter can be set.",
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        q.add_argument("--procs", "-n", type=_int_at_least(1), default=None,
                       help="processes P (or give --nodes)")
        q.add_argument("--nodes", type=_int_at_least(1), default=None, help="nodes n")
        q.add_argument("--ppn", type=_int_at_least(1), required=True, help="processes per node")
        q.add_argument("--size", type=_typed(parse_size, "size"), required=True,
                       help="bytes per process, e.g. 8B, 2KiB")
        q.add_argument("--steps", choices=("paper", "ceil"), default="paper",
                       help="real-valued logarithms as printed, or whole steps")
        q.add_argument("--params", default=None,
                       help="JSON file with any of alpha_l, beta_l, alpha, R_b, R_N, gamma, or "
                            "results/<c>/model_params.json of `harness fit` (its maxrate section)")
        for key, flag, unit, text in MAXRATE_OPTIONS:
            q.add_argument(flag, dest=key, type=_typed(float, "number"), default=None,
                           help=f"{text} ({unit}); default from --params or the defaults")
        q.set_defaults(func=cmd_model_maxrate)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness", description="Allreduce experiment harness: measure and "
                     "compare MPI allreduce algorithms across libraries, P, sizes and delays.")
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub)
    p = sub.add_parser("plan", help="check the config, expand it to cells and runs, print counts",
                       description="Validate the config and expand it: cells per experiment, "
                                   "runs (one MPI launch each), with --runs the list of runs.")
    p.add_argument("--config", default=None, help="config file (default config/experiments.yaml)")
    p.add_argument("--runs", action="store_true", help="list every run")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("exec", help="execute a rendered run spec (used by the workflow)")
    p.add_argument("spec", help="results/<campaign>/jobs/<run>.json")
    p.add_argument("--timeout", type=_typed(parse_time, "time"), default=None,
                   help="wall-time limit; past it the run is killed and recorded as timeout")
    p.set_defaults(func=cmd_exec)
    p = sub.add_parser("model", help="cost models: SUARA2's choice; max-rate RD, SMP, NAP")
    msub = p.add_subparsers(dest="model", required=True, parser_class=_Parser)
    q = msub.add_parser("suara2", help="SUARA2 selection (Algorithm 2) for P and a message size",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    q.add_argument("--procs", "-n", type=_int_at_least(1), required=True)
    q.add_argument("--size", type=_typed(parse_size, "size"), required=True)
    q.add_argument("--params", default="paper",
                   help="'paper' (SUARA Table 4) or a JSON file of fitted parameters")
    q.add_argument("--rs-segments", choices=["stage", "global"], default=None,
                   help="rs segment count per stage m/(m_s n) (eqs. 7, 9, 13) or over all P as "
                        "eq. (11) writes it (default: the parameters', 'stage' for paper)")
    q.set_defaults(func=cmd_model_suara2)
    p = sub.add_parser("fit", help="fit the Hockney models (alpha, beta per algorithm, gamma) "
                       "to a campaign's summary", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Linear regression of each Table 1 model over the campaign's "
                                   "native allreduce cells (P and m varied); from ping-pong cells "
                                   "Hockney alpha, beta per library and the max-rate parameters; "
                                   "gamma from the reduce_local cells (else a timed local "
                                   "reduction here). Writes results/<campaign>/model_params.json, "
                                   "usable as `harness model suara2|rd|smp|nap --params FILE`.")
    p.add_argument("campaign", help="campaign name (results/<campaign>/summary.csv)")
    p.add_argument("--library", default="openmpi", choices=["mpich", "openmpi", "impi"],
                   help="library of the Table 1 fit and of the max-rate parameters")
    p.add_argument("--source", default="native", choices=["native", "harness"],
                   help="fit Open MPI's native algorithms or the harness's own")
    p.add_argument("--gamma", type=_positive_float, default=None,
                   help="gamma in s/B (default: from the reduce_local cells, else measured "
                        "here with a local reduction)")
    p.add_argument("--output", "-o", default=None, help="output JSON (default results/<campaign>/model_params.json)")
    p.set_defaults(func=cmd_fit)
    _add_maxrate(msub)
    q = msub.add_parser("project", help="the models' predictions past the cluster, up to "
                        "--max-procs: SUARA2 vs the best single algorithm, RD/SMP/NAP",
                        description="Maps over (P, size) of the winner predicted by the Hockney "
                                    "models (SUARA2 vs Open MPI's six algorithms) and the max-rate "
                                    "model (RD, SMP, NAP), SUARA2's speedup against P with a "
                                    "sqrt(P) fit, and a table; the campaign's measured region is "
                                    "outlined. Writes figures/<campaign>/projection_*.{png,pdf} and "
                                    "results/<campaign>/tables/projection.{md,tex,csv}.",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    q.add_argument("--params", default=None,
                   help="JSON file: harness fit's model_params.json (Hockney keys, optional "
                        "'maxrate' object), or 'paper' (Table 4 and illustrative max-rate "
                        "values); default the campaign's model_params.json, else 'paper'")
    q.add_argument("--campaign", default="adhoc",
                   help="campaign whose measured region is outlined and whose files are written")
    q.add_argument("--max-procs", type=_int_at_least(4), default=16384, help="largest P")
    q.add_argument("--ppn", type=_int_at_least(2), default=16,
                   help="processes per node of the RD/SMP/NAP map (the campaign's ppn values too)")
    q.set_defaults(func=cmd_model_project)
    p = sub.add_parser("status", help="a campaign's cells by status, fitting the cores or oversubscribed")
    p.add_argument("campaign", help="campaign name (results/<campaign>/summary.csv)")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser(
        "check", help="validate a campaign's results store; exit 1 naming every inconsistency",
        description="Check results/<campaign>/ against itself: every summary row has its run "
                    "document and raw repetitions; n, mean, CI and status recomputed from the "
                    "raw repetitions equal the stored ones; the stopping point is the first "
                    "repetition where the rule held; no duplicate cells; provenance present; "
                    "the job scripts' SHA-256 as recorded. A damaged run document is rebuilt "
                    "from its journal where the journal holds it.")
    _campaign_args(p, "the campaign's config, to check only its planned runs (default: "
                      "config/experiments.yaml when it defines this campaign)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser(
        "retry", help="measure again the failed and timeout cells of a campaign, nothing else",
        usage="harness retry [-h] [--configfile CONFIGFILE] [--dry-run] [--no-run] campaign "
              "[-- SNAKEMAKE ARGUMENTS ...]",
        description="Reset every run with failed or timeout cells (or a damaged file): its run "
                    "document moves to results/<campaign>/retried/, then the workflow runs "
                    "again. Runs resume from their journal, so cells that finished (ok, "
                    "not-converged, wrong) are not measured again. Arguments after -- go to "
                    "snakemake, e.g. `harness retry default -- --profile slurm`.")
    _campaign_args(p, "the config the campaign was run with (default config/experiments.yaml)")
    p.add_argument("--dry-run", action="store_true", help="list what would be retried, change nothing")
    p.add_argument("--no-run", action="store_true",
                   help="reset the runs but do not start the workflow")
    p.set_defaults(func=cmd_retry)
    p = sub.add_parser(
        "tune", help="turn a campaign's BEST into each library's own tuning file",
        description="Per library, a decision table (P range, message-size range) -> algorithm "
                    "from the campaign's summary and confirmation stage: an algorithm replaces "
                    "AUTO only where it is faster beyond its confidence interval; neighbouring "
                    "sizes with the same winner merge, boundaries at geometric midpoints. "
                    "Writes results/<campaign>/tuning/: decisions.csv, <library>.json, the "
                    "library's own files (Open MPI rules file, MPICH selection JSON, Intel MPI "
                    "I_MPI_ADJUST_ALLREDUCE conditions) and <library>.env, the lines that "
                    "deploy them. Run them with algorithm native:tuned and parameter "
                    "tuning=<campaign>.")
    _campaign_args(p, "the config the campaign was run with (needed by --verify; default "
                      "config/experiments.yaml)")
    p.add_argument("--verify", action="store_true",
                   help="then measure AUTO vs native:tuned in fresh interleaved launches at the "
                        "measured and held-out points (and Intel MPI's autotuner); writes "
                        "tables/tuned.* and figures tuned_<library>.*")
    p.set_defaults(func=cmd_tune)
    p = sub.add_parser("algorithms", help="list every library's forcible algorithms")
    p.set_defaults(func=cmd_algorithms)
    p = sub.add_parser("install", help="install the MPI libraries' wheels under .mpi/ (idempotent)")
    p.set_defaults(func=cmd_install)
    p = sub.add_parser("doctor", help="each library's version string and whether its launcher starts")
    p.set_defaults(func=cmd_doctor)
    from .dnn.commands import register as register_dnn  # `harness dnn traces`

    register_dnn(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `harness retry <c> -- <snakemake arguments>`: what follows -- goes to snakemake
    passthrough = []
    if argv[:1] == ["retry"] and "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1:]
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    sub = parser._subparsers._group_actions[0].choices[args.command]  # for one-line errors
    if args.command == "model":
        sub = sub._subparsers._group_actions[0].choices[args.model]
    try:
        return args.func(args, sub)
    except KeyboardInterrupt:
        print("interrupted; rerun to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
