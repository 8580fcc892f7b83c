#!/usr/bin/env python3
"""Harness-measured time / IMB-MPI1 ``t_avg`` for Intel MPI's native allreduce at P=2.

Both sides run the same repetition count, float32 data (IMB's reduction type), a barrier
before each call (IMB's default ``-sync 1``; the harness uses its own two barriers) and the
library's own algorithm selection. Prints one line per size: IMB t_avg, the harness mean,
their ratio and difference. Targets: ratio <= 1.05 at >= 64 KiB, at most +2 us at 8 B.

    .venv/bin/python benchmarks/imb_ratio.py [--reps 1000] [--sizes 8,64KiB,1MiB]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import libraries  # noqa: E402
from harness.units import format_size, parse_size  # noqa: E402


def imb_t_avg(lib, sizes, reps, procs):
    with tempfile.NamedTemporaryFile("w", suffix=".msglen", delete=False) as fh:
        fh.write("\n".join(str(s) for s in sizes) + "\n")
    env = {**os.environ, **lib.run_env()}
    for var, dirs in lib.prepend().items():
        env[var] = ":".join(dirs + ([env[var]] if env.get(var) else []))
    argv = lib.launch_argv(procs) + [str(lib.prefix / "bin" / "IMB-MPI1"), "Allreduce",
                                     "-npmin", str(procs), "-msglen", fh.name, "-iter", str(reps),
                                     "-iter_policy", "off", "-time", "1000", "-sync", "1"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    os.unlink(fh.name)
    t = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            t[int(m.group(1))] = float(m.group(5)) * 1e-6
    return t


def harness_mean(size, reps, procs, results_dir):
    env = {**os.environ, "HARNESS_RESULTS": results_dir}
    argv = [str(REPO / ".venv" / "bin" / "harness"), "run", "--library", "impi",
            "--algorithm", "native:auto", "--procs", str(procs), "--size", str(size),
            "--dtype", "float32", "--min-reps", str(reps), "--max-reps", str(reps),
            "--warmup", "10", "--sync", "barrier", "--campaign", "imb-ratio"]
    subprocess.run(argv, env=env, check=True, capture_output=True)
    import pandas as pd

    df = pd.read_csv(Path(results_dir) / "imb-ratio" / "summary.csv")
    row = df[df["size"] == size].iloc[0]
    assert int(row.n) == reps, row
    return float(row["mean"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--sizes", default="8,64KiB,1MiB")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    lib = libraries.get_library("impi")
    imb = imb_t_avg(lib, sizes, args.reps, args.procs)
    print(f"Intel MPI native:auto, P={args.procs}, {args.reps} repetitions, float32")
    print(f"{'size':>8} {'IMB t_avg':>12} {'harness':>12} {'ratio':>7} {'diff':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for s in sizes:
            h = harness_mean(s, args.reps, args.procs, tmp)
            print(f"{format_size(s):>8} {imb[s] * 1e6:>9.2f} us {h * 1e6:>9.2f} us "
                  f"{h / imb[s]:>7.3f} {(h - imb[s]) * 1e6:>+7.2f} us")


if __name__ == "__main__":
    main()
