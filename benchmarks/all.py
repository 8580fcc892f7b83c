#!/usr/bin/env python3
"""``make bench``: every benchmark of the harness in one run, then one table of ratios.

- harness per-call time - plain mpi4py loop doing the same work (benchmarks/overhead.py);
- ``--timing imb`` / IMB-MPI1 t_avg (benchmarks/imb_ratio.py);
- ranking of Intel MPI's forced ids, harness vs IMB: Spearman rho and pick loss
  (benchmarks/imb_ranking.py);
- Python ring / recursive doubling / Rabenseifner / Open MPI's native (p2p_vs_native.py);
- ``harness plan`` and ``snakemake -n`` on 100k cells, one SUARA2 selection (plan_scale.py);
- bus bandwidth of the shared-memory ``shm`` allreduce vs each library's best forced
  algorithm and the copy bandwidth, P = 2 (shm_vs_native.py).

Every comparison between launches is interleaved (A B A B) and reported as the median of
the alternations. P=2 on this 2-core machine fits the cores; P=4 ratios are indicative.

    .venv/bin/python benchmarks/all.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import imb_ranking  # noqa: E402
import imb_ratio  # noqa: E402
import overhead  # noqa: E402
import p2p_vs_native  # noqa: E402
import plan_scale  # noqa: E402
import shm_vs_native  # noqa: E402

from harness.units import format_size  # noqa: E402


def section(title):
    print(f"\n=== {title} ===", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer alternations and repetitions")
    a = ap.parse_args()
    alt = ["--alternations", "2" if a.quick else "5"]
    section("harness per-call vs plain mpi4py loop (Intel MPI, P=2)")
    ov = overhead.main(alt + (["--reps", "500"] if a.quick else []))
    section("--timing imb vs IMB-MPI1 (Intel MPI, P=2)")
    ir = imb_ratio.main(alt)
    section("ranking of Intel MPI's forced ids, harness vs IMB-MPI1 (P=2)")
    rk = imb_ranking.main(["--alternations", "1" if a.quick else "3"])
    section("Python point-to-point algorithms vs Open MPI's native")
    p2p, suara = p2p_vs_native.main(["--reps", "10" if a.quick else "30"])
    section("plan and dry run at 100k cells")
    t_plan, t_dry = plan_scale.main()
    section("shared-memory allreduce vs each library's best forced algorithm (P=2)")
    shm = shm_vs_native.main(["--rounds", "2" if a.quick else "3"])

    section("summary (each figure measured in this run)")
    for s, d in ov:
        print(f"harness - plain+work     {format_size(s):>6}: {d * 1e6:+7.2f} us   (target <= +1 us)")
    for s, ratio, diff, met in ir:
        target = "+1.5 us" if s < 4096 else "1 +- 5 %"
        print(f"imb mode / IMB t_avg     {format_size(s):>6}: {ratio:7.3f} ({diff * 1e6:+.2f} us)"
              f"   (target {target}: {'met' if met else 'missed'})")
    for s, rho, loss, met in rk:
        print(f"ranking vs IMB           {format_size(s):>6}: rho {rho:5.2f}, pick loss {loss:6.1%}"
              f"   (target rho >= 0.8, loss <= 10 %: {'met' if met else 'missed'})")
    for mine, procs, size, ratio in p2p:
        print(f"python/native {mine:>18} P={procs} {size:>5}: {ratio:6.2f}   (target <= 1.25)")
    print(f"harness plan, 100k cells: {t_plan:6.2f} s; snakemake -n: {t_dry:6.2f} s   (target <= 10 s)")
    print(f"SUARA2 selection: {suara * 1e6:.1f} us   (target <= 50 us)")
    for r in shm:
        goal = 2.0 if r["size"] >= 16 * 2**20 else 1.2 if r["size"] >= 2**20 else None
        if goal:
            print(f"shm busbw / best native  {format_size(r['size']):>6}: {r['shm_vs_best_native']:6.2f}"
                  f"   (target >= {goal}: {'met' if r['shm_vs_best_native'] >= goal else 'missed'})")
        if r["size"] == 64 * 2**20:
            print(f"shm busbw / copy bw      {format_size(r['size']):>6}: {r['shm_vs_copy']:6.2f}"
                  f"   (target >= 0.5: {'met' if r['shm_vs_copy'] >= 0.5 else 'missed'})")


if __name__ == "__main__":
    main()
