#!/usr/bin/env python3
"""Does the harness rank Intel MPI's forced allreduce algorithms as IMB-MPI1 does?

P=2, float32 sum. Per alternation, for every forcible ``I_MPI_ADJUST_ALLREDUCE`` id (in a
shuffled order), one IMB-MPI1 launch and one harness launch measure all sizes; the times of
each side are the medians over the alternations. The harness runs in ``--timing imb`` (the
same quantity IMB measures: back-to-back calls with one barrier between them) or, with
``--timing percall``, in its default mode (one call after two barriers, verified), which
measures another quantity and may rank differently. Per size:
Spearman's rho between the two sides' times over the ids, and the pick loss: IMB's time of
the harness's fastest id over IMB's fastest, minus 1. Targets: rho >= 0.8 and loss <= 10 %.

    .venv/bin/python benchmarks/imb_ranking.py [--alternations 3] [--sizes 4KiB,64KiB,1MiB]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import harness_means, imb, libraries, median  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from harness.units import format_size, parse_size  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--sizes", default="4KiB,64KiB,1MiB")
    ap.add_argument("--reps", type=int, default=300, help="harness repetitions per size")
    ap.add_argument("--iterations", type=int, default=300, help="IMB calls per size")
    ap.add_argument("--alternations", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timing", default="imb", choices=["imb", "percall"])
    ap.add_argument("--samples", type=int, default=3, help="harness samples per size (imb mode)")
    a = ap.parse_args(argv)
    lib = libraries.get_library("impi")
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    entries = {n: e for n, e in lib.algorithms.items() if e.id is not None}
    times = {n: {s: ([], []) for s in sizes} for n in entries}
    rng = random.Random(a.seed)
    for _ in range(a.alternations):
        order = list(entries)
        rng.shuffle(order)
        for name in order:
            e = entries[name]
            usable = [s for s in sizes if not e.not_applicable(s // 4, a.procs, 4)]
            if not usable:
                continue
            t_imb = imb(lib, a.procs, usable, a.iterations, extra_env=e.env)
            if a.timing == "imb":
                t_h = harness_means("impi", f"native:{name}", a.procs, usable, a.samples,
                                    timing="imb", imb_iterations=a.iterations, warmup=0)
            else:
                t_h = harness_means("impi", f"native:{name}", a.procs, usable, a.reps)
            for s in usable:
                times[name][s][0].append(t_imb[s])
                times[name][s][1].append(t_h[s])
    print(f"Intel MPI forced ids, P={a.procs}, float32 sum, harness --timing {a.timing}, "
          f"median of {a.alternations} alternations")
    print(f"{'size':>6} {'ids':>4} {'rho':>6} {'harness pick':>26} {'IMB best':>26} {'loss':>7}")
    rows = []
    for s in sizes:
        names = [n for n in entries if times[n][s][0]]
        t_imb = [median(times[n][s][0]) for n in names]
        t_h = [median(times[n][s][1]) for n in names]
        rho = float(spearmanr(t_imb, t_h).statistic)
        pick = names[t_h.index(min(t_h))]
        best = names[t_imb.index(min(t_imb))]
        loss = t_imb[names.index(pick)] / min(t_imb) - 1
        met = rho >= 0.8 and loss <= 0.10
        rows.append((s, rho, loss, met))
        print(f"{format_size(s):>6} {len(names):>4} {rho:6.2f} "
              f"{pick + ' (' + entries[pick].id + ')':>26} {best + ' (' + entries[best].id + ')':>26} "
              f"{loss:7.1%} {'met' if met else 'MISSED'}")
        for n, i, h in sorted(zip(names, t_imb, t_h), key=lambda x: x[1]):
            print(f"         {n:>30} IMB {i * 1e6:9.2f} us  harness {h * 1e6:9.2f} us")
    return rows


if __name__ == "__main__":
    main()
