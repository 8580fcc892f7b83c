"""The measurement loop (what times is ``timing.py``). Run under MPI as
``python -m harness.measure.bench <run spec.json>``.

Per cell: build buffers and the expected result, run the warm-up, then repeat
{two barriers; compute phase with the cell's delays; time the call; verify} until the
stopping rule (``harness.stats``) says stop. After each repetition the ranks exchange
(arrival, finish, verified, elapsed-in-cell) with one Allgather, outside the timed region,
so every rank takes the same decision on the same data. Rank 0 writes the raw repetitions
and the run document after every cell, atomically: a run that dies keeps what it finished.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np

from .. import fileio, stats
from ..algorithms import load_plugin
from ..cells import Cell
from ..delays import delay_vector
from ..dnn import workload
from ..libraries import declare, get_library
from ..results import store as results
from .clocksync import LaunchClock
from .counting import record_counts
from .launch import (init_mpi, launch_provenance, node_name, oversubscribed, resume, run_or_abort,
                     write_raw)
from .placement import CellPlacement
from .timing import ARRIVAL, EXTRA, FINISH, IN_CELL, OFFSET, VERIFIED, TimedCell

METRICS = ("mean", "max", "min", "span")


def imb_iterations(size: int) -> int:
    """Calls per IMB sample: IMB-MPI1's default ``-iter 1000,40``: 1000, at most 40 MiB of
    messages (``min(1000, 40 MiB / size)``, at least 1)."""
    return max(1, min(1000, (40 * 2**20) // max(size, 1)))


def _metric_value(metric: str, every: np.ndarray, common_clock: bool, rows=slice(None),
                  scale: float = 1.0) -> float:
    every = every[rows]  # the ranks whose times count (all, or a body's, e.g. ping-pong senders)
    if metric == "span":
        if not common_clock:
            return float("nan")
        return scale * float((every[:, FINISH] + every[:, OFFSET]).max()
                             - (every[:, ARRIVAL] + every[:, OFFSET]).min())
    e = (every[:, FINISH] - every[:, ARRIVAL]) * scale
    return float(e.mean() if metric == "mean" else e.max() if metric == "max" else e.min())


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
    warmup = int(settings.get("warmup", 0))
    imb = cell.timing == "imb"
    entry = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "metric": metric, "warmup": warmup,
             "seed": seed, "timing": cell.timing}
    if cell.algorithm.startswith("native:"):
        native = get_library(cell.library).native(cell.algorithm)
        counts = (sorted(set(workload.counts(cell.params, cell.dtype)))
                  if workload.is_workload(cell.params) else [cell.count])
        reason = next(filter(None, (native.not_applicable(n, comm.Get_size(),
                                                          np.dtype(cell.dtype).itemsize)
                                    for n in counts)), None)
        if reason:
            entry.update(status="failed", error=reason, stats={}, converged=False,
                         finished=results.now())
            return entry, None
    budget = (settings.get("oversubscribed_time_budget") or None) if oversubscribed else None
    if imb:
        iterations = int(settings.get("imb_iterations") or imb_iterations(cell.size))
        limit = stats.rep_limit(rule, cell.size * iterations, settings.get("max_volume"))
    else:
        limit = stats.rep_limit(rule, cell.size, settings.get("max_volume"))
    # before the cell's clock starts: the t table for max_reps = 1e5 takes about a second,
    # which would eat an oversubscribed cell's budget before its first repetition
    running = stats.Running(rule, limit)
    m = TimedCell(comm, cell, settings, seed, algorithm, clock)
    procs = m.procs
    if m.body is not None and imb:
        raise ValueError(f"timing: {cell.algorithm} is timed per repetition, not 'imb'")

    def verdict(every, rep):
        if (every[:, VERIFIED] < 0).any():
            return "failed", m.error or "an algorithm call raised on another rank"
        if (every[:, VERIFIED] == 0).any():
            ranks = [int(r) for r in np.flatnonzero(every[:, VERIFIED] == 0)]
            where = f"sample {rep}" if imb else f"repetition {rep}"
            return "wrong", f"result differs from the reference on ranks {ranks} in {where}"
        return None, None

    status, error = None, None
    if imb:  # IMB warms up with max(10, n/10) calls of the loop body; Python needs one more
        # whole sample before its times settle (the first sample ran 2-4x slower at 4 KiB)
        for calls in (max(10, iterations // 10), iterations):
            status, error = verdict(m.imb_batch(calls), "warm-up")
            if status:
                break
    else:
        for w in range(warmup):  # same path as a measured repetition, own delay draws
            delays = delay_vector(cell.delay, cell.max_delay, procs, cell.late_rank, seed,
                                  2**31 + w)
            status, error = verdict(m.repetition(delays), f"warm-up {w + 1}")
            if status:
                break

    no_delay = cell.delay == "none" or cell.max_delay == 0
    zeros = np.zeros(procs)
    log = np.empty((64, procs, 6))
    delay_log = None if no_delay else np.empty((64, procs))
    estimates, errors = [], []
    rep = 0
    while not status:
        if imb:
            every = m.imb_batch(iterations)
        else:
            delays = zeros if no_delay else delay_vector(cell.delay, cell.max_delay, procs,
                                                         cell.late_rank, seed, rep)
            every = m.repetition(delays)
        if rep == len(log):
            log = np.concatenate([log, np.empty_like(log)])
            if delay_log is not None:
                delay_log = np.concatenate([delay_log, np.empty_like(delay_log)])
        log[rep] = every
        if delay_log is not None:
            delay_log[rep] = delays
        if m.pap is not None and m.arrival is not None:  # what the algorithm was told
            a_all = every[:, ARRIVAL] + every[:, OFFSET]
            estimates.append(m.arrival.tolist())
            errors.append((m.arrival - a_all).tolist())
        rep += 1
        if every[:, VERIFIED].min() < 1.0:  # one cheap test per repetition; details only on failure
            status, error = verdict(every, rep)
        if not status:
            if imb:  # IMB's t_avg / t_max / t_min over the ranks' mean time per call
                x = every[:, EXTRA]
                value = float(x.mean() if metric == "mean" else x.max() if metric == "max"
                              else x.min() if metric == "min" else np.nan)
            else:
                value = _metric_value(metric, every, m.common_clock, m.rows, m.scale)
            running.add(value)
            status = running.decide(float(every[:, IN_CELL].max()), budget)

    if m.pap is not None:
        _record_knowledge(m, errors)
    record = m.ctx.scratch.get("record")
    if imb:
        record = dict(record or {}, imb_iterations=iterations)
    if oversubscribed:
        record = dict(record or {}, oversubscribed=True)
    if m.rotation is not None:  # buffers: rotate: how many slots, and the cache they exceed
        record = dict(record or {}, rotation=m.rotation_record)
    if m.calls is not None:  # a workload cell: its calls, not one whole-buffer call
        record = dict(record or {}, **workload.record(cell.params, cell.dtype))
    elif m.body is not None:  # not an allreduce: what the body recorded (e.g. the pair level)
        record = dict(record or {}, **m.body.record)
    elif status in ("ok", "not-converged"):  # node layout + message counts: one untimed call

        record = record_counts(comm, cell, m.fn, m.send, m.recv, m.op, record)
    entry.update(sync="imb" if imb else m.sync,
                 window=m.window if m.sync == "window" and not imb else None, status=status,
                 error=error, converged=status == "ok", record=record)
    log = log[:rep]
    arrivals = log[:, :, ARRIVAL] + log[:, :, OFFSET]
    finishes = log[:, :, FINISH] + log[:, :, OFFSET]
    if imb:
        x = log[:, :, EXTRA]
        series = {"mean": x.mean(axis=1), "max": x.max(axis=1), "min": x.min(axis=1),
                  "span": np.full(rep, np.nan)}
    else:
        rows, scale = m.rows, m.scale
        e = (log[:, rows, FINISH] - log[:, rows, ARRIVAL]) * scale
        series = {"mean": e.mean(axis=1), "max": e.max(axis=1), "min": e.min(axis=1),
                  "span": (finishes[:, rows].max(axis=1) - arrivals[:, rows].min(axis=1)) * scale
                  if m.common_clock else np.full(rep, np.nan)}
    if status in ("ok", "not-converged"):
        # Shapiro-Wilk's p comes from the raw repetitions where the summary is built
        summaries = {k: stats.summarize(series[k], rule.confidence, normality=False)
                     for k in METRICS}
        entry.update(stats=summaries[metric], all_stats=summaries)
    else:
        entry["stats"] = {"n": rep}
    entry["finished"] = results.now()
    raw = None
    if rep:
        raw = {
            "cell_id": [cell.cell_id] * rep,
            "rep": list(range(rep)),
            **{f"{k}_elapsed": series[k].tolist() for k in METRICS},
            "epoch": [m.epoch] * rep,  # arrival and finish are seconds after this Unix time
            "arrival": arrivals.tolist(),  # IMB mode: each rank's sample start and end
            "finish": finishes.tolist(),
            "delay": (delay_log[:rep] if delay_log is not None
                      else np.zeros((rep, procs))).tolist(),
            # ranks that got the window's start time too late (per-call mode)
            "late_starts": ([0] * rep if imb else log[:, :, EXTRA].sum(axis=1).astype(int).tolist()),
        }
        if imb:
            raw["iterations"] = [iterations] * rep
        if estimates:  # PAP cells: the arrival times handed to the algorithm, minus the measured
            raw.update(arrival_estimate=estimates, estimate_error=errors)
    return entry, raw


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
