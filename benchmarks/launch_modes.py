#!/usr/bin/env python3
"""Do the harness's launches land in modes IMB-MPI1's launches do not? One cell, many launches.

A cell's launches can split into modes: MPICH AUTO at P = 2, 1 MiB, float32 gave 836, 279 and
785 us in three launches minutes apart. This script asks whether the cause is the harness's.
Per alternation, in a shuffled order, it launches the harness (``--timing imb``) and IMB-MPI1
under the same library (IMB-MPI1 from the Intel MPI wheel runs on MPICH's libmpi through the
MPICH ABI), each once with the library's own launcher and once with ranks bound to cores
(``--bind``). Per launch it prints the time and, for the harness, where the ranks ran (CPU at
start and end, the CPUs each may use, involuntary context switches). Then, per variant: the
launches in the slow mode (split at the widest gap of the log times, if the slowest is 1.5x
the fastest or more), the fast mode's median, and Fisher's exact test of whether the harness
lands in the slow mode more often than IMB-MPI1 under the same launcher.

    .venv/bin/python benchmarks/launch_modes.py [--library mpich] [--size 1MiB] [--alternations 8]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import harness_cells, imb, libraries, median  # noqa: E402
from scipy.stats import fisher_exact  # noqa: E402

from harness.units import format_size, parse_size  # noqa: E402

BIND = {"mpich": "-bind-to core", "openmpi": "--bind-to core", "impi": "-genv I_MPI_PIN=1"}


def slow_threshold(times: list) -> float:
    """The time above which a launch is in the slow mode: the middle of the widest gap
    between sorted log times, when the slowest is at least 1.5x the fastest; else inf."""
    logs = sorted(math.log(t) for t in times)
    if len(logs) < 2 or logs[-1] - logs[0] < math.log(1.5):
        return math.inf
    gap, at = max((b - a, (a + b) / 2) for a, b in zip(logs, logs[1:]))
    return math.exp(at)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", default="mpich", choices=["mpich", "openmpi", "impi"])
    ap.add_argument("--size", default="1MiB")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=40, help="calls per sample (both tools)")
    ap.add_argument("--samples", type=int, default=5, help="harness samples per launch")
    ap.add_argument("--alternations", type=int, default=8)
    ap.add_argument("--bind", help="launcher options that bind ranks to cores "
                                   "(default: the library's, e.g. MPICH's '-bind-to core')")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    lib = libraries.get_library(a.library)
    size = parse_size(a.size)
    base = list(lib.launcher)
    bound = base[:1] + (a.bind or BIND[a.library]).split() + base[1:]
    launchers = {"own": base, "bound": bound}
    times = {(tool, how): [] for tool in ("harness", "IMB") for how in launchers}
    rng = random.Random(a.seed)
    print(f"{lib.title} AUTO, P = {a.procs}, {format_size(size)}, float32 sum, "
          f"{a.iterations} calls per sample; bound: {' '.join(bound)}")
    for alt in range(a.alternations):
        order = list(times)
        rng.shuffle(order)
        for tool, how in order:
            if tool == "IMB":
                t = imb(lib, a.procs, [size], a.iterations, launcher=launchers[how])[size]
                where = ""
            else:
                cell, = harness_cells(a.library, "native:auto", a.procs, [size], a.samples,
                                      timing="imb", imb_iterations=a.iterations, warmup=0,
                                      launcher=launchers[how])
                t = cell["stats"]["mean"]
                p = cell.get("placement") or {}
                where = (f"  cpus {p.get('cpu_start')}->{p.get('cpu_end')} may use "
                         f"{p.get('affinity')} involuntary {p.get('involuntary_switches')}")
            times[tool, how].append(t)
            print(f"{alt}  {tool:7} {how:5} {t * 1e6:8.1f} us{where}", flush=True)
    cut = slow_threshold([t for ts in times.values() for t in ts])
    print(f"\nslow mode: above {cut * 1e6:.0f} us" if math.isfinite(cut) else
          "\none mode: the slowest launch is within 1.5x of the fastest")
    for (tool, how), ts in times.items():
        fast = [t for t in ts if t <= cut]
        print(f"{tool:7} {how:5} slow {len(ts) - len(fast)}/{len(ts)}   fast-mode median "
              f"{median(fast) * 1e6 if fast else float('nan'):7.1f} us   all: "
              + " ".join(f"{t * 1e6:.0f}" for t in ts))
    for how in launchers:
        h, i = times["harness", how], times["IMB", how]
        table = [[sum(t > cut for t in h), sum(t <= cut for t in h)],
                 [sum(t > cut for t in i), sum(t <= cut for t in i)]]
        p = fisher_exact(table, alternative="greater").pvalue
        print(f"{how:5}: the harness slow more often than IMB-MPI1? Fisher's exact p = {p:.3f}")
    return times


if __name__ == "__main__":
    main()
