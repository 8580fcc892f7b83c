"""The ``harness`` command. Thin over the modules: parsing, checking, printing.

Exit codes: 0 success; 1 a measurement came out ``wrong``, ``failed`` or ``timeout``;
2 bad input (nothing is written).

This module builds the top-level parser and dispatches; each command group adds its own
subparsers next to its handlers (``register(sub)``): ``run.py`` (``run``, a campaign's cell
with ``--cell``), ``campaign.py`` (``plan``, ``exec``), ``models.py`` (``model``, ``fit``),
``store.py`` (``status``, ``check``, ``retry``), ``tune.py`` (``tune``), ``installation.py``
(``algorithms``, ``install``, ``doctor``), ``dnn.py`` (``dnn``). Shared
argument types and the campaign loading are ``args.py``.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from . import campaign, dnn, installation, models, run, store, tune
from .args import OneLineErrorParser

# in the order `harness --help` lists the commands
COMMAND_GROUPS = (run, campaign, models, store, tune, installation, dnn)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="harness", description="Allreduce experiment harness: measure and "
                                "compare MPI allreduce algorithms across libraries, P, sizes and delays.")
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    for group in COMMAND_GROUPS:
        group.register(sub)
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
