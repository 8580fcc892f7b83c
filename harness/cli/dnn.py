"""``harness dnn``: the deep-learning workloads from the command line.

``register(subparsers)`` adds ``dnn`` with the subcommand ``traces`` (Castelló et al. 2021,
Fig. 7: the gradient messages of AlexNet, ResNet-50, VGG-11 and ResNet-110, and their fusion
into allreduce calls). Each handler returns an exit code: 0 success, 2 bad input or a missing
dependency (nothing written).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from .. import paths
from ..dnn import traces
from ..dnn.compute import iteration_times
from ..units import format_time

__all__ = ["register", "cmd_traces"]

_TRACES_HELP = """\
Write the table and figure of Castelló et al. 2021, Fig. 7 from the committed gradient traces
(harness/data/traces/<model>.json; no PyTorch needed):

  <out-tables>/dnn_models.{md,tex,csv}  per model: dataset, gradient tensors, parameters vs
                                        the published count, allreduce calls per iteration
                                        and the largest one under Horovod tensor fusion
                                        (64 MiB) and PyTorch DDP buckets (1 MiB, then 25 MiB)
                                        in fp32 and fp16, bytes per iteration
  <out-figures>/dnn_fig7.{png,pdf}      per model, the size of each per-tensor message and
                                        how many there are of each size (fused calls marked)

--regenerate first rebuilds the traces of the chosen models from the model code
(torchvision; ResNet-110 in harness/dnn/models.py); it needs the [dnn] extra:
pip install -e '.[dnn]'.
"""


def _models(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in traces.MODELS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown model {', '.join(map(repr, bad)) or repr(text)}; "
            f"valid: {', '.join(traces.MODELS)}")
    return list(dict.fromkeys(names))


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``dnn`` (and ``dnn traces``) to ``subparsers``; returns the ``dnn`` parser."""

    p = subparsers.add_parser(
        "dnn", help="deep-learning workloads: gradient traces of real CNNs (Castelló et al. Fig. 7)",
        description="Deep-learning workloads. `harness dnn traces --help` for the subcommand.")
    p.set_defaults(func=lambda args, parser=None: _usage(p))
    sub = p.add_subparsers(dest="dnn_command", metavar="{traces,compute}")
    q = sub.add_parser(
        "traces", help="table and figure of the CNNs' gradient messages (Castelló et al. Fig. 7)",
        description=_TRACES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("--models", type=_models, default=list(traces.MODELS),
                   help=f"comma-separated models (default: all: {','.join(traces.MODELS)})")
    q.add_argument("--out-tables", type=Path, default=paths.results_root() / "dnn" / "tables",
                   metavar="DIR", help="directory of dnn_models.{md,tex,csv} "
                   "(default: %(default)s)")
    q.add_argument("--out-figures", type=Path, default=paths.figures_root() / "dnn",
                   metavar="DIR", help="directory of dnn_fig7.{png,pdf} (default: %(default)s)")
    q.add_argument("--regenerate", action="store_true",
                   help="rebuild the chosen models' traces from the model code first "
                   "(needs PyTorch: pip install -e '.[dnn]')")
    q.set_defaults(func=cmd_traces)
    q = sub.add_parser(
        "compute", help="seconds of one training iteration's compute on this CPU (PyTorch)",
        description="Time forward, backward and the SGD step of each model at a batch size on "
                    "this CPU, single-threaded as one MPI rank would run, and print the median "
                    "per iteration: the value of workload.compute in a campaign config (the "
                    "report adds it to the measured communication). Needs the [dnn] extra.")
    q.add_argument("--models", type=_models, default=["resnet110"],
                   help="comma-separated models (default: resnet110)")
    q.add_argument("--batch", type=_positive("--batch"), default=32,
                   help="images per rank and iteration (default: %(default)s)")
    q.add_argument("--iterations", type=_positive("--iterations"), default=3,
                   help="timed iterations after one warm-up (default: %(default)s)")
    q.add_argument("--threads", type=_positive("--threads"), default=1,
                   help="PyTorch threads (default: %(default)s, one per rank)")
    q.set_defaults(func=cmd_compute)
    return p


def _positive(name: str):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = 0
        if v < 1:
            raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
        return v
    return parse


def cmd_compute(args, parser=None) -> int:
    if importlib.util.find_spec("torch") is None:
        print("harness dnn compute: needs PyTorch, which is not installed; "
              "pip install -e '.[dnn]'", file=sys.stderr)
        return 2

    print(f"{'model':<11} {'batch':>5} {'median':>10} {'min':>10} {'images/s':>9}   "
          f"(forward + backward + SGD step, {args.threads} thread(s), {args.iterations} "
          f"iterations)")
    for m in args.models:
        t = sorted(iteration_times(m, args.batch, iterations=args.iterations,
                                   threads=args.threads))
        med = t[len(t) // 2]
        print(f"{m:<11} {args.batch:>5} {format_time(med):>10} {format_time(t[0]):>10} "
              f"{args.batch / med:>9.1f}", flush=True)
    return 0


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def cmd_traces(args, parser=None) -> int:
    models = list(args.models)
    if args.regenerate:
        if importlib.util.find_spec("torch") is None or importlib.util.find_spec(
                "torchvision") is None:
            print("harness dnn traces: --regenerate builds the models with PyTorch and "
                  "torchvision, which are not installed; pip install -e '.[dnn]'",
                  file=sys.stderr)
            return 2
        for m in models:
            old = traces.load(m) if traces.path_of(m).exists() else None
            new = traces.generate(m)
            path = traces.write(new, traces.path_of(m))
            what = "unchanged" if old == new else "rewritten"
            print(f"{path}: {len(new.tensors)} tensors, {new.parameters:,} parameters ({what})")
    from ..report import dnn_traces  # matplotlib, pandas: only when needed

    written = dnn_traces.make_fig7(models, args.out_tables, args.out_figures)
    md = next(p for p in written if p.suffix == ".md")
    print(md.read_text().rstrip())
    print()
    for path in written:
        print(f"wrote {path}")
    return 0
