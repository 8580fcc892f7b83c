#!/usr/bin/env python3
"""Bus bandwidth of the harness's shared-memory allreduce (``shm``, counters and barriers)
against the best forced native algorithm of each library, with the copy bandwidth of the
machine measured in the same run (the limit), at P = 2, float64 sum.

Every round launches, in turn, every forced catalogue entry of MPICH, Open MPI and Intel MPI
(each one launch over all sizes), ``shm`` with each synchronisation, then times
``np.copyto`` of each size in one process and in two processes at once (per process: the
bound of any allreduce at P = 2 that reads its input and writes its output once); odd rounds run the list backwards (A B ... B A). Per (algorithm,
size) the figure is the median over the rounds of the launch's mean time; a library's BEST at a
size is its fastest forced algorithm by that median. Bus bandwidth is
``size / t * 2(P-1)/P`` (= size / t at P = 2); the copy bandwidth is size / t of the copy.

Writes ``results/bench/shm_vs_native.csv`` and ``figures/bench/shm_vs_native.png``
(busbw against size) and prints the table with the ratios the goals name:
shm / best native at each size and shm / copy bandwidth (one process and two at once).

    .venv/bin/python benchmarks/shm_vs_native.py [--rounds 3] [--sizes 64KiB,1MiB,16MiB,64MiB]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, harness_means, median  # noqa: E402

from harness import libraries  # noqa: E402
from harness.units import format_size, parse_size  # noqa: E402

PROCS = 2
LIBRARIES = ("mpich", "openmpi", "impi")
SHM = (("shm flags", {"sync": "flags"}), ("shm barrier", {"sync": "barrier"}))
MAX_VOLUME = 2 * 2**30  # bytes per cell: 32 repetitions at 64 MiB, 200 at 64 KiB (the cap)
REPS = 200


def copy_seconds(size: int, reps: int = 20, before=None) -> float:
    """Median time of ``np.copyto`` between two page-aligned, touched arrays of ``size`` B
    (``before()`` runs ahead of each copy, untimed)."""
    from harness.verify import aligned_empty

    n = size // 8
    src, dst = aligned_empty(n, "float64"), aligned_empty(n, "float64")
    src[:] = 1.0
    dst[:] = 0.0
    times = []
    for _ in range(reps + 2):
        if before:
            before()
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return median(times[2:])


def _copy_worker(barrier, size, reps, out):
    out.put(copy_seconds(size, reps, before=barrier.wait))


def concurrent_copy_seconds(size: int, procs: int = PROCS, reps: int = 20) -> float:
    """The slowest of ``procs`` processes copying ``size`` B at the same moments (started
    together by a barrier): what every rank of an allreduce must at least do, read its send
    buffer and write its receive buffer, with all ranks sharing the memory bus."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_copy_worker, args=(barrier, size, reps, out))
               for _ in range(procs)]
    for w in workers:
        w.start()
    got = [out.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    return max(got)


def entries() -> list[tuple[str, str, str, dict]]:
    """(label, library, algorithm, params) of everything a round launches."""
    out = []
    for name in LIBRARIES:
        lib = libraries.get_library(name)
        for alg in lib.native_names():
            if alg != "native:auto":
                out.append((f"{name} {alg}", name, alg, {}))
    out += [(label, "mpich", "shm", params) for label, params in SHM]
    return out


def busbw(size: int, seconds: float) -> float:
    return size / seconds * 2 * (PROCS - 1) / PROCS


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="64KiB,256KiB,1MiB,4MiB,16MiB,64MiB")
    ap.add_argument("--libraries", default=",".join(LIBRARIES),
                    help="comma-separated libraries whose forced algorithms are launched")
    a = ap.parse_args(argv)
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    libs = a.libraries.split(",")
    todo = [e for e in entries() if e[1] in libs or e[2] == "shm"]
    times: dict = {}
    failed: dict = {}
    for rnd in range(a.rounds):
        order = todo if rnd % 2 == 0 else todo[::-1]
        print(f"round {rnd + 1}/{a.rounds}: {len(order)} launches", flush=True)
        for label, library, alg, params in order:
            try:
                got = harness_means(library, alg, PROCS, sizes, REPS, dtype="float64",
                                    params=params, max_volume=MAX_VOLUME, warmup=3)
            except RuntimeError as exc:  # an entry that refuses a size (catalogue constraints)
                failed[label] = str(exc).splitlines()[0][:160]
                continue
            for size, t in got.items():
                times.setdefault((label, size), []).append(t)
        for size in sizes:  # the limits, once per round
            times.setdefault(("copy", size), []).append(copy_seconds(size))
            times.setdefault(("copy2", size), []).append(concurrent_copy_seconds(size))
    med = {k: median(v) for k, v in times.items()}
    rows = []
    for size in sizes:
        row = {"size": size, "copy_GBps": size / med[("copy", size)] / 1e9,
               "copy2_GBps": size / med[("copy2", size)] / 1e9}
        for label, _ in SHM:
            row[label] = busbw(size, med[(label, size)]) / 1e9
        for name in libs:
            cand = [(t, label) for (label, s), t in med.items()
                    if s == size and label.startswith(name + " ")]
            if cand:
                t, label = min(cand)
                row[f"{name}_best"] = label.split(" ", 1)[1]
                row[name] = busbw(size, t) / 1e9
        best_native = max(row[n] for n in libs if n in row)
        best_shm = max(row[label] for label, _ in SHM)
        row["shm_vs_best_native"] = best_shm / best_native
        row["shm_vs_copy"] = best_shm / row["copy_GBps"]
        row["shm_vs_copy2"] = best_shm / row["copy2_GBps"]
        row["copy2_vs_best_native"] = row["copy2_GBps"] / best_native
        rows.append(row)
    _print(rows, libs, a.rounds)
    for label, why in failed.items():
        print(f"  not measured: {label}: {why}")
    _write(rows, libs)
    return rows


def _print(rows, libs, rounds):
    print(f"\nbusbw GB/s at P={PROCS}, float64 sum, median of {rounds} rounds "
          "(best native = each library's fastest forced algorithm)")
    print("copy: one process; copy x2: each of two processes copying at once (the bound of an "
          "allreduce that reads its input and writes its output once)")
    head = (f"{'size':>7} {'copy':>6} {'copy x2':>7} {'shm flags':>9} {'shm barr':>9} "
            + " ".join(f"{n:>26}" for n in libs)
            + f" {'shm/native':>10} {'shm/copy':>8} {'shm/copy x2':>11} {'copy x2/native':>14}")
    print(head)
    for r in rows:
        nat = " ".join(f"{r.get(n, float('nan')):>6.2f} {r.get(n + '_best', '-')[7:]:>19}"
                       for n in libs)
        print(f"{format_size(r['size']):>7} {r['copy_GBps']:>6.2f} {r['copy2_GBps']:>7.2f} "
              f"{r['shm flags']:>9.2f} {r['shm barrier']:>9.2f} {nat} "
              f"{r['shm_vs_best_native']:>10.2f} {r['shm_vs_copy']:>8.2f} "
              f"{r['shm_vs_copy2']:>11.2f} {r['copy2_vs_best_native']:>14.2f}")


def _write(rows, libs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    out = REPO / "results" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "shm_vs_native.csv", index=False)
    figdir = REPO / "figures" / "bench"
    figdir.mkdir(parents=True, exist_ok=True)
    x = [r["size"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    ax.plot(x, [r["copy_GBps"] for r in rows], "k--", label="memory copy (one process)")
    ax.plot(x, [r["copy2_GBps"] for r in rows], "k-.",
            label="memory copy, 2 processes at once (per process)")
    for label, _ in SHM:
        ax.plot(x, [r[label] for r in rows], "o-", lw=2, label=label)
    titles = {n: libraries.get_library(n).title for n in libs}
    for n in libs:
        ax.plot(x, [r.get(n, float("nan")) for r in rows], "s:", label=f"{titles[n]} best forced")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [format_size(s) for s in x])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"Allreduce bus bandwidth, P = {PROCS} on one node, float64 sum")
    ax.legend(fontsize=8)
    fig.savefig(figdir / "shm_vs_native.png", dpi=150)
    print(f"wrote {out / 'shm_vs_native.csv'} and {figdir / 'shm_vs_native.png'}")


if __name__ == "__main__":
    main()
