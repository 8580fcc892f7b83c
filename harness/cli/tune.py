"""``harness tune``: a campaign's BEST turned into each library's own tuning files; with
``--verify``, AUTO and the tuned selection measured against each other in fresh launches."""

from __future__ import annotations

from .. import paths
from ..campaign import tune, tune_verify
from ..results.view import STATISTICS
from .args import campaign_args, load_campaign


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
    p.add_argument("--statistic", choices=STATISTICS, default="mean",
                   help="the times the decisions compare: mean (Student-t interval) or median "
                        "(order-statistics interval); the workflow passes the config's "
                        "report.statistic (default: %(default)s)")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args, parser) -> int:
    """Each library's decision table and tuning files; with --verify, the fresh launches."""

    try:
        docs = tune.tune(paths.results_root(), args.campaign, statistic=args.statistic)
    except tune.TuneError as exc:
        parser.error(str(exc))
    if not args.verify:
        return 0
    from ..report.tuned import make_tuned  # imports matplotlib: only when verifying

    campaign = load_campaign(args.configfile, args.campaign, parser, "campaign")
    outs = []
    for library in sorted(docs):
        out = campaign.store.dir / "tuning" / f"verify-{library}.json"
        tune_verify.run_library(campaign, library, out)
        outs.append(out)
    for path in make_tuned(outs, campaign.store.dir / "tables", campaign.figures,
                           libraries=sorted(docs)):
        print(path)
    return 0
