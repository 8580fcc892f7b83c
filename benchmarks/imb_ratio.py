#!/usr/bin/env python3
"""Harness ``--timing imb`` against IMB-MPI1's own t_avg, interleaved (IMB, harness, IMB,
harness, ...), Intel MPI's native allreduce (AUTO) at P=2, float32 sum, ``-sync 1``.

Both sides make the same number of calls per sample (``--iterations``: IMB's ``-iter N
-iter_policy off``, the harness's ``imb_iterations``). The harness's figure is the mean of
its samples' t_avg. Printed per size: the medians over the alternations of both, and of
the per-alternation ratio and difference. Targets: within 5 % at 4 KiB to 1 MiB, within
+1.5 us at 8 B.

    .venv/bin/python benchmarks/imb_ratio.py [--alternations 5] [--sizes 8,4KiB,64KiB,1MiB]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_us, harness_means, imb, libraries, median  # noqa: E402

from harness.units import format_size, parse_size  # noqa: E402


def iterations_for(size: int, cap: int) -> int:
    return max(1, min(cap, (40 * 2**20) // max(size, 1)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--sizes", default="8,4KiB,64KiB,1MiB")
    ap.add_argument("--iterations", type=int, default=1000,
                    help="calls per sample, capped at 40 MiB / size as IMB does")
    ap.add_argument("--samples", type=int, default=5, help="harness samples per launch")
    ap.add_argument("--alternations", type=int, default=5)
    a = ap.parse_args(argv)
    lib = libraries.get_library("impi")
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    print(f"Intel MPI native:auto P={a.procs} float32 sum, -sync 1, median of "
          f"{a.alternations} alternations")
    print(f"{'size':>6} {'iters':>5} {'IMB t_avg':>12} {'harness imb':>12} {'ratio':>7} {'diff':>11}")
    rows = []
    for s in sizes:
        n = iterations_for(s, a.iterations)
        t_imb, t_h = [], []
        for _ in range(a.alternations):
            t_imb.append(imb(lib, a.procs, [s], n)[s])
            t_h.append(harness_means("impi", "native:auto", a.procs, [s], a.samples,
                                     timing="imb", imb_iterations=n, warmup=0)[s])
        ratio = median([h / i for h, i in zip(t_h, t_imb)])
        diff = median([h - i for h, i in zip(t_h, t_imb)])
        met = diff <= 1.5e-6 if s < 4096 else abs(ratio - 1) <= 0.05
        rows.append((s, ratio, diff, met))
        print(f"{format_size(s):>6} {n:>5} {fmt_us(median(t_imb))} {fmt_us(median(t_h))} "
              f"{ratio:7.3f} {diff * 1e6:+8.2f} us {'met' if met else 'MISSED'}")
    return rows


if __name__ == "__main__":
    main()
