#!/usr/bin/env python3
"""Harness (Python, point-to-point) time / Open MPI native time for ring (id 4), recursive
doubling (id 3) and Rabenseifner (id 6) at 1 MiB and 16 MiB, P = 2 and 4 (target <= 1.25),
and the time of one SUARA2 model selection (target <= 50 us).

Both sides are measured by the harness itself (`harness run`, same stopping rule, barrier
start). On a 2-core machine P=4 oversubscribes: read those ratios as indicative only.

    .venv/bin/python benchmarks/p2p_vs_native.py [--reps 30]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PAIRS = [("ring", "native:ring"), ("recursive_doubling", "native:recursive_doubling"),
         ("rabenseifner", "native:rabenseifner")]


def mean_time(results_dir, algorithm, procs, size, reps):
    import pandas as pd

    env = {**os.environ, "HARNESS_RESULTS": results_dir}
    subprocess.run([str(REPO / ".venv" / "bin" / "harness"), "run", "--library", "openmpi",
                    "--algorithm", algorithm, "--procs", str(procs), "--size", size,
                    "--min-reps", str(reps), "--max-reps", str(reps), "--warmup", "3",
                    "--sync", "barrier", "--campaign", "p2p"], env=env, check=True,
                   capture_output=True)
    df = pd.read_csv(Path(results_dir) / "p2p" / "summary.csv")
    df = df[(df.algorithm == algorithm) & (df.procs == procs)]
    from harness.units import parse_size

    return float(df[df["size"] == parse_size(size)].iloc[0]["mean"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    rows = []
    print(f"Open MPI, {args.reps} repetitions each, float64 sum")
    print(f"{'algorithm':>20} {'P':>2} {'size':>6} {'python':>10} {'native':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for procs in (2, 4):
            for size in ("1MiB", "16MiB"):
                for mine, native in PAIRS:
                    t_py = mean_time(tmp, mine, procs, size, args.reps)
                    t_nat = mean_time(tmp, native, procs, size, args.reps)
                    rows.append((mine, procs, size, t_py / t_nat))
                    print(f"{mine:>20} {procs:>2} {size:>6} {t_py * 1e3:>8.3f}ms "
                          f"{t_nat * 1e3:>8.3f}ms {t_py / t_nat:>6.2f}")
    from harness.models import Params, decide_suara2

    params = Params.paper()
    n = 200
    t = min(timeit.repeat(lambda: decide_suara2(1024, 4 * 2**20, params), number=n, repeat=5)) / n
    print(f"one SUARA2 selection (P=1024, 4 MiB, 36 combinations): {t * 1e6:.1f} us "
          f"(target <= 50 us)")
    return rows, t


if __name__ == "__main__":
    main()
