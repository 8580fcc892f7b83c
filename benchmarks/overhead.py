#!/usr/bin/env python3
"""Harness per-call time against a plain mpi4py loop, interleaved (A B A B ...).

Per size and alternation, three launches: the plain loop doing the harness's work around
each call (sentinel fill, verification, one Allgather; ``plain_loop.py --work``), the
harness's default per-call mode (`native:auto`, barrier start, thread level single), and
the bare plain loop (barriers, Wtime, Allreduce, Wtime). Printed: the median over the
alternations of each mean, and of the per-alternation differences. Target: harness minus
plain-with-work within +1 us at every size. Also the floor: an empty Wtime pair and a
count-0 Allreduce.

    .venv/bin/python benchmarks/overhead.py [--library impi] [--alternations 5] [--reps 2000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, fmt_us, harness_means, launch, libraries, median  # noqa: E402

from harness.units import format_size, parse_size  # noqa: E402

PLAIN = REPO / "benchmarks" / "plain_loop.py"


def plain(lib, procs, size, reps, work):
    out = launch(lib, procs, [sys.executable, PLAIN, size, reps] + (["--work"] if work else []))
    return float(out.split()[1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", default="impi", choices=["mpich", "openmpi", "impi"])
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--sizes", default="8,4KiB,64KiB,1MiB")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--alternations", type=int, default=5)
    a = ap.parse_args(argv)
    lib = libraries.get_library(a.library)
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    rows = []
    print(f"{lib.title} native:auto P={a.procs} float32 sum, {a.reps} repetitions, "
          f"median of {a.alternations} alternations")
    print(f"{'size':>6} {'plain':>12} {'plain+work':>12} {'harness':>12} "
          f"{'h-(p+work)':>12} {'h/(p+work)':>10} {'h-plain':>12}")
    for s in sizes:
        bare, work, mine = [], [], []
        for _ in range(a.alternations):
            work.append(plain(lib, a.procs, s, a.reps, True))
            mine.append(harness_means(a.library, "native:auto", a.procs, [s], a.reps)[s])
            bare.append(plain(lib, a.procs, s, a.reps, False))
        d_work = median([m - w for m, w in zip(mine, work)])
        r_work = median([m / w for m, w in zip(mine, work)])
        d_bare = median([m - b for m, b in zip(mine, bare)])
        rows.append((s, d_work))
        print(f"{format_size(s):>6} {fmt_us(median(bare))} {fmt_us(median(work))} "
              f"{fmt_us(median(mine))} {(d_work * 1e6):+9.2f} us {r_work:10.3f} "
              f"{(d_bare * 1e6):+9.2f} us")
    out = launch(lib, a.procs, [sys.executable, PLAIN, 8, a.reps, "--floor"])
    floor = dict(line.split() for line in out.splitlines())
    print(f"floor: empty Wtime pair {float(floor['wtime_pair']) * 1e9:.0f} ns, "
          f"count-0 Allreduce {float(floor['count0']) * 1e6:.2f} us")
    worst = max(d for _, d in rows)
    print(f"worst harness - plain+work: {worst * 1e6:+.2f} us (target <= +1 us): "
          + ("met" if worst <= 1e-6 else "MISSED"))
    return rows


if __name__ == "__main__":
    main()
