"""A simulated run: every cell of a run spec simulated on the run's platform, written as a
measured run is (``python -m harness.simulate.bench <run spec.json>``, the job script of a
simulated run; no MPI launch).

- A harness algorithm runs unchanged on the simulated communicator (``cell.simulate_sizes``),
  every rank's result verified; a native algorithm is SMPI's copy of the family's
  (``natives.smpi_choice``: the family's selector for AUTO, the SMPI algorithm of the same
  schedule for a forced one; ``smpi.smpi_allreduce``).
- Cells that differ only in size are simulated together, one size after the other.
- Without delays a simulated call takes the same time every time: one call is the cell, its
  interval has no width (``ci_method`` ``simulated``). With a delay mode each repetition
  draws its delays as a measured cell does (``harness.delays.delay_vector``, the same seed),
  and repetitions are simulated in rounds of ``min_reps``, doubling, until the stopping
  rule's precision holds or ``MAX_SIMULATED_REPS``.
- After each group of cells the journal, the raw rows and, at the end, the run document are
  written as ``harness.measure.bench`` writes them; a run that dies keeps what it finished,
  and a new attempt resumes from the journal. Each cell's record says it was simulated, on
  what platform, by which simulator, copying what; the run's provenance the same.
"""

from __future__ import annotations

import hashlib
import platform as host_platform
import socket
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .. import __version__, fileio, stats
from ..cells import Cell
from ..delays import delay_vector
from ..errors import SimulationError, SmpiError
from ..results import store as results
from ..results.journal import resume, write_raw
from . import natives
from .cell import simulate_sizes
from .platform import Platform
from .smpi import smpi_allreduce

MAX_SIMULATED_REPS = 160  # repetitions of a delayed cell: rounds of min_reps, doubling
METRICS = ("mean", "max", "min", "span")


def copies(family: str, cell: Cell) -> str:
    """What a simulated cell's number copies: SMPI's copy of a native algorithm or selection,
    or the harness's own algorithm, run unchanged."""
    if cell.kind == "native":
        return natives.smpi_choice(family, cell.algorithm).copies
    return f"the harness's {cell.algorithm}, run unchanged on the simulated communicator"


def _groups(cells: list[Cell]) -> list[list[Cell]]:
    """Cells that differ only in size, in a stable order (sizes ascending): one simulation."""
    out: dict = {}
    for c in cells:
        key = (c.algorithm, c.params, c.dtype, c.op, c.delay, c.max_delay, c.late_rank)
        if c.delay != "none":  # each delayed cell draws its own delays from its own seed
            key = (c.cell_id,)
        out.setdefault(key, []).append(c)
    return [sorted(g, key=lambda c: c.size) for g in out.values()]


class Simulation:
    """One run spec's simulation: the platform, the rates, the settings."""

    def __init__(self, spec: dict):
        self.spec = spec
        info = spec["platform"]
        self.info = info
        self.platform = Platform(**info["platform"])
        self.reduce_rate = info.get("reduce_rate")
        self.family = spec.get("family") or spec["library"].split("@")[0]
        self.settings = spec["settings"]

    def seed(self, cell: Cell) -> int:
        return int(self.spec.get("seed", 0)) + int(cell.cell_id[1:9], 16)

    def times(self, group: list[Cell]) -> list[dict]:
        """Per cell of ``group``: ``times`` (calls x ranks, seconds), ``delays`` (calls x
        ranks), ``ok``, ``wrong_ranks``, ``record`` (its ``simulation``: the sizes simulated
        together, and per rank the messages, bytes and reductions of all of them, the wall
        time and peak memory of the simulation)."""
        first = group[0]
        sizes = [c.size for c in group]
        if first.kind == "native":
            return self._smpi(first, sizes)
        if first.delay == "none":
            return self._harness(first, sizes, None)
        return self._delayed(first)

    def _smpi(self, cell: Cell, sizes: list[int]) -> list[dict]:
        choice = natives.smpi_choice(self.family, cell.algorithm)
        res = smpi_allreduce(choice.algorithm, cell.procs, sizes, cell.dtype, cell.op,
                             self.platform, selector=choice.selector, config=choice.config)
        return [{"times": [r.times], "delays": None, "ok": r.ok, "wrong_ranks": r.wrong_ranks,
                 "record": {"smpi": choice.cfg, "verified": True,
                            "simulation": {"sizes": sizes, "wall": r.wall,
                                           "peak_rss": r.peak_rss}}} for r in res]

    def _harness(self, cell: Cell, sizes: list[int], delays) -> list[dict]:
        options = {"delays": delays} if delays is not None else {}
        res = simulate_sizes(cell.algorithm, cell.procs, sizes, cell.dtype, cell.op,
                             self.platform, reduce_rate=self.reduce_rate,
                             params=dict(cell.params), plugins=self.spec.get("plugins", ()),
                             calls=len(delays) if delays is not None else 1, **options)
        return [{"times": r.all_times, "delays": delays, "ok": r.ok,
                 "wrong_ranks": r.wrong_ranks,
                 # the algorithm's own record (SUARA2's grid and combination, ...), as the
                 # measured bench keeps it
                 "record": {**(r.record or {}), "verified": True, "simulation": {
                     "sizes": sizes, "messages": r.messages, "bytes": r.bytes,
                     "reductions": r.reductions, "wall": r.wall, "peak_rss": r.peak_rss}}}
                for r in res]

    def _delayed(self, cell: Cell) -> list[dict]:
        n = max(2, int(self.settings.get("min_reps", 10)))
        while True:
            delays = [delay_vector(cell.delay, cell.max_delay, cell.procs, cell.late_rank,
                                   self.seed(cell), rep).tolist() for rep in range(n)]
            out = self._harness(cell, [cell.size], delays)
            per_call = _series(out[0]["times"], delays)[self.settings.get("metric", "mean")]
            st = stats.summarize(per_call, self.settings["confidence"], normality=False)
            if (not out[0]["ok"] or st["rel_halfwidth"] <= self.settings["precision"]
                    or 2 * n > MAX_SIMULATED_REPS):
                out[0]["converged"] = bool(st["rel_halfwidth"] <= self.settings["precision"])
                return out
            n *= 2


def _series(times, delays) -> dict[str, np.ndarray]:
    """Each metric per call, from each rank's time of its call (calls x ranks, from its own
    arrival to its return, as a measured cell's ``finish - arrival``) and each rank's delay
    after the call's common start: the mean, max and min over the ranks, and the span from
    the first arrival to the last return."""
    t = np.asarray(times, dtype=float)
    d = np.zeros_like(t) if delays is None else np.asarray(delays, dtype=float)
    return {"mean": t.mean(axis=1), "max": t.max(axis=1), "min": t.min(axis=1),
            "span": (d + t).max(axis=1) - d.min(axis=1)}


def entry_of(sim: Simulation, cell: Cell, out: dict) -> tuple[dict, dict | None]:
    """The run document's entry of one simulated cell and its raw columns."""
    t = np.asarray(out["times"], dtype=float)
    d = np.zeros_like(t) if out["delays"] is None else np.asarray(out["delays"], dtype=float)
    series = _series(t, out["delays"])
    metric = sim.settings.get("metric", "mean")
    record = {"simulated": True, "platform": sim.info["id"], "platform_name": sim.info["name"],
              "simulator": sim.info.get("simulator"), "copies": copies(sim.family, cell),
              **out["record"]}
    entry = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "metric": metric, "warmup": 0,
             "seed": sim.seed(cell), "timing": "percall", "record": record}
    if out["ok"] is False:
        entry.update(status="wrong", converged=False, stats={"n": len(t)},
                     error=f"result differs from the reference on ranks {out['wrong_ranks']} "
                           f"(simulated)")
        return entry, None
    summaries = {k: stats.summarize_simulated(v, sim.settings["confidence"],
                                               out["delays"] is None)
                 for k, v in series.items()}
    converged = out.get("converged", True)
    entry.update(status="ok" if converged else "not-converged", error=None, converged=converged,
                 stats=summaries[metric], all_stats=summaries)
    n = len(t)
    raw = {"cell_id": [cell.cell_id] * n, "rep": list(range(n)),
           **{f"{k}_elapsed": v.tolist() for k, v in series.items()},
           "epoch": [0.0] * n, "arrival": d.tolist(), "finish": (d + t).tolist(),
           "delay": d.tolist(),
           "late_starts": [0] * n}
    return entry, raw


def provenance(sim: Simulation, spec: dict) -> dict:
    return {"library": spec["library"], "family": sim.family, "simulated": True,
            "simulator": sim.info.get("simulator"), "platform": sim.info,
            "library_version": natives.smpi_choice(sim.family, "native:auto").copies,
            "harness": __version__, "python": host_platform.python_version(),
            "numpy": np.__version__, "hosts": [socket.gethostname()], "launched": False,
            "jobscript_sha256": _sha256(spec.get("jobscript")),
            "git_commit": spec.get("git_commit"), "config_hash": spec.get("config_hash"),
            "thread_level": spec.get("thread_level", "single")}


def _sha256(path) -> str | None:
    if not path or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run(spec_path: str) -> int:
    spec = fileio.read_json(spec_path)
    sim = Simulation(spec)
    doc, raw_parts = resume(spec, 0)
    done = {c["cell_id"] for c in doc["cells"]} if doc else set()
    if doc is None:
        doc = results.new_run_doc(spec)
    else:
        doc.setdefault("resumed", []).append(results.now())
    doc["provenance"] = provenance(sim, spec)
    progress, final = Path(spec["outputs"]["progress"]), Path(spec["outputs"]["run"])
    raw_path = Path(spec["outputs"]["raw"])
    fileio.write_json(progress, doc)
    cells = [Cell.from_dict(c) for c in spec["cells"] if c["cell_id"] not in done]
    for group in _groups(cells):
        t0 = time.perf_counter()
        try:
            outs = sim.times(group)
        except (SimulationError, SmpiError, ValueError, KeyError) as exc:
            traceback.print_exc()
            outs = [exc] * len(group)
        for cell, out in zip(group, outs):
            if isinstance(out, Exception):
                entry, raw = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "status": "failed",
                              "error": f"{type(out).__name__}: {out}", "stats": {},
                              "converged": False}, None
            else:
                entry, raw = entry_of(sim, cell, out)
            entry["finished"] = results.now()
            doc["cells"].append(entry)
            if raw:
                raw_parts.append(fileio.arrow_table(raw))
            st = entry.get("stats") or {}
            print(f"[{len(doc['cells'])}/{len(spec['cells'])}] {cell.library} {cell.algorithm} "
                  f"P={cell.procs} {cell.size}B {cell.dtype} {cell.op} {cell.delay}: "
                  f"{entry['status']} n={st.get('n')}"
                  + (f" simulated={st['mean'] * 1e6:.2f}us" if st.get("mean") else "")
                  + f" ({time.perf_counter() - t0:.1f} s)", flush=True)
        if raw_parts:
            write_raw(raw_path, raw_parts)
        fileio.write_json(progress, doc)
    doc["status"] = "complete"
    doc["finished"] = results.now()
    fileio.write_json(progress, doc)
    fileio.write_json(final, doc)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.simulate.bench RUN_SPEC.json", file=sys.stderr)
        return 2
    return run(argv[0])


if __name__ == "__main__":
    sys.exit(main())
