#!/usr/bin/env python3
"""What a launch of the harness costs before its first measured call, interleaved (A B C ...).

Per alternation, three launches of P ranks under one library:
- ``bare``: every rank imports mpi4py and initialises MPI;
- ``harness``: every rank imports ``harness.measure.bench`` (what each rank of a job script imports);
- ``one cell``: a whole one-cell job script (``harness.measure.bench`` on a spec: 8 B, 10
  repetitions), its raw table written on rank 0.

Printed: the median wall time of each over the alternations, and the medians of the
differences harness - bare and one cell - bare (the harness's start-up per launch). A
campaign pays it once per launch: the default campaign makes a few hundred.

    .venv/bin/python benchmarks/launch_startup.py [--library mpich] [--procs 2] [--alternations 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, lib_env, libraries, median  # noqa: E402

from harness.campaign import runner  # noqa: E402
from harness.cells import Cell, Run  # noqa: E402
from harness.results import store as results


def timed(argv: list, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def one_cell_script(store: results.CampaignStore, library: str, procs: int) -> Path:
    lib = libraries.get_library(library)
    run = Run(library=library, env=(), procs=procs, nodes=1,
              cells=(Cell(library, "native:auto", procs, 8, "float32", "sum"),))
    settings = {"confidence": 0.95, "precision": 1e-9, "min_reps": 10, "max_reps": 10,
                "time_budget": 60.0, "warmup": 2, "base_compute": 0.0, "metric": "mean",
                "sync": "barrier"}
    script, spec = runner.prepare(run, lib, store, settings)
    runner.write(store, script, spec)
    return store.job_script(run.run_id)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", default="mpich")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--alternations", type=int, default=7)
    args = ap.parse_args(argv)
    lib = libraries.get_library(args.library)
    env = lib_env(lib)
    python = [sys.executable, "-c"]
    bare = lib.launch_argv(args.procs) + python + ["from mpi4py import MPI"]
    harness = lib.launch_argv(args.procs) + python + ["from harness.measure import bench; "
                                                      "from mpi4py import MPI"]
    rows = {"bare": [], "harness": [], "one cell": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = results.CampaignStore(Path(tmp), "startup")
        script = one_cell_script(store, args.library, args.procs)
        for _ in range(args.alternations):
            rows["bare"].append(timed(bare, env))
            rows["harness"].append(timed(harness, env))
            run_id = script.stem  # measured anew each time: no journal to resume from
            for stale in (store.progress(run_id), store.raw(run_id), store.run_doc(run_id)):
                stale.unlink(missing_ok=True)
            rows["one cell"].append(timed(["bash", str(script)], os.environ))
    print(f"{args.library}, P = {args.procs}, {args.alternations} alternations (median wall time)")
    for name, values in rows.items():
        print(f"  {name:9s} {median(values):6.3f} s")
    for name in ("harness", "one cell"):
        diff = median([a - b for a, b in zip(rows[name], rows["bare"])])
        print(f"  {name} - bare: {diff:6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
