"""``harness run``: one cell measured and written into results/<campaign>/; with ``--cell``, a
campaign's cell measured again with the campaign's own settings.

The options are a campaign config of one experiment (``run_config``): the campaign's own
validation and plan check the cell, as for any campaign, and their errors name the option."""

from __future__ import annotations

import argparse
import json
import sys

from .. import libraries
from ..campaign import config as _config
from ..campaign import plan, rerun, runner
from ..campaign.workflow import Campaign
from ..measure import preflight
from ..memory import too_big
from ..results import store as results
from ..units import format_size, format_time
from . import run_config
from .args import load_campaign


def register(sub) -> None:
    """Add ``run`` to the subparsers ``sub``. Every option that sets a config key is checked
    by the campaign's own validation and plan (``run_config``), not by argparse."""
    p = sub.add_parser(
        "run", help="measure one cell and write it into results/<campaign>/",
        description="Measure one cell (library x algorithm x P x size x dtype x op x delay) "
                    "with the stopping rule, write it into results/<campaign>/ (replacing "
                    "that cell's older row in summary.csv) and print a short summary. The "
                    "options make a campaign config of one experiment, checked and planned "
                    "as any campaign's.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _cell_options(p)
    _stopping_options(p.add_argument_group("stopping rule"))
    _launch_options(p)
    g = p.add_argument_group("a campaign's cell")
    g.add_argument("--cell", default=None, metavar="CELL_ID",
                   help="measure this cell of --campaign again with the campaign's own settings "
                        "(every other option is ignored) and replace its result")
    g.add_argument("--configfile", "--config", default=None, dest="configfile",
                   help="a campaign config: with --cell, the campaign's (default "
                        "config/experiments.yaml); without, where --library is declared (an "
                        "installation under its libraries:)")
    p.set_defaults(func=cmd_run)


def _cell_options(p) -> None:
    """The options that make the cell: the experiment's keys in a config."""
    key = run_config.KEYS
    p.add_argument("--library", default="mpich", help="MPI library (see `harness algorithms`)")
    p.add_argument("--algorithm", default="native:auto",
                   help="native:<name> (the library's own, forced) or a harness algorithm")
    p.add_argument("--procs", "-n", type=int, default=4, help="number of MPI processes P")
    p.add_argument("--oversubscribe", action="store_true",
                   help="allow more than 4 ranks per core of this machine")
    p.add_argument("--size", default="1MiB",
                   help="message size per rank, e.g. 8B, 64KiB, 4MiB (0B: a call with no data; "
                        "a local run is refused when its 3 buffers per rank x P exceed the "
                        "available memory)")
    p.add_argument("--dtype", default="float64", metavar=run_config.metavar(key["--dtype"]))
    p.add_argument("--op", default="sum", metavar=run_config.metavar(key["--op"]))
    p.add_argument("--delay", default="none", metavar=run_config.metavar(key["--delay"]),
                   help="process-arrival delay mode")
    p.add_argument("--max-delay", default="0", help="maximum arrival delay, e.g. 20ms")
    p.add_argument("--late-rank", type=int, default=1, help="the late rank of --delay one-late")
    p.add_argument("--thread-level", default="auto",
                   metavar=run_config.metavar(key["--thread-level"]),
                   help="MPI thread level of the launch (default auto: single, or multiple where "
                        "the cell needs threads, e.g. knowledge=online)")
    p.add_argument("--timing", default="percall", metavar=run_config.metavar(key["--timing"]),
                   help="percall: each repetition synchronised and timed alone; imb: IMB-MPI1's "
                        "Allreduce loop (-sync 1), t_avg over ranks")
    p.add_argument("--buffers", default="reuse", metavar=run_config.metavar(key["--buffers"]),
                   help="reuse: every call on the same (warm) buffers; rotate: each call on the "
                        "next of enough buffer pairs to exceed the last-level cache")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm parameter, e.g. grid=4x2 or segment_size=65536 (repeatable); "
                        "workload=resnet50 (with fusion=ddp|horovod, precision=fp32|fp16) "
                        "times one training iteration's gradient calls instead, and --size is "
                        "the iteration's bytes")
    p.add_argument("--campaign", default="adhoc", help="results go to results/<campaign>/")


def _stopping_options(g) -> None:
    """The stopping rule and what each repetition measures: the config's ``stopping:``."""
    key = run_config.KEYS
    g.add_argument("--confidence", type=float, default=0.95)
    g.add_argument("--rule", default="student-t", metavar=run_config.metavar(key["--rule"]),
                   help="student-t: the mean's t-interval (the papers' rule); median-ci: the "
                        "median's order-statistics interval (no assumption on the distribution)")
    g.add_argument("--precision", type=float, default=0.025,
                   help="stop when the interval's half-width is at most this fraction of the "
                        "mean (median-ci: of the median, on both sides)")
    g.add_argument("--min-reps", type=int, default=10)
    g.add_argument("--max-reps", type=int, default=1000)
    g.add_argument("--time-budget", default="60s",
                   help="measuring time per cell before it is marked not converged")
    g.add_argument("--max-volume", default="0",
                   help="at most this many bytes of messages per cell: max_reps = "
                        "min(max_reps, volume/size) as IMB scales iterations (0: no limit)")
    g.add_argument("--imb-iterations", type=int, default=0,
                   help="calls per sample with --timing imb (0: IMB's min(1000, 40MiB/size))")
    g.add_argument("--warmup", type=int, default=3, help="uncounted repetitions")
    g.add_argument("--launches", type=int, default=1,
                   help="independent MPI launches; with more than one the mean and its CI are "
                        "taken over the launch means")
    g.add_argument("--metric", default="mean", metavar=run_config.metavar(key["--metric"]),
                   help="per-repetition elapsed time the rule is applied to")
    g.add_argument("--sync", default="auto", metavar=run_config.metavar(key["--sync"]),
                   help="start of each repetition: two barriers, or a common start time after "
                        "them (window); auto = window when a delay mode is set")
    g.add_argument("--base-compute", default="0",
                   help="compute phase every rank spends before each repetition")


def _launch_options(p) -> None:
    p.add_argument("--seed", type=int, default=0, help="seed of rand-late delays")
    p.add_argument("--timeout", default="10min", help="wall-time limit of the MPI launch")
    p.add_argument("--plugin", action="append", default=[],
                   help="Python file registering extra algorithms (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the job script, write nothing")


def _refuse_ignored(args, parser) -> None:
    """With ``--cell`` the campaign decides the cell: an option given beside it is an error."""
    defaults = vars(parser.parse_args(["--cell", args.cell]))
    for action in parser._actions:
        if action.dest in ("cell", "campaign", "configfile") or not action.option_strings:
            continue
        if getattr(args, action.dest, None) != defaults.get(action.dest):
            parser.error(f"argument {action.option_strings[0]}: not used with --cell (the "
                         f"campaign's own settings measure the cell); leave it out")


def _planned(args, parser) -> Campaign:
    """The options as a campaign of one experiment (``run_config.document``), checked and
    planned as any campaign; a one-line error naming the option otherwise."""
    declared, launch = {}, "local"
    if args.configfile:  # where --library is declared
        try:
            site = _config.load(args.configfile)
        except (OSError, _config.ConfigError) as exc:
            parser.error(f"argument --config: {exc}")
        declared, launch = site.libraries, site.launch
    try:
        doc = run_config.document(args, declared, launch)
    except ValueError as exc:  # --param without KEY=VALUE
        parser.error(f"argument --param: {exc}")
    try:
        return Campaign(doc, source=run_config.SOURCE)
    except _config.ConfigError as exc:  # InstallationError too
        parser.error(run_config.translate(str(exc), args))


def _must_fit(lib, launch: str, cell, parser, arg: str) -> None:
    """A cell launched on this machine must fit in its memory (its buffers on every rank)."""
    if lib.local and launch != "srun":
        why = too_big(cell.size, cell.procs, cell.buffers)
        if why:
            parser.error(f"argument {arg}{why}")


def _launchable(campaign: Campaign, parser):
    """The one planned cell and its installation, read and checked by the pre-flight before
    anything is launched (its setup lines, launcher, libmpi, family, a P=2 launch)."""
    for n in campaign.not_applicable.values():  # outside the catalogue's condition
        (cell,) = n.run.cells
        parser.error(f"argument --algorithm: {cell.algorithm} at P={cell.procs}, "
                     f"{format_size(cell.size)} {cell.dtype}: {n.reasons[cell.cell_id]}")
    run = next(iter(campaign.runs.values()))
    (cell,) = run.cells
    lib = plan.library_for(campaign.cfg, run.library)
    _must_fit(lib, campaign.cfg.launch, cell, parser, "--size: ")
    if not lib.installed():
        parser.error(f"argument --library: {lib.name} is not installed under {lib.prefix}; run "
                     f"`make setup`")
    try:
        return cell, libraries.restrict(lib, preflight.preflight(lib))
    except preflight.InstallationError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")


def cmd_run(args, parser) -> int:
    if args.cell:
        _refuse_ignored(args, parser)
        return _rerun_cell(args, parser)
    campaign = _planned(args, parser)
    cell, lib = _launchable(campaign, parser)
    cfg, store = campaign.cfg, campaign.store
    specs = [runner.prepare(r, lib, store, campaign.settings(), seed=cfg.seed,
                            plugins=cfg.plugins, config_hash=cfg.digest,
                            launches=int(cfg.stopping["launches"]))
             for r in campaign.runs.values()]
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
        outcome = runner.execute(store, spec, timeout=cfg.run_walltime)
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
    for planned, cell in hits:  # launched here: it must fit
        _must_fit(plan.library_for(campaign.cfg, planned.library), campaign.cfg.launch, cell,
                  parser, f"--cell: {args.cell}: ")
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


def _number(value, spec: str) -> str:
    """``value`` formatted, or n/a where there is none (a single repetition has no lag)."""
    return format(value, spec) if _present(value) else "n/a"


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
                  f"{_number(r.lag1, '.2f')} (effective n {_number(r.effective_n, '.0f')})"
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
