"""``harness tune``: a campaign's BEST turned into each library's own tuning files; with
``--verify``, AUTO and the tuned selection measured against each other in fresh launches;
with ``--regret``, the selection policies replayed against the campaign as ground truth
(``harness.report.regret``)."""

from __future__ import annotations

from .. import paths
from ..analysis.forecast import DEFAULT_SURROGATE, SURROGATES
from ..campaign import config, tune, tune_verify
from ..results.view import STATISTICS
from .args import campaign_args, cells_or_share, int_at_least, load_campaign


def register(sub) -> None:
    """Add ``tune`` to the subparsers ``sub``."""
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
    campaign_args(p, "the config the campaign was run with (needed by --verify; default "
                      "config/experiments.yaml)")
    p.add_argument("--verify", action="store_true",
                   help="then measure AUTO vs native:tuned in fresh interleaved launches at the "
                        "measured and held-out points (and Intel MPI's autotuner); writes "
                        "tables/tuned.* and figures tuned_<library>.*")
    p.add_argument("--statistic", choices=STATISTICS, default=None,
                   help="the times the decisions compare: mean (Student-t interval) or median "
                        "(order-statistics interval) (default: the report.statistic of "
                        "--configfile when given, else mean)")
    g = p.add_argument_group("regret curves (--regret)")
    g.add_argument("--regret", action="store_true",
                   help="instead of tuning: take the campaign's summary as the exhaustive ground "
                        "truth and replay, per library, the adaptive policy, random cells and "
                        "the fixed grid against it; writes tables/regret.*, "
                        "tables/regret_curve.csv, tables/regret_generalisation.* and "
                        "figures/<campaign>/regret_<library>.*")
    g.add_argument("--judge", metavar="CAMPAIGN", nargs="+", action="extend", default=None,
                   help="another exhaustive campaign of the same cells (run minutes or days "
                        "apart): every replayed choice is also timed in its launches; writes "
                        "tables/regret_judged.* and a third panel per figure. One campaign's "
                        "BEST carries its launches' noise; the judge says what a choice is "
                        "worth in fresh launches, and what the exhaustive BEST itself is worth. "
                        "Several campaigns are pooled (the mean of their times per cell), a "
                        "judge with less noise")
    g.add_argument("--pool", metavar="CAMPAIGN", nargs="+", action="extend", default=None,
                   help="other exhaustive campaigns of the same cells, pooled with this one "
                        "into the truth (per cell the mean of their times): a truth with less "
                        "of one campaign's noise; the outputs stay under this campaign")
    g.add_argument("--seeds", type=int_at_least(1), default=3,
                   help="replays of the seeded policies (adaptive, random) per library; the "
                        "table gives the median and the range (default: %(default)s)")
    g.add_argument("--batch", type=int_at_least(1), default=None,
                   help="cells per batch: --regret, of each replay (default: a 25th of each "
                        "library's cells, at least 4); --adaptive, measured per library and "
                        "round (default: the config's tune.batch, else 8)")
    g.add_argument("--trees", type=int_at_least(1), default=None,
                   help="trees of the random forest, or posterior draws of the Gaussian "
                        "process (default: 200)")
    g.add_argument("--surrogate", choices=sorted(SURROGATES), default=None,
                   help="the model that guesses the unmeasured cells: forest (a random forest "
                        "of log time) or gp (a Gaussian process of log time, one kernel over "
                        "the features and the algorithm; up to 3000 cells per library) "
                        "(default: the tune.surrogate of --configfile, else forest)")
    g.add_argument("--compare", metavar="TRUTH", default=None,
                   help="instead of tuning: set this campaign's tuning files against those of "
                        "the exhaustive campaign TRUTH at every point TRUTH measured (the "
                        "algorithm each runs, their regret and the cost where they differ); "
                        "writes tables/tuning_vs_TRUTH.*")
    a = p.add_argument_group("adaptive tuning (--adaptive)")
    a.add_argument("--adaptive", action="store_true",
                   help="measure the config's native cells in rounds chosen by a surrogate "
                        "(every forced algorithm and AUTO at every planned point) until its "
                        "predicted regret is below 5 %% with 95 %% confidence or the budget is "
                        "spent, into results/<campaign>/ (the campaign may differ from the "
                        "config's), then write the tuning files; rerun to resume")
    a.add_argument("--budget", type=cells_or_share, default=None,
                   help="at most this many cells per library chosen by the surrogate, or a "
                        "share of each library's cells such as 25%%; the closing round then "
                        "adds AUTO and the predicted winner wherever either is missing "
                        "(default: the config's tune.budget)")
    a.add_argument("--profile", default=None,
                   help="the Snakemake profile each round runs with, e.g. slurm")
    a.add_argument("--no-close", dest="close", action="store_false",
                   help="skip the closing round (AUTO and the predicted winner measured wherever "
                        "either is missing, so that every rule stands on measurements)")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args, parser) -> int:
    """Each library's decision table and tuning files; with --verify, the fresh launches;
    with --regret, the replayed regret curves instead."""
    args.statistic = statistic(args, parser)
    if args.regret:
        return cmd_regret(args, parser)
    if args.compare:
        return cmd_compare(args, parser)
    if args.adaptive:
        return cmd_adaptive(args, parser)
    try:
        docs = tune.tune(paths.results_root(), args.campaign, statistic=args.statistic)
    except tune.TuneError as exc:
        parser.error(str(exc))
    if not args.verify:
        return 0
    from ..report import tuned  # imports matplotlib: only when verifying
    from ..report.inputs import Inputs

    campaign = load_campaign(args.configfile, args.campaign, parser, "campaign")
    outs = []
    for library in sorted(docs):
        out = campaign.store.dir / "tuning" / f"verify-{library}.json"
        tune_verify.run_library(campaign, library, out)
        outs.append(out)
    for path in tuned.make(Inputs.load(campaign.store.dir, figures=campaign.figures,
                                       libraries=sorted(docs), documents=outs)):
        print(path)
    return 0


def statistic(args, parser) -> str:
    """``--statistic`` as given, else the config's ``report.statistic`` (``--configfile``),
    else mean."""
    if args.statistic or not args.configfile:
        return args.statistic or "mean"
    try:
        cfg = config.load(args.configfile)
    except config.ConfigError as exc:
        parser.error(f"argument --configfile: {exc}")
    return (cfg.report or {}).get("statistic", "mean")


def surrogate(args, parser) -> str:
    """``--surrogate`` as given, else the config's ``tune.surrogate`` (``--configfile``), else
    the forest."""
    if args.surrogate or not args.configfile:
        return args.surrogate or DEFAULT_SURROGATE
    try:
        cfg = config.load(args.configfile)
    except config.ConfigError as exc:
        parser.error(f"argument --configfile: {exc}")
    return (cfg.tune or {}).get("surrogate", DEFAULT_SURROGATE)


def cmd_regret(args, parser) -> int:
    """The regret curves, table and generalisation of ``--regret``, paths printed."""
    if args.verify or args.adaptive:
        parser.error(f"argument --regret: not allowed with "
                     f"{'--verify' if args.verify else '--adaptive'} (--regret replays the "
                     f"campaign's results and measures nothing)")
    try:
        summary = tune.load(paths.results_root(), args.campaign, statistic=args.statistic)
    except tune.TuneError as exc:
        parser.error(f"argument campaign: {exc}")
    judge = []
    for name in dict.fromkeys(args.judge or []):
        if name == args.campaign:
            parser.error(f"argument --judge: got {name!r}, the campaign itself; expected "
                         f"another campaign of the same cells")
        try:
            judge.append(tune.load(paths.results_root(), name, statistic=args.statistic))
        except tune.TuneError as exc:
            parser.error(f"argument --judge: {exc}")
    pool = []
    for name in dict.fromkeys(args.pool or []):
        if name == args.campaign or name in (args.judge or []):
            parser.error(f"argument --pool: got {name!r}, "
                         + ("the campaign itself" if name == args.campaign else "also a judge")
                         + "; expected another campaign of the same cells, not judged")
        try:
            pool.append(tune.load(paths.results_root(), name, statistic=args.statistic))
        except tune.TuneError as exc:
            parser.error(f"argument --pool: {exc}")
    shared = int(summary["shared_cpu"].eq(True).sum()) if "shared_cpu" in summary else 0
    if shared:  # the truth itself disturbed (harness/measure/placement.py)
        print(f"{args.campaign}: {shared} of {len(summary)} cells ran with two ranks "
              f"on one CPU (shared_cpu in summary.csv): their times, and the regrets replayed "
              f"against them, are disturbed; measure them again on a quiet machine")
    from ..report import regret  # imports matplotlib and scikit-learn: only here

    options = {"surrogate": surrogate(args, parser),
               **({} if args.trees is None else {"trees": args.trees})}
    try:
        written = regret.make_regret(
            summary, paths.results_root() / args.campaign / "tables",
            paths.figures_root() / args.campaign, seeds=args.seeds, batch=args.batch,
            log=lambda line: print(line, flush=True), judge=judge or None,
            judge_name="+".join(dict.fromkeys(args.judge or ["judge"])), pool=pool,
            truth_name="+".join(dict.fromkeys([args.campaign, *(args.pool or [])])), **options)
    except ValueError as exc:
        parser.error(f"argument --judge: {exc}" if str(exc).startswith("judge")
                     else f"argument --surrogate: {exc}" if str(exc).startswith("surrogate")
                     else f"argument --pool: {exc}" if str(exc).startswith("pool")
                     else f"argument campaign: {args.campaign}: {exc}")
    for path in written:
        print(path)
    return 0


def cmd_adaptive(args, parser) -> int:
    """The adaptive driver (harness/campaign/adaptive.py), then the tuning files."""
    if args.verify:
        parser.error("argument --adaptive: not allowed with --verify (run `harness tune "
                     f"{args.campaign} --verify` after it)")
    path = args.configfile or str(config.DEFAULT_CONFIG)
    try:
        cfg = config.load(path)
    except config.ConfigError as exc:
        parser.error(f"argument --configfile: {exc}")
    settings = cfg.tune or {}
    budget = args.budget or settings.get("budget")
    if budget is None:
        parser.error(f"argument --budget: required with --adaptive: the cells per library to "
                     f"measure at most, or their share such as 25% (or tune.budget in {path})")
    batch = args.batch or settings.get("batch") or 8
    from ..campaign import adaptive  # imports scikit-learn: only here

    options = {"surrogate": args.surrogate or settings.get("surrogate", DEFAULT_SURROGATE),
               **({} if args.trees is None else {"trees": args.trees})}
    try:
        driver = adaptive.Driver(path, args.campaign, budget, batch, profile=args.profile,
                                 close=args.close, log=lambda line: print(line, flush=True),
                                 **options)
        driver.run()
    except tune.TuneError as exc:
        parser.error(f"argument --configfile: {exc}" if str(exc).startswith(path)
                     else str(exc))
    return 0


def cmd_compare(args, parser) -> int:
    """``--compare TRUTH``: this campaign's tuning files against the exhaustive campaign's."""
    root = paths.results_root()
    try:
        summary = tune.load(root, args.compare, statistic=args.statistic)
    except tune.TuneError as exc:
        parser.error(f"argument --compare: {exc}")
    from ..report import tuning_compare as regret  # imports scikit-learn: only here

    try:
        frame = regret.compare_tunings(summary, root / args.compare / "tuning",
                                       root / args.campaign / "tuning")
    except ValueError as exc:
        parser.error(f"argument --compare: {exc}")
    for library, group in frame.groupby("library"):
        differ = group[~group["same"]]
        print(f"{library}: the same algorithm at {int(group['same'].sum())} of {len(group)} "
              f"points; mean regret {group['exhaustive_regret'].mean():.1%} (exhaustive) vs "
              f"{group['other_regret'].mean():.1%} ({args.campaign})"
              + (f"; where they differ, {args.campaign}'s choice costs "
                 f"{differ['cost'].mean():+.1%} on average" if len(differ) else ""))
    try:  # how far apart the two campaigns' times of the same cells are: the noise floor
        noise = regret.campaign_noise(summary, tune.load(root, args.campaign,
                                                         statistic=args.statistic))
    except tune.TuneError:  # tuning files without a summary of their own
        noise = regret.campaign_noise(summary, summary.iloc[:0])
    for row in noise.itertuples(index=False):
        print(f"{row.library}: the {row.cells} cells both campaigns timed differ by "
              f"{row.median_change:.1%} (median; 90th percentile {row.p90_change:.1%}): "
              f"regrets and costs below that are the launches' noise")
    for path in regret.write_comparison(frame, root / args.campaign / "tables", args.compare,
                                        args.campaign):
        print(path)
    return 0
