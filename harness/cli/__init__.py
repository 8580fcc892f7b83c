"""The ``harness`` command. Thin over the modules: parsing, checking, printing.

Exit codes: 0 success; 1 a measurement came out ``wrong``, ``failed`` or ``timeout``;
2 bad input (nothing is written).

This module builds the top-level parser and dispatches; each command group adds its own
subparsers next to its handlers (``register(sub)``): ``run.py`` (``run``, a campaign's cell
with ``--cell``; its options made a config by ``run_config.py``), ``campaign.py`` (``plan``,
``exec``), ``models.py`` (``model``, ``fit``), ``store.py`` (``status``, ``check``,
``retry``), ``tune.py`` (``tune`` and its commands ``files``, ``verify``, ``regret``,
``adaptive``, ``compare``), ``installation.py`` (``algorithms``, ``install``, ``doctor``),
``dnn.py`` (``dnn``). Shared argument types and the campaign loading are ``args.py``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__
from .args import OneLineErrorParser

# the command groups in the order `harness --help` lists them, and the commands each adds
COMMANDS = {
    "run": ("run",),
    "campaign": ("plan", "exec"),
    "models": ("model", "fit"),
    "store": ("status", "check", "retry"),
    "tune": ("tune",),
    "installation": ("algorithms", "install", "doctor", "preflight", "whatran"),
    "dnn": ("dnn",),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``harness`` parser; given a known ``command``, with only that command's group,
    whose module alone is imported (``harness exec``, once per run of a campaign, then starts
    without pandas, scipy and matplotlib)."""
    parser = OneLineErrorParser(prog="harness", description="Allreduce experiment harness: measure and "
                                "compare MPI allreduce algorithms across libraries, P, sizes and delays.")
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    groups = [g for g, names in COMMANDS.items() if command in names] or list(COMMANDS)
    for group in groups:
        importlib.import_module(f"{__name__}.{group}").register(sub)
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    if argv[:1] == ["tune"]:  # `harness tune CAMPAIGN`: `harness tune files CAMPAIGN`
        argv = importlib.import_module(f"{__name__}.tune").shorthand(argv)
    # `harness retry <c> -- <snakemake arguments>`: what follows -- goes to snakemake
    passthrough = []
    if argv[:1] == ["retry"] and "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1:]
    args = parser.parse_args(argv)
    args.passthrough = passthrough
    try:
        return args.func(args, _command_parser(parser, args))
    except KeyboardInterrupt:
        print("interrupted; rerun to resume", file=sys.stderr)
        return 130


def _command_parser(parser, args) -> argparse.ArgumentParser:
    """The parser of the command ``args`` hold (``harness model rd``: that of ``rd``), whose
    ``error`` a command calls for its one-line errors."""
    while True:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not found:
            return parser
        chosen = getattr(args, found[0].dest, None)
        if chosen is None:  # a command group run without one of its commands
            return parser
        parser = found[0].choices[chosen]
