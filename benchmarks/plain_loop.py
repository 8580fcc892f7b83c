#!/usr/bin/env python3
"""The reference the harness's per-call time is held against: a plain mpi4py loop.

    mpiexec -n 2 python benchmarks/plain_loop.py SIZE REPS [--work] [--dtype float32]

Per repetition: two barriers, Wtime, ``comm.Allreduce(send, recv, SUM)``, Wtime. With
``--work`` it also does what the harness does around each call, untimed: fill the receive
buffer with a sentinel first, compare it with the expected result after, exchange six
doubles with one Allgather. MPI starts at thread level single, as the harness does by
default. Prints ``mean <seconds>``: the mean over repetitions of the mean over ranks.
``--floor`` instead prints the mean of an empty Wtime pair and of a count-0 Allreduce.
"""

from __future__ import annotations

import argparse

import mpi4py

mpi4py.rc.thread_level = "single"
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("size", type=int)
    ap.add_argument("reps", type=int)
    ap.add_argument("--work", action="store_true")
    ap.add_argument("--floor", action="store_true")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--aligned", action="store_true", help="page-aligned buffers")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, procs = comm.Get_rank(), comm.Get_size()
    n = a.size // np.dtype(a.dtype).itemsize
    send = ((np.arange(n) * 7 + rank * 3) % 9 - 4).astype(a.dtype)
    want = sum(((np.arange(n) * 7 + r * 3) % 9 - 4) for r in range(procs)).astype(a.dtype)
    recv = np.empty(n, a.dtype)
    if a.aligned:
        def aligned(x):
            raw = np.empty(x.nbytes + 4096, np.uint8)
            off = (-raw.ctypes.data) % 4096
            out = raw[off:off + x.nbytes].view(x.dtype)
            out[:] = x
            return out
        send, recv = aligned(send), aligned(recv)
    exch, every = np.zeros(6), np.zeros((procs, 6))
    wtime, barrier, allreduce = MPI.Wtime, comm.Barrier, comm.Allreduce
    if a.floor:
        empty = np.empty(0, a.dtype)
        t_pair, t_zero = [], []
        for i in range(a.reps + a.warmup):
            barrier()
            t0 = wtime()
            t1 = wtime()
            barrier()
            t2 = wtime()
            allreduce(empty, empty, MPI.SUM)
            t3 = wtime()
            if i >= a.warmup:
                t_pair.append(t1 - t0)
                t_zero.append(t3 - t2)
        pair = comm.allreduce(float(np.mean(t_pair))) / procs
        zero = comm.allreduce(float(np.mean(t_zero))) / procs
        if rank == 0:
            print(f"wtime_pair {pair!r}\ncount0 {zero!r}")
        return
    times = np.empty(a.reps)
    for i in range(a.reps + a.warmup):
        if a.work:
            recv.fill(-(2**30) + 7)
        barrier()
        barrier()
        t0 = wtime()
        allreduce(send, recv, MPI.SUM)
        t1 = wtime()
        if a.work:
            ok = np.array_equal(recv, want)
            exch[:] = (t0, t1, ok, 0, 0, 0)
            comm.Allgather(exch, every)
        if i >= a.warmup:
            times[i - a.warmup] = t1 - t0
    mean = comm.allreduce(float(times.mean())) / procs
    if rank == 0:
        print(f"mean {mean!r}")


if __name__ == "__main__":
    main()
