"""The measurement loop: the only place that times. Run under MPI as
``python -m harness.bench <run spec.json>``.

Per cell: build buffers and the expected result, run the warm-up, then repeat
{two barriers; compute phase with the cell's delays; time the call; verify} until the
stopping rule (``harness.stats``) says stop. After each repetition the ranks exchange
(arrival, finish, verified, elapsed-in-cell) with one Allgather, outside the timed region,
so every rank takes the same decision on the same data. Rank 0 writes the raw repetitions
and the run document after every cell, atomically: a run that dies keeps what it finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from . import __version__, results, stats, verify
from .algorithms import Context, load_plugin, resolve
from .delays import compute_phase, delay_vector
from .plan import Cell

ENV_PREFIXES = ("OMPI_", "MPIR_CVAR_", "I_MPI_", "SLURM_", "MPI4PY_", "PMI_", "HYDRA_", "HARNESS_")
METRICS = ("mean", "max", "min", "span")


def _mpi_op(MPI, name: str):
    return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[name]


def measure_cell(comm, cell: Cell, settings: dict, seed: int, algorithm=None):
    """Measure one cell on ``comm``. Returns (entry for the run document, raw rows or None).

    ``entry`` holds status, error, stats of the chosen metric and of every metric.
    """
    from mpi4py import MPI

    rank, procs = comm.Get_rank(), comm.Get_size()
    rule = stats.StoppingRule(
        confidence=settings["confidence"], precision=settings["precision"],
        min_reps=settings["min_reps"], max_reps=settings["max_reps"],
        time_budget=settings["time_budget"])
    metric = settings.get("metric", "mean")
    warmup = int(settings.get("warmup", 0))
    base = float(settings.get("base_compute", 0.0))
    fn = algorithm or resolve(cell.algorithm)
    op = _mpi_op(MPI, cell.op)
    count = cell.count
    send = verify.contribution(rank, count, cell.dtype, cell.op)
    recv = np.empty(count, dtype=cell.dtype)
    want = verify.expected(procs, count, cell.dtype, cell.op)
    bad = verify.sentinel(cell.dtype)
    ctx = Context(params=dict(cell.params))
    wtime, barrier = MPI.Wtime, comm.Barrier
    exch = np.zeros(4)
    every = np.zeros((procs, 4))
    global_clock = bool(comm.Get_attr(MPI.WTIME_IS_GLOBAL))

    entry = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "metric": metric, "warmup": warmup,
             "seed": seed, "error": None}
    try:
        for _ in range(warmup):
            barrier()
            fn(comm, send, recv, op, ctx)
    except Exception as exc:  # the library refused (e.g. MPICH fallback=error)
        entry.update(status="failed", error=f"{type(exc).__name__}: {exc}".strip(), stats={},
                     converged=False, finished=results.now())
        return entry, None

    series = {m: [] for m in METRICS}
    arrivals, finishes, delays_all = [], [], []
    status, error = None, None
    t0 = wtime()
    rep = 0
    while True:
        delays = delay_vector(cell.delay, cell.max_delay, procs, cell.late_rank, seed, rep)
        recv.fill(bad)
        wait = base + delays[rank]
        barrier()
        barrier()
        if wait > 0:
            compute_phase(wait)
        try:
            a = wtime()
            fn(comm, send, recv, op, ctx)
            f = wtime()
            ok = 1.0 if np.array_equal(recv, want) else 0.0
        except Exception as exc:
            a = f = wtime()
            ok = -1.0
            error = f"{type(exc).__name__}: {exc}".strip()
        exch[0], exch[1], exch[2], exch[3] = a, f, ok, f - t0
        comm.Allgather(exch, every)
        rep += 1
        a_all, f_all = every[:, 0], every[:, 1]
        e = f_all - a_all
        series["mean"].append(float(e.mean()))
        series["max"].append(float(e.max()))
        series["min"].append(float(e.min()))
        series["span"].append(float(f_all.max() - a_all.min()) if global_clock else float("nan"))
        arrivals.append(a_all.copy())
        finishes.append(f_all.copy())
        delays_all.append(delays)
        if (every[:, 2] < 0).any():
            status = "failed"
            error = error or "an algorithm call raised on another rank"
            break
        if (every[:, 2] == 0).any():
            status = "wrong"
            wrong_ranks = [int(r) for r in np.flatnonzero(every[:, 2] == 0)]
            error = f"result differs from the reference on ranks {wrong_ranks} in repetition {rep}"
            break
        if stats.rule_holds(series[metric], rule):
            status = "ok"
            break
        if rep >= rule.max_reps or every[:, 3].max() >= rule.time_budget:
            status = "not-converged"
            break

    summaries = {m: stats.summarize(series[m], rule.confidence) for m in METRICS}
    entry.update(status=status, error=error, stats=summaries[metric], all_stats=summaries,
                 converged=status == "ok", finished=results.now())
    raw = {
        "cell_id": [cell.cell_id] * rep,
        "rep": list(range(rep)),
        **{f"{m}_elapsed": series[m] for m in METRICS},
        "arrival": [x.tolist() for x in arrivals],
        "finish": [x.tolist() for x in finishes],
        "delay": [x.tolist() for x in delays_all],
    }
    return entry, raw


def _provenance(comm, spec: dict) -> dict:
    from mpi4py import MPI
    import mpi4py

    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if comm.Get_rank() != 0:
        return {}
    script = spec.get("jobscript")
    script_hash = None
    if script and Path(script).is_file():
        script_hash = hashlib.sha256(Path(script).read_bytes()).hexdigest()
    return {
        "library_version": MPI.Get_library_version().strip().splitlines()[0].strip(),
        "library_version_full": MPI.Get_library_version().strip(),
        "mpi_version": "%d.%d" % MPI.Get_version(),
        "mpi4py": mpi4py.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "harness": __version__,
        "hosts": hosts,
        "thread_level": MPI.Query_thread(),
        "wtick": MPI.Wtick(),
        "wtime_is_global": bool(comm.Get_attr(MPI.WTIME_IS_GLOBAL)),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "jobscript": script,
        "jobscript_sha256": script_hash,
        "git_commit": spec.get("git_commit"),
        "config_hash": spec.get("config_hash"),
    }


def _write_raw(path: Path, parts: list[dict]) -> None:
    import pyarrow as pa

    cols: dict[str, list] = {}
    for part in parts:
        for k, v in part.items():
            cols.setdefault(k, []).extend(v)
    results.write_parquet(path, pa.table(cols))


def run(spec_path: str) -> int:
    from mpi4py import MPI

    spec = results.read_json(spec_path)
    for plugin in spec.get("plugins", []):
        load_plugin(plugin)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != spec["procs"]:
        if rank == 0:
            print(f"harness.bench: launched with {comm.Get_size()} ranks, the run needs "
                  f"{spec['procs']}", file=sys.stderr)
        return 3
    settings = spec["settings"]
    doc = {"run_id": spec["run_id"], "campaign": spec["campaign"], "library": spec["library"],
           "procs": spec["procs"], "nodes": spec["nodes"], "status": "running",
           "started": results.now(), "settings": settings,
           "provenance": _provenance(comm, spec), "cells": []}
    raw_parts: list[dict] = []
    run_path, raw_path = Path(spec["outputs"]["run"]), Path(spec["outputs"]["raw"])
    if rank == 0:
        results.write_json(run_path, doc)
    for i, cell_dict in enumerate(spec["cells"]):
        cell = Cell.from_dict(cell_dict)
        seed = int(spec.get("seed", 0)) + i
        try:
            entry, raw = measure_cell(comm, cell, settings, seed)
        except Exception as exc:
            traceback.print_exc()
            entry, raw = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "status": "failed",
                          "error": f"{type(exc).__name__}: {exc}", "stats": {},
                          "converged": False, "finished": results.now()}, None
        if rank == 0:
            doc["cells"].append(entry)
            if raw:
                raw_parts.append(raw)
                _write_raw(raw_path, raw_parts)
            results.write_json(run_path, doc)
            st = entry.get("stats") or {}
            print(f"[{i + 1}/{len(spec['cells'])}] {cell.algorithm} P={cell.procs} "
                  f"size={cell.size} {cell.dtype} {cell.op} delay={cell.delay}: {entry['status']}"
                  f" n={st.get('n')} mean={st.get('mean')}", flush=True)
    if rank == 0:
        doc["status"] = "complete"
        doc["finished"] = results.now()
        results.write_json(run_path, doc)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.bench RUN_SPEC.json", file=sys.stderr)
        return 2
    return run(argv[0])


if __name__ == "__main__":
    sys.exit(main())
