"""``python -m harness.report NAME --store results/<c> [options]``: write one report of the
registry (``registry.py``) from its ``Inputs`` and print the files written; ``--list`` lists
the reports, ``--help`` the options."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import paths
from ..results.view import STATISTICS
from .inputs import Inputs
from .registry import REPORTS, Report


def parser() -> argparse.ArgumentParser:
    names = "\n".join(f"  {r.name:16s} {r.about}" for r in REPORTS.values())
    p = argparse.ArgumentParser(
        prog="python -m harness.report", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write one report of a campaign and print the files written.",
        epilog=f"reports:\n{names}\n\nA report named by the workflow's confirm, tune or SGD "
               "stage reads that stage's documents under the store (or those given).")
    p.add_argument("name", metavar="NAME", nargs="?", help="the report (--list: every one)")
    p.add_argument("documents", metavar="DOCUMENT", nargs="*", type=Path,
                   help="the stage documents to read (default: the store's)")
    p.add_argument("--list", action="store_true", help="list the reports and exit")
    p.add_argument("--store", type=Path, metavar="DIR",
                   help="the campaign's directory, results/<c> (default: the summary's)")
    p.add_argument("--summary", type=Path, metavar="CSV",
                   help="the summary (default: <store>/summary.csv)")
    p.add_argument("--tables", type=Path, metavar="DIR", help="default: <store>/tables")
    p.add_argument("--figures", type=Path, metavar="DIR", help="default: figures/<c>")
    p.add_argument("--params", type=Path, metavar="JSON", help="model_params.json (default: "
                   "<store>/model_params.json when it exists and the report reads one)")
    p.add_argument("--statistic", choices=STATISTICS, default="mean",
                   help="what the time columns hold (report.statistic; default mean)")
    p.add_argument("--reference", metavar="LIB", help="the cross-library report's reference")
    p.add_argument("--library", dest="libraries", action="append", metavar="LIB",
                   help="a library whose figures must exist (repeat)")
    p.add_argument("--model", dest="models", action="append", metavar="M",
                   help="a workload's model (repeat)")
    p.add_argument("--experiment", metavar="E", help="the SGD experiment")
    return p


def inputs_of(report: Report, args) -> Inputs:
    """The command line's ``Inputs`` for ``report``."""
    store = args.store or (args.summary.parent if args.summary else None)
    if store is None:
        raise ValueError("give --store DIR (results/<c>) or --summary CSV")
    params = args.params
    if params is None and report.params and (store / "model_params.json").is_file():
        params = store / "model_params.json"
    documents = args.documents
    if report.reads and not documents:
        pattern = report.reads.replace("{experiment}", args.experiment or "*")
        documents = sorted(store.glob(pattern))
    return Inputs.load(store, args.tables, args.figures or paths.figures_root() / store.name,
                       summary=args.summary, params=params, statistic=args.statistic,
                       reference=args.reference, libraries=args.libraries, models=args.models,
                       experiment=args.experiment, documents=documents)


def main(argv=None) -> int:
    """Write one report and print the files written; 2 with the usage on bad arguments."""
    p = parser()
    try:
        args = p.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.list:
        print("\n".join(f"{r.name:16s} {r.about}" for r in REPORTS.values()))
        return 0
    report = REPORTS.get(args.name or "")
    try:
        if report is None:
            raise ValueError(f"unknown report {args.name!r}" if args.name else "no report named")
        inputs = inputs_of(report, args)
    except ValueError as exc:
        p.print_usage(sys.stderr)
        print(f"harness.report: {exc}", file=sys.stderr)
        return 2
    for path in report.write(inputs):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
