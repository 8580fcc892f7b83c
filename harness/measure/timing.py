"""What times: one cell's buffers, reference and clocks (``TimedCell``), set up once per cell;
``repetition`` runs one synchronised, timed, verified call and ``imb_batch`` one IMB sample
(calls back to back between one Wtime pair). Everything between a repetition's two clock
reads is here; ``bench.py`` decides how many repetitions to make and writes the results.
"""

from __future__ import annotations

import time

import numpy as np

from .. import verify
from ..algorithms import Context, resolve
from ..algorithms.native import native_allreduce
from ..cells import Cell
from ..delays import compute_phase, wait_until
from ..dnn import workload
from .arrival import Monitor, pap_phase
from ..memory import last_level_cache
from .buffers import Rotation, check

# a column of the exchange row: arrival, finish, verified, seconds in cell, clock offset,
# late start (per-call mode) or mean seconds per call (IMB mode)
ARRIVAL, FINISH, VERIFIED, IN_CELL, OFFSET, EXTRA = range(6)


def _mpi_op(MPI, name: str):
    return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[name]


class TimedCell:
    """Buffers, reference and clocks of one cell; ``repetition`` runs one synchronised, timed,
    verified call and returns every rank's (arrival, finish, verified, seconds in cell, clock
    offset, late start) after one Allgather."""

    MAX_WINDOW = 0.5

    def __init__(self, comm, cell: Cell, settings: dict, seed: int, algorithm=None,
                 clock=None):
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
        # buffers: rotate: each call on the next slot of a rotation larger than the cache
        self.rotation, self.turn, self.mpitype = None, 0, mpitype
        if cell.buffers == "rotate":
            check(cell.algorithm, cell.params, cell.buffers)
            llc, source = last_level_cache()
            self.rotation = Rotation(self.send, self.bad, llc)
            self.rotation_record = self.rotation.record(llc, source)
        self.wtime, self.MPI = MPI.Wtime, MPI
        self.exch = np.zeros(6)
        self.every = np.zeros((self.procs, 6))
        self.start_at = np.zeros(1)
        self.error = None
        # Wtime need not be comparable across ranks (Open MPI's counts from each process's
        # init), so arrivals and finishes are put on the launch's common clock (rank 0's
        # host clock, estimated on every rank across hosts: clocksync.py), counted from an
        # epoch rank 0 broadcasts; elapsed times use Wtime alone.
        self.now = clock.now if clock is not None else time.time
        self.synced = clock is not None and clock.synchronised
        self.epoch = comm.bcast(self.now(), root=0)
        self.offset = (self.now() - self.epoch) - self.wtime()
        hosts = comm.allgather(MPI.Get_processor_name())
        self.common_clock = (self.synced or bool(comm.Get_attr(MPI.WTIME_IS_GLOBAL))
                             or len(set(hosts)) == 1)
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
        return self.now() - self.epoch

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

    def rotate(self):
        """``buffers: rotate``: the receive buffer and (call, args) of the next slot, which
        ``repetition``/``imb_batch`` time instead of the cell's own."""
        send, recv = self.rotation.pair(self.turn)
        self.turn += 1
        if self.fn is native_allreduce:
            specs = ([self.MPI.buffer(send), self.cell.count, self.mpitype],
                     [self.MPI.buffer(recv), self.cell.count, self.mpitype])
            return recv, self.comm.Allreduce, (*specs, self.op)
        return recv, self.fn, (self.comm, send, recv, self.op, self.ctx)

    def repetition(self, delays) -> np.ndarray:
        """One synchronised, timed, verified call; every rank's exchange row after one
        Allgather (a view reused by the next repetition)."""
        comm, rank, recv, wtime = self.comm, self.rank, self.recv, self.wtime
        call, args = self.call, self.args
        wait = self.base + delays[rank]
        late_start = 0.0
        body = self.body
        if self.rotation is not None:  # its slot holds the sentinel since its last check
            recv, call, args = self.rotate()
        elif body is None:
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
            if self.rotation is not None:
                recv.fill(self.bad)  # for the slot's next turn, many calls from now
        except Exception as exc:  # e.g. MPICH refusing an inapplicable forced algorithm
            a = f = wtime()
            ok = -1.0
            self.error = f"{type(exc).__name__}: {exc}".strip()
        if self.synced:  # the synchronised clock drifts from Wtime: its offset now
            self.offset = self.clock() - wtime()
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
        rotation = self.rotation
        ok = 1.0
        last = iterations - 1
        try:
            if rotation is None:
                recv.fill(self.bad)
            else:  # the first and the last call's slots hold the sentinel
                rotation.refill(self.turn)
                rotation.refill(self.turn + last)
            barrier()
            barrier()
            begin = wtime()
            t = 0.0
            for i in range(iterations):
                if rotation is not None:  # the next slot, chosen outside the Wtime pair
                    recv, call, args = self.rotate()
                elif i == last and i:
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
