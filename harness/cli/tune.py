"""``harness tune``: what a campaign's measurements say about each library's selection, one
command each (``harness tune --help``):

- ``files CAMPAIGN``: the campaign's BEST turned into each library's own tuning files
  (``harness tune CAMPAIGN`` is short for it);
- ``verify CAMPAIGN``: the files, then AUTO and the tuned selection measured against each
  other in fresh launches;
- ``regret CAMPAIGN``: the selection policies replayed against the campaign as ground truth
  (``harness.report.regret``);
- ``adaptive CAMPAIGN``: the config's native cells measured in rounds a surrogate chooses, then
  the files (``harness.campaign.adaptive``);
- ``compare CAMPAIGN TRUTH``: the campaign's tuning files against the exhaustive campaign's.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .. import paths
from ..analysis.forecast import DEFAULT_SURROGATE, SURROGATES
from ..campaign import config, tune, tune_verify
from ..results.view import STATISTICS
from .args import OneLineErrorParser, campaign_args, cells_or_share, int_at_least, load_campaign

SUBCOMMANDS = ("files", "verify", "regret", "adaptive", "compare")
# the flags that chose a command before each had its own
MOVED = {"--verify": "verify", "--regret": "regret", "--adaptive": "adaptive",
         "--compare": "compare"}
CONFIG_HELP = ("the config the campaign was run with (default config/experiments.yaml; its "
               "report.statistic is the default of --statistic)")


def register(sub) -> None:
    """Add ``tune`` and its commands to the subparsers ``sub``."""
    p = sub.add_parser(
        "tune", help="tuning files from a campaign, their verification, regret replays, "
                     "adaptive tuning, comparison",
        description="What a campaign's measurements say about each library's selection. "
                    "`harness tune CAMPAIGN` is short for `harness tune files CAMPAIGN`.")
    commands = p.add_subparsers(dest="tune_command", required=True, metavar="COMMAND",
                                parser_class=OneLineErrorParser)
    for add in (_files, _verify, _regret, _adaptive, _compare):
        add(commands)


def shorthand(argv: list[str]) -> list[str]:
    """``harness tune CAMPAIGN ...`` as ``harness tune files CAMPAIGN ...``."""
    if len(argv) > 1 and argv[1] not in SUBCOMMANDS and not argv[1].startswith("-"):
        return [argv[0], "files", *argv[1:]]
    return argv


class _Moved(argparse.Action):
    """A flag that chose a command before each had its own: an error naming the command."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        command = MOVED[option_string]
        parser.error(f"argument {option_string}: replaced by the command `harness tune "
                     f"{command} CAMPAIGN{' TRUTH' if command == 'compare' else ''}` (harness "
                     f"tune {command} --help)")


def _statistic(p) -> None:
    p.add_argument("--statistic", choices=STATISTICS, default=None,
                   help="the times the decisions compare: mean (Student-t interval) or median "
                        "(order-statistics interval) (default: the report.statistic of "
                        "--configfile when given, else mean)")


def _surrogate(g) -> None:
    g.add_argument("--trees", type=int_at_least(1), default=None,
                   help="trees of the random forest, or posterior draws of the Gaussian "
                        "process (default: 200)")
    g.add_argument("--surrogate", choices=sorted(SURROGATES), default=None,
                   help="the model that guesses the unmeasured cells: forest (a random forest "
                        "of log time) or gp (a Gaussian process of log time, one kernel over "
                        "the features and the algorithm; up to 3000 cells per library) "
                        "(default: the tune.surrogate of --configfile, else forest)")


FILES = ("Per library, a decision table (P range, message-size range) -> algorithm from the "
         "campaign's summary and confirmation stage: an algorithm replaces AUTO only where it "
         "is faster beyond its confidence interval; neighbouring sizes with the same winner "
         "merge, boundaries at geometric midpoints. Writes results/<campaign>/tuning/: "
         "decisions.csv, <library>.json, the library's own files (Open MPI rules file, MPICH "
         "selection JSON, Intel MPI I_MPI_ADJUST_ALLREDUCE conditions) and <library>.env, the "
         "lines that deploy them. Run them with algorithm native:tuned and parameter "
         "tuning=<campaign>.")


def _files(commands) -> None:
    p = commands.add_parser("files", help="turn a campaign's BEST into each library's own "
                                          "tuning files", description=FILES)
    campaign_args(p, CONFIG_HELP)
    _statistic(p)
    for flag in MOVED:
        p.add_argument(flag, action=_Moved)
    p.set_defaults(func=cmd_files)


def _verify(commands) -> None:
    p = commands.add_parser(
        "verify", help="the tuning files, then AUTO vs native:tuned in fresh launches",
        description="Write the tuning files (as `harness tune files`), then measure, per "
                    "library, AUTO vs native:tuned in fresh interleaved launches at the "
                    "measured and held-out points (and BEST, and Intel MPI's autotuner); "
                    "writes tuning/verify-<library>.json, tables/tuned.* and figures "
                    "tuned_<library>.*. The rule verify_tuned of the workflow does the same.")
    campaign_args(p, "the config the campaign was run with: its stopping rule, confirm.time_"
                     "budget and tune: settings measure the launches (default "
                     "config/experiments.yaml)")
    _statistic(p)
    p.set_defaults(func=cmd_verify)


def _regret(commands) -> None:
    p = commands.add_parser(
        "regret", help="replay the selection policies against an exhaustive campaign",
        description="Take the campaign's summary as the exhaustive ground truth and replay, "
                    "per library, the adaptive policy, random cells and the fixed grid against "
                    "it; writes tables/regret.*, tables/regret_curve.csv, "
                    "tables/regret_generalisation.* and figures/<campaign>/regret_<library>.*. "
                    "Measures nothing.")
    campaign_args(p, CONFIG_HELP + " and its tune.surrogate that of --surrogate")
    _statistic(p)
    p.add_argument("--judge", metavar="CAMPAIGN", nargs="+", action="extend", default=None,
                   help="another exhaustive campaign of the same cells (run minutes or days "
                        "apart): every replayed choice is also timed in its launches; writes "
                        "tables/regret_judged.* and a third panel per figure. One campaign's "
                        "BEST carries its launches' noise; the judge says what a choice is "
                        "worth in fresh launches, and what the exhaustive BEST itself is worth. "
                        "Several campaigns are pooled (the mean of their times per cell), a "
                        "judge with less noise")
    p.add_argument("--pool", metavar="CAMPAIGN", nargs="+", action="extend", default=None,
                   help="other exhaustive campaigns of the same cells, pooled with this one "
                        "into the truth (per cell the mean of their times): a truth with less "
                        "of one campaign's noise; the outputs stay under this campaign")
    p.add_argument("--seeds", type=int_at_least(1), default=3,
                   help="replays of the seeded policies (adaptive, random) per library; the "
                        "table gives the median and the range (default: %(default)s)")
    p.add_argument("--batch", type=int_at_least(1), default=None,
                   help="cells per batch of each replay (default: a 25th of each library's "
                        "cells, at least 4)")
    _surrogate(p)
    p.set_defaults(func=cmd_regret)


def _adaptive(commands) -> None:
    p = commands.add_parser(
        "adaptive", help="measure the config's native cells in rounds a surrogate chooses, "
                         "then write the tuning files",
        description="Measure the config's native cells (every forced algorithm and AUTO at "
                    "every planned point) in rounds chosen by a surrogate until its predicted "
                    "regret is below 5 %% with 95 %% confidence or the budget is spent, into "
                    "results/<campaign>/ (the campaign may differ from the config's), then "
                    "write the tuning files as `harness tune files`. Rerun to resume.")
    campaign_args(p, "the config whose native cells are the candidates; its tune: block "
                     "gives the defaults of --budget, --batch and --surrogate (default "
                     "config/experiments.yaml)")
    p.add_argument("--budget", type=cells_or_share, default=None,
                   help="at most this many cells per library chosen by the surrogate, or a "
                        "share of each library's cells such as 25%%; the closing round then "
                        "adds AUTO and the predicted winner wherever either is missing "
                        "(default: the config's tune.budget)")
    p.add_argument("--batch", type=int_at_least(1), default=None,
                   help="cells measured per library and round (default: the config's "
                        "tune.batch, else 8)")
    _surrogate(p)
    p.add_argument("--profile", default=None,
                   help="the Snakemake profile each round runs with, e.g. slurm")
    p.add_argument("--no-close", dest="close", action="store_false",
                   help="skip the closing round (AUTO and the predicted winner measured wherever "
                        "either is missing, so that every rule stands on measurements)")
    p.set_defaults(func=cmd_adaptive)


def _compare(commands) -> None:
    p = commands.add_parser(
        "compare", help="set a campaign's tuning files against an exhaustive campaign's",
        description="Set the tuning files of CAMPAIGN against those of the exhaustive campaign "
                    "TRUTH (both made by `harness tune files`) at every point TRUTH measured: "
                    "the algorithm each runs, their regret in TRUTH's measurements and the cost "
                    "where they differ, and how far apart the two campaigns time the same "
                    "cells; writes tables/tuning_vs_TRUTH.* under CAMPAIGN.")
    campaign_args(p, CONFIG_HELP)
    p.add_argument("truth", help="the exhaustive campaign whose tuning files and measurements "
                                 "judge CAMPAIGN's")
    _statistic(p)
    p.set_defaults(func=cmd_compare)


def statistic(args, parser) -> str:
    """``--statistic`` as given, else the config's ``report.statistic`` (``--configfile``),
    else mean."""
    if args.statistic or not args.configfile:
        return args.statistic or "mean"
    return (_config(args.configfile, parser).report or {}).get("statistic", "mean")


def _config(path, parser) -> config.Config:
    try:
        return config.load(path)
    except config.ConfigError as exc:
        parser.error(f"argument --configfile: {exc}")


@dataclass(frozen=True)
class Surrogate:
    """The model that guesses the unmeasured cells, and its size (None: its default)."""

    name: str
    trees: int | None = None

    @classmethod
    def of(cls, args, settings: dict) -> Surrogate:
        """``--surrogate`` and ``--trees`` as given, else the config's ``tune:`` block
        (``settings``), else the forest."""
        return cls(args.surrogate or settings.get("surrogate", DEFAULT_SURROGATE), args.trees)

    def options(self) -> dict:
        return {"surrogate": self.name, **({} if self.trees is None else {"trees": self.trees})}


def _tuned(args, parser) -> dict:
    """Each library's decision table and tuning files (``harness.campaign.tune.tune``)."""
    try:
        return tune.tune(paths.results_root(), args.campaign, statistic=statistic(args, parser))
    except tune.TuneError as exc:
        parser.error(str(exc))


def cmd_files(args, parser) -> int:
    _tuned(args, parser)
    return 0


def cmd_verify(args, parser) -> int:
    """The tuning files, then per library the fresh launches and their table and figures."""
    campaign = load_campaign(args.configfile, args.campaign, parser, "campaign")
    docs = _tuned(args, parser)
    from ..report import tuned  # imports matplotlib: only when verifying
    from ..report.inputs import Inputs

    outs = []
    for library in sorted(docs):
        out = campaign.store.dir / "tuning" / f"verify-{library}.json"
        tune_verify.run_library(campaign, library, out)
        outs.append(out)
    for path in tuned.make(Inputs.load(campaign.store.dir, figures=campaign.figures,
                                       libraries=sorted(docs), documents=outs)):
        print(path)
    return 0


def _summaries(args, parser, arg: str, names, avoid: dict) -> list:
    """The summaries of the campaigns ``names`` (``--judge``, ``--pool``), each once; a name
    in ``avoid`` is an error saying what it already is."""
    out = []
    for name in dict.fromkeys(names or []):
        if name in avoid:
            parser.error(f"argument {arg}: got {name!r}, {avoid[name]}; expected another "
                         f"campaign of the same cells"
                         + (", not judged" if arg == "--pool" else ""))
        try:
            out.append(tune.load(paths.results_root(), name, statistic=args.statistic))
        except tune.TuneError as exc:
            parser.error(f"argument {arg}: {exc}")
    return out


def cmd_regret(args, parser) -> int:
    """The regret curves, table and generalisation, paths printed."""
    args.statistic = statistic(args, parser)
    try:
        summary = tune.load(paths.results_root(), args.campaign, statistic=args.statistic)
    except tune.TuneError as exc:
        parser.error(f"argument campaign: {exc}")
    itself = {args.campaign: "the campaign itself"}
    judge = _summaries(args, parser, "--judge", args.judge, itself)
    pool = _summaries(args, parser, "--pool", args.pool,
                      {**{n: "also a judge" for n in args.judge or []}, **itself})
    shared = int(summary["shared_cpu"].eq(True).sum()) if "shared_cpu" in summary else 0
    if shared:  # the truth itself disturbed (harness/measure/placement.py)
        print(f"{args.campaign}: {shared} of {len(summary)} cells ran with two ranks "
              f"on one CPU (shared_cpu in summary.csv): their times, and the regrets replayed "
              f"against them, are disturbed; measure them again on a quiet machine")
    from ..report import regret  # imports matplotlib and scikit-learn: only here

    settings = (_config(args.configfile, parser).tune or {}) if args.configfile else {}
    try:
        replay = regret.ReplaySettings(
            seeds=args.seeds, batch=args.batch, log=lambda line: print(line, flush=True),
            judge_name="+".join(dict.fromkeys(args.judge or ["judge"])),
            truth_name="+".join(dict.fromkeys([args.campaign, *(args.pool or [])])),
            **Surrogate.of(args, settings).options())
        written = regret.make_regret(
            summary, paths.results_root() / args.campaign / "tables",
            paths.figures_root() / args.campaign, replay, judge=judge or None, pool=pool)
    except ValueError as exc:
        arg = next((f"--{w}" for w in ("judge", "surrogate", "pool") if str(exc).startswith(w)),
                   None)
        parser.error(f"argument {arg}: {exc}" if arg
                     else f"argument campaign: {args.campaign}: {exc}")
    for path in written:
        print(path)
    return 0


def cmd_adaptive(args, parser) -> int:
    """The adaptive driver (harness/campaign/adaptive.py), then the tuning files."""
    path = args.configfile or str(config.DEFAULT_CONFIG)
    settings = _config(path, parser).tune or {}
    budget = args.budget or settings.get("budget")
    if budget is None:
        parser.error(f"argument --budget: required: the cells per library to measure at most, "
                     f"or their share such as 25% (or tune.budget in {path})")
    from ..campaign import adaptive  # imports scikit-learn: only here

    try:
        batch = args.batch or settings.get("batch") or 8
        driver = adaptive.Driver(path, args.campaign, budget, batch,
                                 profile=args.profile, close=args.close,
                                 log=lambda line: print(line, flush=True),
                                 **Surrogate.of(args, settings).options())
        driver.run()
    except tune.TuneError as exc:
        parser.error(f"argument --configfile: {exc}" if str(exc).startswith(path)
                     else str(exc))
    return 0


def cmd_compare(args, parser) -> int:
    """This campaign's tuning files against the exhaustive campaign TRUTH's."""
    root, stat = paths.results_root(), statistic(args, parser)
    try:
        summary = tune.load(root, args.truth, statistic=stat)
    except tune.TuneError as exc:
        parser.error(f"argument truth: {exc}")
    from ..report import tuning_compare as regret  # imports scikit-learn: only here

    try:
        frame = regret.compare_tunings(summary, root / args.truth / "tuning",
                                       root / args.campaign / "tuning")
    except ValueError as exc:
        parser.error(f"argument truth: {exc}")
    for library, group in frame.groupby("library"):
        differ = group[~group["same"]]
        print(f"{library}: the same algorithm at {int(group['same'].sum())} of {len(group)} "
              f"points; mean regret {group['exhaustive_regret'].mean():.1%} (exhaustive) vs "
              f"{group['other_regret'].mean():.1%} ({args.campaign})"
              + (f"; where they differ, {args.campaign}'s choice costs "
                 f"{differ['cost'].mean():+.1%} on average" if len(differ) else ""))
    try:  # how far apart the two campaigns' times of the same cells are: the noise floor
        noise = regret.campaign_noise(summary, tune.load(root, args.campaign, statistic=stat))
    except tune.TuneError:  # tuning files without a summary of their own
        noise = regret.campaign_noise(summary, summary.iloc[:0])
    for row in noise.itertuples(index=False):
        print(f"{row.library}: the {row.cells} cells both campaigns timed differ by "
              f"{row.median_change:.1%} (median; 90th percentile {row.p90_change:.1%}): "
              f"regrets and costs below that are the launches' noise")
    for path in regret.write_comparison(frame, root / args.campaign / "tables", args.truth,
                                        args.campaign):
        print(path)
    return 0
