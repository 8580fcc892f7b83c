"""What the benchmark scripts share: launching under a library, one harness run of several
cells with a fixed repetition count, one IMB-MPI1 launch, and ABAB interleaving.

Launches minutes apart on one machine can differ by 2x, so every comparison here measures
both sides in alternation (A B A B ...) and reports the median over the alternations of
the per-alternation ratio or difference.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import fileio, libraries
from harness.campaign import runner
from harness.cells import Cell, Run  # noqa: E402
from harness.results import store as results  # noqa: E402


def lib_env(lib) -> dict:
    """The environment a job script of ``lib`` runs in (wheel paths, MPI4PY_LIBMPI)."""
    env = {**os.environ, **lib.run_env()}
    for var, dirs in lib.prepend().items():
        env[var] = ":".join(dirs + ([env[var]] if env.get(var) else []))
    return env


def launch(lib, procs: int, argv: list, extra_env: dict | None = None, timeout: float = 600) -> str:
    """Run ``argv`` under ``lib``'s launcher with ``procs`` ranks; its standard output."""
    env = {**lib_env(lib), **(extra_env or {})}
    out = subprocess.run(lib.launch_argv(procs) + [str(a) for a in argv], env=env,
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"{' '.join(map(str, argv[:3]))}: exit {out.returncode}: {out.stderr[-2000:]}")
    return out.stdout


def imb_binary():
    """IMB-MPI1 as the Intel MPI wheel ships it; MPICH's libmpi runs it too (the MPICH ABI),
    as ``lib_env`` puts the launching library's ``lib/`` first on the search path."""
    return libraries.get_library("impi").prefix / "bin" / "IMB-MPI1"


def imb(lib, procs: int, sizes: list, iterations: int, extra_env: dict | None = None,
        launcher: list | None = None) -> dict:
    """IMB-MPI1 Allreduce (float32 sum, -sync 1) with exactly ``iterations`` calls per size,
    under ``lib`` (launched by ``launcher`` if given): {size: t_avg seconds}."""
    if launcher:
        lib = dataclasses.replace(lib, launcher=tuple(launcher))
    with tempfile.NamedTemporaryFile("w", suffix=".msglen", delete=False) as fh:
        fh.write("\n".join(str(s) for s in sizes) + "\n")
    try:
        out = launch(lib, procs, [imb_binary(), "Allreduce", "-npmin", procs,
                                  "-msglen", fh.name, "-iter", iterations, "-iter_policy", "off",
                                  "-time", 1000, "-sync", 1], extra_env)
    finally:
        os.unlink(fh.name)
    t = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            t[int(m.group(1))] = float(m.group(5)) * 1e-6
    return t


def harness_means(library: str, algorithm: str, procs: int, sizes: list, reps: int,
                  **options) -> dict:
    """One MPI launch of the harness measuring ``sizes`` with exactly ``reps`` repetitions
    each (samples in IMB mode; with ``max_volume``, at most ``max_volume / size`` and at
    least 5): {size: mean seconds}."""
    return {c["cell"]["size"]: c["stats"]["mean"]
            for c in harness_cells(library, algorithm, procs, sizes, reps, **options)}


def harness_cells(library: str, algorithm: str, procs: int, sizes: list, reps: int, *,
                  dtype: str = "float32", timing: str = "percall", imb_iterations: int = 0,
                  warmup: int = 10, thread_level: str = "single", params: dict | None = None,
                  max_volume: float | None = None, launcher: list | None = None) -> list:
    """``harness_means``'s launch (by ``launcher`` if given): the run document's cells, each
    with its ``stats`` and ``placement``."""
    lib = libraries.get_library(library)
    if launcher:
        lib = dataclasses.replace(lib, launcher=tuple(launcher))
    cells = tuple(Cell(library, algorithm, procs, s, dtype, "sum", thread_level=thread_level,
                       timing=timing, params=tuple(sorted((params or {}).items())))
                  for s in sizes)
    env = lib.native(algorithm).env if algorithm.startswith("native:") else {}
    run = Run(library=library, env=tuple(sorted(env.items())), procs=procs, nodes=1,
              cells=cells, thread_level=thread_level)
    settings = {"confidence": 0.95, "precision": 1e-9, "min_reps": min(reps, 5) if max_volume
                else reps, "max_reps": reps, "max_volume": max_volume,
                "time_budget": 1e9, "warmup": warmup, "base_compute": 0.0, "metric": "mean",
                "sync": "barrier", "imb_iterations": imb_iterations}
    with tempfile.TemporaryDirectory() as tmp:
        store = results.CampaignStore(Path(tmp), "bench")
        script, spec = runner.prepare(run, lib, store, settings)
        runner.write(store, script, spec)
        with open(os.devnull, "w") as null:
            outcome = runner.execute(store, spec, timeout=600, stdout=null)
        doc = fileio.read_json(store.run_doc(run.run_id))
    if outcome != "complete":
        raise RuntimeError(f"harness run {outcome}: {[c.get('error') for c in doc['cells']]}")
    for c in doc["cells"]:
        if c["status"] not in ("ok", "not-converged"):
            raise RuntimeError(f"{algorithm} {c['cell']['size']} B: {c['status']}: {c.get('error')}")
    return doc["cells"]


def median(values) -> float:
    return float(statistics.median(values))


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:9.2f} us"
