"""The measurement loop (what times is ``timing.py``). Run under MPI as
``python -m harness.measure.bench <run spec.json>``.

Per cell: build buffers and the expected result, run the warm-up, then repeat
{two barriers; compute phase with the cell's delays; time the call; verify} until the
stopping rule (``harness.stats``) says stop. After each repetition the ranks exchange
(arrival, finish, verified, elapsed-in-cell) with one Allgather, outside the timed region,
so every rank takes the same decision on the same data. One loop (``_repeat``) serves both
timing modes; what a sample is, and what it records, is the mode's (``modes.py``: ``PerCall``,
``Imb``), and the metric over the ranks is ``modes.over_ranks``, per repetition and for the
series alike. Rank 0 writes the raw repetitions and the run document after every cell,
atomically: a run that dies keeps what it finished.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np

from .. import fileio, stats
from ..algorithms import load_plugin
from ..cells import Cell
from ..dnn import workload
from ..libraries import declare, get_library
from ..results import store as results
from .clocksync import LaunchClock
from .counting import record_counts
from .launch import (init_mpi, launch_provenance, node_name, oversubscribed, resume, run_or_abort,
                     write_raw)
from .modes import METRICS, Growing, Imb, PerCall, on_common_clock, over_ranks
from .placement import CellPlacement
from .timing import ARRIVAL, FINISH, IN_CELL, VERIFIED, TimedCell

def _not_applicable(comm, cell: Cell) -> str | None:
    """Why a forced native algorithm does not run what it names at one of the cell's counts
    (``None`` when it does, or the cell forces nothing)."""
    if not cell.algorithm.startswith("native:"):
        return None
    native = get_library(cell.library).native(cell.algorithm)
    counts = (sorted(set(workload.counts(cell.params, cell.dtype)))
              if workload.is_workload(cell.params) else [cell.count])
    return next(filter(None, (native.not_applicable(n, comm.Get_size(),
                                                    np.dtype(cell.dtype).itemsize)
                              for n in counts)), None)


def measure_cell(comm, cell: Cell, settings: dict, seed: int, algorithm=None,
                 oversubscribed: bool = False, clock=None):
    """Measure one cell on ``comm``. Returns (entry for the run document, raw columns or None).

    ``entry`` holds the status, the error, the statistics of the chosen metric and of every
    metric. A wrong or failed call ends the cell at once and is never reported as a time.
    Between repetitions the bench does O(1) work (``stats.Running``) and keeps the exchange
    rows in a preallocated log; the per-repetition series are built once, at the end.
    """
    rule = stats.StoppingRule(
        confidence=settings["confidence"], precision=settings["precision"],
        min_reps=settings["min_reps"], max_reps=settings["max_reps"],
        time_budget=settings["time_budget"], kind=settings.get("rule", "student-t"))
    metric = settings.get("metric", "mean")
    entry = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "metric": metric,
             "warmup": int(settings.get("warmup", 0)), "seed": seed, "timing": cell.timing}
    reason = _not_applicable(comm, cell)
    if reason:
        entry.update(status="failed", error=reason, stats={}, converged=False,
                     finished=results.now())
        return entry, None
    budget = (settings.get("oversubscribed_time_budget") or None) if oversubscribed else None
    mode_class = Imb if cell.timing == "imb" else PerCall
    limit = stats.rep_limit(rule, mode_class.volume(cell, settings), settings.get("max_volume"))
    # before the cell's clock starts: the t table for max_reps = 1e5 takes about a second,
    # which would eat an oversubscribed cell's budget before its first repetition
    running = stats.Running(rule, limit)
    m = TimedCell(comm, cell, settings, seed, algorithm, clock)
    mode = mode_class(m, settings, seed)
    reps, status, error = _repeat(m, mode, running, metric, budget)
    if m.pap is not None:
        _record_knowledge(m, reps.errors)
    record = _record(comm, cell, m, mode, status, oversubscribed)
    entry.update(**mode.timing(), status=status, error=error, converged=status == "ok",
                 record=record)
    log = reps.log()
    series = {k: over_ranks(k, mode, log) for k in METRICS}
    if status in results.TIMED:
        # Shapiro-Wilk's p comes from the raw repetitions where the summary is built
        summaries = {k: stats.summarize(series[k], rule.confidence, normality=False)
                     for k in METRICS}
        entry.update(stats=summaries[metric], all_stats=summaries)
    else:
        entry["stats"] = {"n": reps.n}
    entry["finished"] = results.now()
    return entry, _raw(cell, m, mode, reps, series)


class Repetitions:
    """A cell's samples: every rank's exchange row of each (a preallocated log) and, in a PAP
    cell, the arrival times handed to the algorithm and their error against the measured."""

    def __init__(self, m: TimedCell):
        self.m, self.n = m, 0
        self.rows = Growing(m.procs, 6)
        self.estimates, self.errors = [], []

    def add(self, every: np.ndarray) -> None:
        m = self.m
        self.rows.put(self.n, every)
        if m.pap is not None and m.arrival is not None:  # what the algorithm was told
            self.estimates.append(m.arrival.tolist())
            self.errors.append((m.arrival - on_common_clock(every, ARRIVAL)).tolist())
        self.n += 1

    def log(self) -> np.ndarray:
        """The exchange rows so far: repetitions × ranks × 6."""
        return self.rows.first(self.n)


def _verdict(m: TimedCell, every: np.ndarray, where: str):
    """(status, error) of one sample's exchange rows: failed, wrong, or (None, None)."""
    if (every[:, VERIFIED] < 0).any():
        return "failed", m.error or "an algorithm call raised on another rank"
    if (every[:, VERIFIED] == 0).any():
        ranks = [int(r) for r in np.flatnonzero(every[:, VERIFIED] == 0)]
        return "wrong", f"result differs from the reference on ranks {ranks} in {where}"
    return None, None


def _repeat(m: TimedCell, mode, running: stats.Running, metric: str, budget):
    """The timing loop, one for both modes: the mode's warm-up, then its samples until the
    stopping rule says stop or a sample is wrong or failed. Returns (repetitions, status,
    error); every rank takes the same decision on the same exchanged rows."""
    status, error = None, None
    for every, label in mode.warm_up():
        status, error = _verdict(m, every, f"{mode.unit} {label}")
        if status:
            break
    reps = Repetitions(m)
    while not status:
        every = mode.sample(reps.n)
        reps.add(every)
        if every[:, VERIFIED].min() < 1.0:  # one cheap test per repetition; details only on failure
            status, error = _verdict(m, every, f"{mode.unit} {reps.n}")
        if not status:
            running.add(float(over_ranks(metric, mode, every[None])[0]))
            status = running.decide(float(every[:, IN_CELL].max()), budget)
    return reps, status, error


def _record(comm, cell: Cell, m: TimedCell, mode, status: str, oversubscribed: bool):
    """The cell's record: what the algorithm and the mode recorded, and how it was run."""
    record = mode.record(m.ctx.scratch.get("record"))
    if oversubscribed:
        record = dict(record or {}, oversubscribed=True)
    if m.rotation is not None:  # buffers: rotate: how many slots, and the cache they exceed
        record = dict(record or {}, rotation=m.rotation_record)
    if m.calls is not None:  # a workload cell: its calls, not one whole-buffer call
        record = dict(record or {}, **workload.record(cell.params, cell.dtype))
    elif m.body is not None:  # not an allreduce: what the body recorded (e.g. the pair level)
        record = dict(record or {}, **m.body.record)
    elif status in results.TIMED:  # node layout + message counts: one untimed call
        record = record_counts(comm, cell, m.fn, m.send, m.recv, m.op, record)
    return record


def _raw(cell: Cell, m: TimedCell, mode, reps: Repetitions, series: dict) -> dict | None:
    """The cell's raw rows, one per repetition (None without any)."""
    n = reps.n
    if not n:
        return None
    log = reps.log()
    raw = {
        "cell_id": [cell.cell_id] * n,
        "rep": list(range(n)),
        **{f"{k}_elapsed": series[k].tolist() for k in METRICS},
        "epoch": [m.epoch] * n,  # arrival and finish are seconds after this Unix time
        "arrival": on_common_clock(log, ARRIVAL).tolist(),  # IMB: each rank's sample start
        "finish": on_common_clock(log, FINISH).tolist(),  # and end
        **mode.raw_columns(log),  # delay, late_starts (per-call mode), iterations (IMB)
    }
    if reps.estimates:  # PAP cells: the arrival times handed to the algorithm, minus the measured
        raw.update(arrival_estimate=reps.estimates, estimate_error=reps.errors)
    return raw


def _record_knowledge(m: TimedCell, errors: list) -> None:
    """Close the cell's monitor and add the PAP compute phase and the arrival-estimation error
    (estimate - measured arrival, all ranks and repetitions, milliseconds) to the record."""
    waited = m.comm.allreduce(m.monitor.waited if m.monitor else 0)
    m.close()
    pap = m.pap
    rec = m.ctx.scratch.setdefault("record", {})
    rec.update(knowledge=pap.knowledge, base_compute=pap.base, edge=pap.edge)
    if m.monitor is not None:
        rec["estimates_late"] = int(waited)  # rank-repetitions that waited for the exchange
    if errors:
        e = np.abs(np.asarray(errors)) * 1e3
        rec.update(estimate_error_ms_median=float(np.median(e)),
                   estimate_error_ms_p95=float(np.percentile(e, 95)),
                   estimate_error_ms_max=float(e.max()))


def run(spec_path: str) -> int:
    spec = fileio.read_json(spec_path)
    declare(spec["library"], spec.get("family") or spec["library"])  # its family's catalogue
    MPI = init_mpi(spec.get("thread_level", "single"))
    for plugin in spec.get("plugins", []):
        load_plugin(plugin)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != spec["procs"]:
        if rank == 0:
            print(f"harness.measure.bench: launched with {comm.Get_size()} ranks, the run needs "
                  f"{spec['procs']}", file=sys.stderr)
        return 3
    settings = spec["settings"]
    doc, raw_parts = resume(spec, rank)
    done = comm.bcast([c["cell_id"] for c in doc["cells"]] if doc else [], root=0)
    provenance = launch_provenance(comm, spec)
    if rank == 0:
        if doc is None:
            doc = results.new_run_doc(spec)
        else:
            doc.setdefault("resumed", []).append(results.now())
        doc["provenance"] = provenance
    progress, final = Path(spec["outputs"]["progress"]), Path(spec["outputs"]["run"])
    raw_path = Path(spec["outputs"]["raw"])
    if rank == 0:
        fileio.write_json(progress, doc)
    todo = [(i, c) for i, c in enumerate(spec["cells"]) if c["cell_id"] not in done]
    crowded = oversubscribed(comm)
    clock = LaunchClock(comm)  # rank 0's clock on every rank (clocksync.py)
    if rank == 0 and done:
        print(f"resuming run {spec['run_id']}: {len(done)} cell(s) already measured", flush=True)
    host = node_name()
    for _, cell_dict in todo:
        cell = Cell.from_dict(cell_dict)
        # seeded by the cell, not its place in the run: a replay with `harness run` draws
        # the same delays as the campaign did
        seed = int(spec.get("seed", 0)) + int(cell.cell_id[1:9], 16)
        placed = CellPlacement()  # where each rank runs (placement.py)
        try:
            clock.refresh(comm)
            entry, raw = measure_cell(comm, cell, settings, seed, oversubscribed=crowded,
                                      clock=clock)
        except Exception as exc:
            if rank == 0:
                traceback.print_exc()
            entry, raw = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "status": "failed",
                          "error": f"{type(exc).__name__}: {exc}", "stats": {},
                          "converged": False, "finished": results.now()}, None
        where = placed.finish(comm, host)
        if rank == 0:
            entry["placement"] = where
            doc["cells"].append(entry)
            if raw:
                raw_parts.append(fileio.arrow_table(raw))
                write_raw(raw_path, raw_parts)
            fileio.write_json(progress, doc)
            st = entry.get("stats") or {}
            mean = st.get("mean")
            print(f"[{len(doc['cells'])}/{len(spec['cells'])}] {cell.library} {cell.algorithm} "
                  f"P={cell.procs} {cell.size}B {cell.dtype} {cell.op} {cell.delay}: "
                  f"{entry['status']} n={st.get('n')}"
                  + (f" mean={mean * 1e6:.2f}us" if mean else ""), flush=True)
    synced = clock.finish(comm)  # what is left of the clocks' gaps at the launch's end
    if rank == 0:
        doc["clock"] = synced
        doc["status"] = "complete"
        doc["finished"] = results.now()
        fileio.write_json(progress, doc)
        fileio.write_json(final, doc)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.measure.bench RUN_SPEC.json", file=sys.stderr)
        return 2
    return run_or_abort(run, argv[0])


if __name__ == "__main__":
    sys.exit(main())
