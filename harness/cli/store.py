"""A campaign's results store: ``harness status`` counts its cells by status, ``harness check``
validates it, ``harness retry`` resets the runs with failed or timeout cells and runs the
workflow again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .. import paths
from ..campaign import config, plan
from ..results import check, outcome, retry
from ..results import store as results
from .args import campaign_args


def register(sub) -> None:
    """Add ``status``, ``check`` and ``retry`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "status", help="a campaign's cells by status, fitting the cores or oversubscribed; exit 3 "
                       "when cells failed",
        description="The cells of results/<campaign>/summary.csv by status, split into launches "
                    "that fit the cores and oversubscribed ones. The last line counts the cells "
                    "failed, timeout or wrong; with any, the exit status is 3, unless the "
                    "campaign's config sets allow_failures: true.")
    campaign_args(p, "the campaign's config, for allow_failures (default: config/experiments.yaml "
                     "when it defines this campaign)")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser(
        "check", help="validate a campaign's results store; exit 1 naming every inconsistency",
        description="Check results/<campaign>/ against itself: every summary row has its run "
                    "document and raw repetitions; n, mean, CI and status recomputed from the "
                    "raw repetitions equal the stored ones; the stopping point is the first "
                    "repetition where the rule held; no duplicate cells; provenance present; "
                    "the job scripts' SHA-256 as recorded. A damaged run document is rebuilt "
                    "from its journal where the journal holds it.")
    campaign_args(p, "the campaign's config, to check only its planned runs (default: "
                      "config/experiments.yaml when it defines this campaign)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser(
        "retry", help="measure again the failed and timeout cells of a campaign, nothing else",
        usage="harness retry [-h] [--configfile CONFIGFILE] [--dry-run] [--no-run] campaign "
              "[-- SNAKEMAKE ARGUMENTS ...]",
        description="Reset every run with failed or timeout cells (or a damaged file): its run "
                    "document moves to results/<campaign>/retried/, then the workflow runs "
                    "again. Runs resume from their journal, so cells that finished (ok, "
                    "not-converged, wrong) are not measured again, nor are not-applicable "
                    "ones (never launched). Arguments after -- go to snakemake, e.g. `harness "
                    "retry default -- --profile slurm`.")
    campaign_args(p, "the config the campaign was run with (default config/experiments.yaml)")
    p.add_argument("--dry-run", action="store_true", help="list what would be retried, change nothing")
    p.add_argument("--no-run", action="store_true",
                   help="reset the runs but do not start the workflow")
    p.set_defaults(func=cmd_retry)


def cmd_status(args, parser) -> int:
    """Cells by status, split into launches that fit the cores and oversubscribed ones; the last
    line counts the failed, timeout and wrong ones, and any of them exit 3 (``outcome``)
    unless the config allows failures."""
    import numpy as np
    import pandas as pd

    from ..results import summary

    path = paths.results_root() / args.campaign / "summary.csv"
    if not path.is_file():
        parser.error(f"argument campaign: no summary at {path} (run the campaign first)")
    df = summary.load(path)
    status = df["status"].astype(object).fillna("").astype(str)
    over = pd.Series(np.where(df["oversubscribed"], "P > cores", "P <= cores"), index=df.index,
                     name="oversubscribed")
    # a cell that recorded no repetition (it failed before its first) says nothing of its fit
    over[df["n"].isna() & status.isin(["failed", "timeout"])] = "unknown"
    over[status == "not-applicable"] = "not launched"  # the plan excluded them
    table = pd.crosstab(over, status, margins=True, margins_name="all")
    print(f"campaign {args.campaign}: {len(df)} cells ({path})")
    print(table.to_string())
    fits = df[over == "P <= cores"]
    if len(fits):
        print(f"converged where P <= cores: {(fits.status == 'ok').sum()}/{len(fits)} "
              f"({(fits.status == 'ok').mean():.0%})")
    cfg = _campaign_config(args, parser)
    allowed = bool(cfg and cfg.allow_failures)
    bad, line = outcome.line(status, args.campaign, allowed)
    print(line, flush=True)
    return outcome.FAILED_EXIT if bad and not allowed else 0


def _campaign_config(args, parser):
    """The config of ``--configfile`` when it defines ``args.campaign``; with no
    ``--configfile``, the default config when its campaign is that one, else None."""
    try:
        cfg = config.load(args.configfile)
    except config.ConfigError as exc:
        if args.configfile:
            parser.error(f"argument --configfile: {exc}")
        return None
    if cfg.campaign != args.campaign:
        if args.configfile:
            parser.error(f"argument --configfile: {args.configfile} defines campaign "
                         f"{cfg.campaign!r}, not {args.campaign!r}")
        return None
    return cfg


def _campaign_plan(args, parser):
    """(config, run ids, cell ids) of ``_campaign_config``, else Nones: the runs launched and
    the run documents of the not-applicable cells, which launch nothing."""
    cfg = _campaign_config(args, parser)
    if cfg is None:
        return None, None, None
    runs, unlaunched = plan.partition(cfg)
    return (cfg, {r.run_id for r in runs} | {n.run_id for n in unlaunched},
            {c.cell_id for r in runs + [n.run for n in unlaunched] for c in r.cells})


def _existing_store(args, parser) -> results.CampaignStore:
    """The campaign's results store; a one-line error when it has no directory."""
    store = results.CampaignStore(paths.results_root(), args.campaign)
    if not store.dir.is_dir():
        parser.error(f"argument campaign: no results at {store.dir}")
    return store


def cmd_check(args, parser) -> int:
    """Validate a campaign's store; non-zero on any inconsistency."""
    store = _existing_store(args, parser)
    _, runs, keep = _campaign_plan(args, parser)
    rep = check.check_store(store, runs=runs, keep=keep)
    print(check.render(store, rep))
    return 0 if rep.ok else 1


def cmd_retry(args, parser) -> int:
    """Reset the runs with failed or timeout cells, then run the workflow again."""
    store = _existing_store(args, parser)
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
