"""The measurement loop: the only place that times. Run under MPI as
``python -m harness.measure.bench <run spec.json>``.

Per cell: build buffers and the expected result, run the warm-up, then repeat
{two barriers; compute phase with the cell's delays; time the call; verify} until the
stopping rule (``harness.stats``) says stop. After each repetition the ranks exchange
(arrival, finish, verified, elapsed-in-cell) with one Allgather, outside the timed region,
so every rank takes the same decision on the same data. Rank 0 writes the raw repetitions
and the run document after every cell, atomically: a run that dies keeps what it finished.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .. import __version__, fileio, results, stats, verify
from ..algorithms import Context, load_plugin, resolve
from ..algorithms.native import native_allreduce
from ..cells import THREAD_LEVELS, Cell
from ..delays import compute_phase, delay_vector, wait_until
from ..dnn import workload
from ..libraries import get_library
from .arrival import Monitor, pap_phase
from .counting import record_counts

ENV_PREFIXES = ("OMPI_", "MPIR_CVAR_", "I_MPI_", "SLURM_", "MPI4PY_", "PMI_", "HYDRA_", "HARNESS_")
METRICS = ("mean", "max", "min", "span")


def _mpi_op(MPI, name: str):
    return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[name]


class _Cell:
    """Buffers, reference and clocks of one cell; ``repetition`` runs one synchronised, timed,
    verified call and returns every rank's (arrival, finish, verified, seconds in cell, clock
    offset, late start) after one Allgather."""

    MAX_WINDOW = 0.5

    def __init__(self, comm, cell: Cell, settings: dict, seed: int, algorithm=None):
        from mpi4py import MPI

        self.comm, self.cell, self.seed = comm, cell, seed
        self.rank, self.procs = comm.Get_rank(), comm.Get_size()
        self.base = float(settings.get("base_compute", 0.0))
        sync = settings.get("sync", "auto")
        self.sync = ("barrier" if cell.delay == "none" else "window") if sync == "auto" else sync
        self.window = float(settings.get("window", 0.001))
        self.fn = algorithm or resolve(cell.algorithm)
        self.op = _mpi_op(MPI, cell.op)
        self.send = verify.contribution(self.rank, cell.count, cell.dtype, cell.op)
        self.recv = verify.aligned_empty(cell.count, cell.dtype)
        self.want = verify.expected(self.procs, cell.count, cell.dtype, cell.op)
        self.bad = verify.sentinel(cell.dtype)
        mpitype = {"float32": MPI.FLOAT, "float64": MPI.DOUBLE, "int32": MPI.INT32_T,
                   "int64": MPI.INT64_T}[cell.dtype]
        self.ctx = Context(params=dict(cell.params),
                           sendspec=[MPI.buffer(self.send), cell.count, mpitype],
                           recvspec=[MPI.buffer(self.recv), cell.count, mpitype])
        # a workload cell replays one training iteration's calls, each on its slice
        self.calls = (self._workload_calls(MPI, mpitype) if workload.is_workload(cell.params)
                      else None)
        # an algorithm with its own timed body and verification (ping-pong, local reduction:
        # harness/algorithms/p2p_bench.py); its times count on body.rows, times body.scale
        bench = getattr(self.fn, "bench", None)
        self.body = bench(comm, cell, self.ctx, self.send, self.recv) if bench else None
        self.rows, self.scale = ((self.body.rows, self.body.scale) if self.body
                                 else (slice(None), 1.0))
        prepare = getattr(self.fn, "prepare", None)
        if prepare and self.calls is None and self.body is None:  # set-up an algorithm
            prepare(comm, self.send, self.recv, self.op, self.ctx)  # makes once, untimed
        self.wtime = MPI.Wtime
        self.exch = np.zeros(6)
        self.every = np.zeros((self.procs, 6))
        self.start_at = np.zeros(1)
        self.error = None
        # Wtime need not be comparable across ranks (Open MPI's counts from each process's
        # init), so arrivals and finishes are put on the host's real-time clock, counted from
        # an epoch rank 0 broadcasts; elapsed times use Wtime alone.
        self.epoch = comm.bcast(time.time(), root=0)
        self.offset = (time.time() - self.epoch) - self.wtime()
        hosts = comm.allgather(MPI.Get_processor_name())
        self.common_clock = bool(comm.Get_attr(MPI.WTIME_IS_GLOBAL)) or len(set(hosts)) == 1
        # the PAP benchmark's compute phase and arrival knowledge (harness.measure.arrival); None for
        # every other cell, which is then measured exactly as without it
        self.pap = pap_phase(self.ctx.params, cell.max_delay, self.base,
                             bool(getattr(self.fn, "uses_arrival", False)), cell.algorithm)
        self.monitor, self.arrival = None, None
        if self.pap is not None:
            self.base = self.pap.base
            if self.pap.knowledge == "online":
                self.monitor = Monitor(comm, self.clock)
        self.call, self.args = self.timed_call()
        self.t0 = self.wtime()

    def clock(self) -> float:
        return time.time() - self.epoch

    def close(self) -> None:
        """End the cell's arrival monitor, if any (collective)."""
        if self.monitor is not None:
            self.monitor.close()

    def _pap_compute(self, delays, wait) -> float:
        """The PAP compute phase after the barriers: compute ``wait`` seconds from a common
        start (window) or from now (barrier), calling edge() at its fraction; then hand the
        algorithm the arrival times (``ctx.scratch["arrival"]``; ``self.arrival`` keeps them
        on the common clock for the record). Returns 1.0
        if this rank got the window's start time too late (already past its edge)."""
        pap, monitor = self.pap, self.monitor
        if self.sync == "window":
            if self.rank == 0:
                self.start_at[0] = self.clock() + self.window
            self.comm.Bcast(self.start_at, root=0)
            begin = float(self.start_at[0])
        else:
            begin = self.clock()
        if monitor is not None:
            monitor.begin(begin)
        on_time = wait_until(begin + pap.edge * wait, self.clock)
        if monitor is not None:
            monitor.edge(pap.edge)
        wait_until(begin + wait, self.clock)
        given = None
        if pap.knowledge == "oracle":
            # the algorithm gets a vector that is bit-identical on every rank; the record
            # puts it on the clock of the measured arrivals
            given = self.base + np.asarray(delays, dtype=float)
            self.arrival = begin + given
        elif monitor is not None:
            given = self.arrival = monitor.estimates()  # the same Allgather result everywhere
        else:
            self.arrival = None
        if given is None:
            self.ctx.scratch.pop("arrival", None)
        else:
            self.ctx.scratch["arrival"] = given
        return 0.0 if on_time or self.sync != "window" else 1.0

    def _workload_calls(self, MPI, mpitype) -> list:
        """A workload cell's iteration (``harness.dnn.workload``): per allreduce call, the
        call and its arguments on the call's slice of the buffers, built once; a harness
        algorithm gets a context (and its untimed ``prepare``) per call."""
        calls = []
        prepare = getattr(self.fn, "prepare", None)
        for s in workload.slices(self.cell.params, self.cell.dtype):
            send, recv, n = self.send[s], self.recv[s], s.stop - s.start
            specs = ([MPI.buffer(send), n, mpitype], [MPI.buffer(recv), n, mpitype])
            if self.fn is native_allreduce:
                calls.append((self.comm.Allreduce, (*specs, self.op)))
                continue
            ctx = Context(params=dict(self.cell.params), sendspec=specs[0], recvspec=specs[1])
            if prepare:
                prepare(self.comm, send, recv, self.op, ctx)
            calls.append((self.fn, (self.comm, send, recv, self.op, ctx)))
        return calls

    def _iteration(self) -> None:
        for call, args in self.calls:
            call(*args)

    def timed_call(self):
        """``(call, args)``: what the timer brackets. The library's ``MPI_Allreduce`` is
        called as a bound method on prebuilt buffer specs (one Python frame less than the
        algorithm wrapper); any other algorithm as ``fn(comm, send, recv, op, ctx)``; a
        workload cell's iteration as its calls back to back."""
        if self.calls is not None:
            return self._iteration, ()
        if self.body is not None:
            return self.body.call, self.body.args
        if self.fn is native_allreduce:
            return self.comm.Allreduce, (self.ctx.sendspec, self.ctx.recvspec, self.op)
        return self.fn, (self.comm, self.send, self.recv, self.op, self.ctx)

    def repetition(self, delays) -> np.ndarray:
        """One synchronised, timed, verified call; every rank's exchange row after one
        Allgather (a view reused by the next repetition)."""
        comm, rank, recv, wtime = self.comm, self.rank, self.recv, self.wtime
        call, args = self.call, self.args
        wait = self.base + delays[rank]
        late_start = 0.0
        body = self.body
        if body is None:
            recv.fill(self.bad)
        else:
            body.before()
        comm.Barrier()
        comm.Barrier()
        if self.pap is not None:
            late_start = self._pap_compute(delays, wait)
        elif self.sync == "window":
            if rank == 0:
                self.start_at[0] = self.clock() + self.window
            comm.Bcast(self.start_at, root=0)
            late_start = 0.0 if wait_until(self.start_at[0] + wait, self.clock) else 1.0
        elif wait > 0:
            compute_phase(wait)
        try:
            a = wtime()
            call(*args)
            f = wtime()
            ok = 1.0 if (np.array_equal(recv, self.want) if body is None else body.check()) else 0.0
        except Exception as exc:  # e.g. MPICH refusing an inapplicable forced algorithm
            a = f = wtime()
            ok = -1.0
            self.error = f"{type(exc).__name__}: {exc}".strip()
        exch = self.exch
        exch[0], exch[1], exch[2], exch[3], exch[4], exch[5] = (
            a, f, ok, f - self.t0, self.offset, late_start)
        comm.Allgather(exch, self.every)
        if self.sync == "window" and self.every[:, 5].any():  # someone started late: widen
            self.window = min(2 * self.window, self.MAX_WINDOW)
        return self.every

    def imb_batch(self, iterations: int) -> np.ndarray:
        """IMB-MPI1's Allreduce kernel with its default ``-sync 1``: two barriers, then per
        iteration Wtime, the call, Wtime, one barrier, on the same buffers every time. The
        first and the last call are verified (the receive buffer holds the sentinel before
        each), outside the Wtime pairs. Returns every rank's exchange row, with this rank's
        mean time per call in place of the finish time."""
        comm, recv, wtime, barrier = self.comm, self.recv, self.wtime, self.comm.Barrier
        call, args = self.call, self.args
        ok = 1.0
        last = iterations - 1
        try:
            recv.fill(self.bad)
            barrier()
            barrier()
            begin = wtime()
            t = 0.0
            for i in range(iterations):
                if i == last and i:
                    recv.fill(self.bad)
                t0 = wtime()
                call(*args)
                t += wtime() - t0
                if (i == 0 or i == last) and not np.array_equal(recv, self.want):
                    ok = 0.0
                barrier()
            end = wtime()
        except Exception as exc:
            begin = end = wtime()
            t, ok = 0.0, -1.0
            self.error = f"{type(exc).__name__}: {exc}".strip()
        exch = self.exch
        exch[0], exch[1], exch[2], exch[3], exch[4], exch[5] = (
            begin, end, ok, end - self.t0, self.offset, t / iterations)
        comm.Allgather(exch, self.every)
        return self.every


# a column of the exchange row: arrival, finish, verified, seconds in cell, clock offset,
# late start (per-call mode) or mean seconds per call (IMB mode)
_A, _F, _OK, _T, _OFF, _X = range(6)


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
        return scale * float((every[:, _F] + every[:, _OFF]).max()
                             - (every[:, _A] + every[:, _OFF]).min())
    e = (every[:, _F] - every[:, _A]) * scale
    return float(e.mean() if metric == "mean" else e.max() if metric == "max" else e.min())


def _oversubscribed(comm) -> bool:
    """More ranks on some node than it has cores (collective; the same answer everywhere)."""
    from mpi4py import MPI

    nodes = comm.allgather((os.environ.get("SLURMD_NODENAME") or MPI.Get_processor_name(),
                            os.cpu_count() or 1))
    count: dict = {}
    for node, cores in nodes:
        count[node] = count.get(node, 0) + 1
    return any(count[node] > cores for node, cores in nodes)


def measure_cell(comm, cell: Cell, settings: dict, seed: int, algorithm=None,
                 oversubscribed: bool = False):
    """Measure one cell on ``comm``. Returns (entry for the run document, raw columns or None).

    ``entry`` holds the status, the error, the statistics of the chosen metric and of every
    metric. A wrong or failed call ends the cell at once and is never reported as a time.
    Between repetitions the bench does O(1) work (``stats.Running``) and keeps the exchange
    rows in a preallocated log; the per-repetition series are built once, at the end.
    """
    rule = stats.StoppingRule(
        confidence=settings["confidence"], precision=settings["precision"],
        min_reps=settings["min_reps"], max_reps=settings["max_reps"],
        time_budget=settings["time_budget"])
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
    m = _Cell(comm, cell, settings, seed, algorithm)
    procs = m.procs
    if m.body is not None and imb:
        raise ValueError(f"timing: {cell.algorithm} is timed per repetition, not 'imb'")

    def verdict(every, rep):
        if (every[:, _OK] < 0).any():
            return "failed", m.error or "an algorithm call raised on another rank"
        if (every[:, _OK] == 0).any():
            ranks = [int(r) for r in np.flatnonzero(every[:, _OK] == 0)]
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
            a_all = every[:, _A] + every[:, _OFF]
            estimates.append(m.arrival.tolist())
            errors.append((m.arrival - a_all).tolist())
        rep += 1
        if every[:, _OK].min() < 1.0:  # one cheap test per repetition; details only on failure
            status, error = verdict(every, rep)
        if not status:
            if imb:  # IMB's t_avg / t_max / t_min over the ranks' mean time per call
                x = every[:, _X]
                value = float(x.mean() if metric == "mean" else x.max() if metric == "max"
                              else x.min() if metric == "min" else np.nan)
            else:
                value = _metric_value(metric, every, m.common_clock, m.rows, m.scale)
            running.add(value)
            status = running.decide(float(every[:, _T].max()), budget)

    if m.pap is not None:
        _record_knowledge(m, errors)
    record = m.ctx.scratch.get("record")
    if imb:
        record = dict(record or {}, imb_iterations=iterations)
    if oversubscribed:
        record = dict(record or {}, oversubscribed=True)
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
    arrivals = log[:, :, _A] + log[:, :, _OFF]
    finishes = log[:, :, _F] + log[:, :, _OFF]
    if imb:
        x = log[:, :, _X]
        series = {"mean": x.mean(axis=1), "max": x.max(axis=1), "min": x.min(axis=1),
                  "span": np.full(rep, np.nan)}
    else:
        rows, scale = m.rows, m.scale
        e = (log[:, rows, _F] - log[:, rows, _A]) * scale
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
            "late_starts": ([0] * rep if imb else log[:, :, _X].sum(axis=1).astype(int).tolist()),
        }
        if imb:
            raw["iterations"] = [iterations] * rep
        if estimates:  # PAP cells: the arrival times handed to the algorithm, minus the measured
            raw.update(arrival_estimate=estimates, estimate_error=errors)
    return entry, raw


def _record_knowledge(m: _Cell, errors: list) -> None:
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


def launch_provenance(comm, spec: dict) -> dict:
    import mpi4py
    from mpi4py import MPI

    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    # Slurm nodes can share a host name (several slurmd on one machine), so the node each
    # rank ran on is taken from Slurm when there is one
    node_names = comm.gather(os.environ.get("SLURMD_NODENAME") or MPI.Get_processor_name(), root=0)
    # the cores of each rank's node, to tell oversubscribed runs (more ranks than cores)
    cores = comm.gather(os.cpu_count(), root=0)
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
        "nodes": node_names,
        "thread_level": THREAD_LEVELS[[MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED,
                                       MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE]
                                      .index(MPI.Query_thread())],
        "cores": cores,
        "wtick": MPI.Wtick(),
        "wtime_is_global": bool(comm.Get_attr(MPI.WTIME_IS_GLOBAL)),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "jobscript": script,
        "jobscript_sha256": script_hash,
        "git_commit": spec.get("git_commit"),
        "config_hash": spec.get("config_hash"),
    }


def _write_raw(path: Path, tables: list) -> None:
    import pyarrow as pa

    fileio.write_parquet(path, pa.concat_tables(tables, promote_options="default"))


def _resume(spec: dict, rank: int):
    """The run document and raw rows of an earlier attempt of this run with the same settings,
    from its journal (``progress/<run>.json``): cells that failed or timed out are retried."""
    progress, raw_path = Path(spec["outputs"]["progress"]), Path(spec["outputs"]["raw"])
    if rank != 0 or not progress.is_file():
        return None, []
    try:
        doc = fileio.read_json(progress)
    except ValueError as exc:
        print(f"harness.measure.bench: {progress}: unreadable ({type(exc).__name__}); the run is "
              f"measured from its start", file=sys.stderr, flush=True)
        return None, []
    if not isinstance(doc, dict) or doc.get("run_id") != spec["run_id"] or doc.get("settings") != spec["settings"]:
        return None, []
    doc["cells"] = [c for c in doc["cells"] if c["status"] not in ("failed", "timeout")]
    done = [c["cell_id"] for c in doc["cells"]]
    raw = []
    if raw_path.is_file() and done:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(raw_path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            # the repetitions of the finished cells are lost: they are measured again
            print(f"harness.measure.bench: {raw_path}: unreadable ({type(exc).__name__}); its "
                  f"{len(done)} measured cell(s) are measured again", file=sys.stderr, flush=True)
            doc["cells"] = []
            return doc, []
        raw = [table.filter(pc.is_in(table["cell_id"], value_set=pa.array(done)))]
    return doc, raw


def init_mpi(thread_level: str):
    """Initialise MPI at ``thread_level`` (single, funneled, serialized, multiple): mpi4py
    would ask for MULTIPLE, which changes some libraries' costs and algorithm rankings.
    Returns the MPI module; exits 3 when the library provides less than asked."""
    import mpi4py

    mpi4py.rc.thread_level = thread_level
    from mpi4py import MPI

    levels = [MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE]
    wanted = levels[THREAD_LEVELS.index(thread_level)]
    if MPI.Query_thread() < wanted:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"harness.measure.bench: asked for thread level {thread_level}, the library provides "
                  f"{THREAD_LEVELS[levels.index(MPI.Query_thread())]}", file=sys.stderr)
        MPI.COMM_WORLD.Abort(3)
    return MPI


def run(spec_path: str) -> int:
    spec = fileio.read_json(spec_path)
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
    doc, raw_parts = _resume(spec, rank)
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
    crowded = _oversubscribed(comm)
    if rank == 0 and done:
        print(f"resuming run {spec['run_id']}: {len(done)} cell(s) already measured", flush=True)
    for _, cell_dict in todo:
        cell = Cell.from_dict(cell_dict)
        # seeded by the cell, not its place in the run: a replay with `harness run` draws
        # the same delays as the campaign did
        seed = int(spec.get("seed", 0)) + int(cell.cell_id[1:9], 16)
        try:
            entry, raw = measure_cell(comm, cell, settings, seed, oversubscribed=crowded)
        except Exception as exc:
            if rank == 0:
                traceback.print_exc()
            entry, raw = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "status": "failed",
                          "error": f"{type(exc).__name__}: {exc}", "stats": {},
                          "converged": False, "finished": results.now()}, None
        if rank == 0:
            doc["cells"].append(entry)
            if raw:
                raw_parts.append(fileio.arrow_table(raw))
                _write_raw(raw_path, raw_parts)
            fileio.write_json(progress, doc)
            st = entry.get("stats") or {}
            mean = st.get("mean")
            print(f"[{len(doc['cells'])}/{len(spec['cells'])}] {cell.library} {cell.algorithm} "
                  f"P={cell.procs} {cell.size}B {cell.dtype} {cell.op} {cell.delay}: "
                  f"{entry['status']} n={st.get('n')}"
                  + (f" mean={mean * 1e6:.2f}us" if mean else ""), flush=True)
    if rank == 0:
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
    return run(argv[0])


if __name__ == "__main__":
    sys.exit(main())
