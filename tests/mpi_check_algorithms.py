"""Correctness check of every ``classic`` allreduce algorithm, run under mpiexec:

    mpiexec -n P python tests/mpi_check_algorithms.py [FAMILY [MAX_NODES MAX_PPN [shm]]]

Family ``pap`` (``... mpi_check_algorithms.py pap``): SLT and PRR, each under the arrival
times of every delay mode (none, one-late, rand-late, linear-skew and a reversed skew, max
10 ms) handed over as ``ctx.scratch["arrival"]``, PRR with tau measured and with tau = 1 ms
(so the skewed patterns give several pre-steps).

For every algorithm (segmented_ring also with small segment sizes, so that it really runs
several phases at these counts), dtype, op (sum, prod, max, min and a user-defined
commutative elementwise max) and count (0, 1, P-1, P+1, 7, 1000, 4099) it calls the
algorithm twice in a row with the same context (the second call reuses the scratch buffers;
one context per algorithm variant is shared by all dtypes and counts, so a changed count or
dtype must get fresh buffers), and compares both results with ``harness.verify.expected``.
Above P = 3 the dtypes, ops and counts are combined all-pairs rather than in full (matrix()).
Family ``node-aware`` (NAP, SMP) instead runs every emulated layout of 1..MAX_NODES nodes x
1..MAX_PPN processes per node that fits in P (one value per process; up to 8 processes also
counts 0, 7 and 1000 and a second call reusing the context: the schedule depends on the
layout only, the count changes no partner), then the real layout.

``CHECK_PROCS`` (for example ``1-7`` or ``2,5,9``) checks each of those P in this one launch,
on a communicator of the first P ranks, while the other ranks wait asleep (``idle_barrier``):
one launch of 13 ranks instead of 13 launches, whose start-up (an interpreter, numpy, mpi4py
and the harness imported by every rank) cost more than the checks at small P. Unset, P is the
launch's size.

Prints ``OK <checks> at P=<p,...>`` on rank 0, or exits non-zero with a message naming
algorithm/dtype/op/count/P.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import to_numpy_dtype

from harness import verify
from harness.algorithms import REGISTRY, Context
from harness.delays import DELAY_MODES, delay_vector

FAMILY = sys.argv[1] if len(sys.argv) > 1 else "classic"
DTYPES = ("float32", "float64", "int32", "int64")
OPS = ("sum", "prod", "max", "min", "user_max")
FULL_PRODUCT_UP_TO = 3  # P; above it, all pairs of dtype, op and count (matrix())
# extra parameter sets per algorithm (besides the defaults)
# (256 B: many phases at counts 1000 and 4099; 1030 B: 128.75 doubles, rounded up to 129 as
# Open MPI does, 257.5 floats rounded down)
VARIANTS = {"segmented_ring": [{"segment_size": 256}, {"segment_size": 1030}],
            # SUARA2 with every grid of P (added in main) and mixed sub-allreduces
            "suara2": [{"grid": "auto", "row": "rabenseifner", "col": "native"}],
            "prr": [{"tau": 0.001}],
            # shm: barriers instead of counters; 64 B pieces, so counts 7..4099 take many
            # steps and both slots of the window
            "shm": [{"sync": "barrier"}, {"chunk": 64}, {"chunk": 64, "sync": "barrier"}]}


# node-aware algorithms: intra-node steps by messages (default) and on the node's shared-memory
# window, also with 64 B pieces (many window steps per call)
INTRA_VARIANTS = ({}, {"intra": "shm"}, {"intra": "shm", "chunk": 64, "sync": "barrier"})


def _arrivals(name: str, size: int):
    """(label, arrival times) the algorithm is checked under: one pattern per delay mode for
    the ``pap`` family (they read ``ctx.scratch["arrival"]``), else just no arrival times."""
    if not getattr(REGISTRY[name].fn, "uses_arrival", False):
        return [("-", None)]
    out = [(mode, delay_vector(mode, 0.01, size, min(1, size - 1), 7, 0)) for mode in DELAY_MODES]
    out.append(("reverse-skew", delay_vector("linear-skew", 0.01, size, 0, 7, 0)[::-1].copy()))
    return out


def _user_max(inbuf, inoutbuf, datatype):
    """mpi4py 4 user function: buffer-like in/inout and the MPI datatype."""
    dt = to_numpy_dtype(datatype)
    a = np.frombuffer(inbuf, dtype=dt)
    b = np.frombuffer(inoutbuf, dtype=dt)
    np.maximum(a, b, out=b)


def node_aware(comm, ops) -> tuple[list, int]:
    """Family ``node-aware``: every emulated layout of n nodes x ppn processes that fits in the
    launch (n = 1..MAX_NODES, ppn = 1..MAX_PPN from argv[2:4]), each on a communicator of the
    first n*ppn ranks, then the real layout on every rank."""
    max_nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    max_ppn = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    # "shm" as the fourth argument: the intra-node steps also on the shared-memory window
    intras = INTRA_VARIANTS if sys.argv[4:5] == ["shm"] else ({},)
    names = sorted(n for n, a in REGISTRY.items() if a.family == FAMILY)
    failures, checks = [], 0
    for ppn in range(1, max_ppn + 1):
        for nodes in range(1, max_nodes + 1):
            procs = nodes * ppn
            if procs > comm.Get_size():
                continue
            idle_barrier(comm)
            sub = comm.Split(0 if comm.Get_rank() < procs else MPI.UNDEFINED, comm.Get_rank())
            if sub != MPI.COMM_NULL:
                # one value per process and a few; the long vector only on small layouts (it
                # changes no partner, only the time of the check)
                small = procs <= 8
                cases = [(n, {"layout": "emulated", "ppn": ppn, **intra})
                         for n in names for intra in intras]
                f, c = check(sub, cases, ops, (0, 1, 7, 1000) if small else (1,),
                             calls=(1, 2) if small else (1,))
                failures += f
                checks += c
                sub.Free()
    idle_barrier(comm)
    f, c = check(comm, [(n, {"layout": "real", **intra}) for n in names
                        for intra in intras], ops, (1, 7))
    return failures + f, checks + c


def idle_barrier(comm) -> None:
    """A barrier that sleeps while it waits: ranks outside the communicator being checked wait
    without spinning on the cores (two here) that the checked ranks need."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.002)


def procs_to_check(size: int) -> list[int]:
    """The P values of ``CHECK_PROCS`` (``1-7``, ``2,5,9``, or both: ``1-3,8``); the launch's
    size when unset. Each must fit in the launch."""
    spec = os.environ.get("CHECK_PROCS", "").strip()
    if not spec:
        return [size]
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    if not out or min(out) < 1 or max(out) > size:
        raise SystemExit(f"CHECK_PROCS={spec!r}: every P must be 1..{size} (the launch's size)")
    return out


def check_family(comm, ops) -> tuple[list, int]:
    """Every case of ``FAMILY`` on ``comm`` (its size is the P checked)."""
    size = comm.Get_size()
    if FAMILY == "node-aware":
        return node_aware(comm, ops)
    counts = sorted({0, 1, size - 1, size + 1, 7, 1000, 4099})
    names = sorted(n for n, a in REGISTRY.items() if a.family == FAMILY)
    cases = [(n, {}) for n in names] + [(n, p) for n in names for p in VARIANTS.get(n, [])]
    if "suara2" in names:
        grids = [f"{size // c}x{c}" for c in range(1, size + 1) if size % c == 0]
        cases += [("suara2", {"grid": g, "row": r, "col": c})
                  for g in grids for r, c in (("ring", "recursive_doubling"), ("native", "linear"),
                                              ("shm", "ring"))]
    if "suara_l" in names:  # every ordered 3-factorisation of P (1s included), mixed sub-allreduces
        trip = [(a, b, size // (a * b)) for a in range(1, size + 1) for b in range(1, size + 1)
                if size % (a * b) == 0]
        cases += [("suara_l", {"grid": "x".join(map(str, t)),
                               "subs_each": "ring,native,recursive_doubling"}) for t in trip]
        cases += [("suara_l", {"grid": "auto", "levels": 2}), ("suara_l", {"grid": "auto", "levels": 4})]
    if "three_step" in names:  # every grid of P (blocks of unequal size), a harness column allreduce
        cases += [("three_step", {"grid": f"{size // c}x{c}", "col": "native" if c % 2 else "ring"})
                  for c in range(1, size + 1) if size % c == 0]
    failures, checks = check(comm, cases, ops, counts)
    if FAMILY == "shm":
        f, c = late_arrivals(comm, cases)
        failures, checks = failures + f, checks + c
    return failures, checks


def main() -> int:
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if not any(a.family == FAMILY for a in REGISTRY.values()):
        raise SystemExit(f"no algorithm of family {FAMILY!r} registered")
    user_op = MPI.Op.Create(_user_max, commute=True)
    ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN, "user_max": user_op}
    sweep = procs_to_check(size)
    failures, checks = [], 0
    for procs in sweep:
        idle_barrier(world)
        sub = world.Split(0 if rank < procs else MPI.UNDEFINED, rank)
        if sub != MPI.COMM_NULL:
            f, c = check_family(sub, ops)
            failures, checks = failures + f, checks + c
            sub.Free()
    idle_barrier(world)
    user_op.Free()
    everyone = world.gather(failures, root=0)
    total = world.reduce(checks, op=MPI.SUM, root=0)
    if rank == 0:
        flat = [f for fs in everyone for f in fs]
        if flat:
            shown = "\n".join(flat[:20])
            print(f"FAILED {len(flat)} of {total} checks (P={','.join(map(str, sweep))}):\n"
                  f"{shown}", file=sys.stderr, flush=True)
            return 1
        print(f"OK {total} at P={','.join(map(str, sweep))}", flush=True)
    return 0


def late_arrivals(comm, cases, calls=12) -> tuple[list, int]:
    """Every case, ``calls`` calls in a row on 10,007 doubles, each rank arriving 0-30 ms late
    (a different draw per rank and call; no barrier between calls): ranks that run ahead by
    several calls must not overwrite what a late rank has yet to read. Then one call in place
    (send buffer = receive buffer)."""
    import time

    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(1000 + rank)
    count = 10_007
    failures, checks = [], 0
    for name, params in cases:
        fn, ctx = REGISTRY[name].fn, Context(params=dict(params))
        for call in range(calls):
            send = verify.contribution(rank + call, count, "float64", "sum")
            want = verify.expected(size, count, "float64", "sum") if call == 0 else sum(
                verify.contribution(r + call, count, "float64", "sum") for r in range(size))
            recv = verify.aligned_empty(count, "float64")
            time.sleep(float(rng.uniform(0, 0.03)))
            fn(comm, send, recv, MPI.SUM, ctx)
            checks += 1
            if not np.array_equal(recv, want):
                failures.append(f"rank {rank}: algorithm={name} params={params} late arrivals "
                                f"call {call}: wrong result at "
                                f"{np.count_nonzero(recv != want)} of {count} elements")
        # in place: the send buffer is the receive buffer (NAP and SMP call it so)
        buf = verify.contribution(rank, count, "float64", "sum")
        fn(comm, buf, buf, MPI.SUM, ctx)
        checks += 1
        if not np.array_equal(buf, verify.expected(size, count, "float64", "sum")):
            failures.append(f"rank {rank}: algorithm={name} params={params} in place: wrong result")
    return failures, checks


def check(comm, cases, ops, counts, calls=(1, 2)) -> tuple[list, int]:
    """Run every (algorithm, params) case on ``comm`` for every dtype, op and count, ``calls``
    times with the same context; returns (failure messages of this rank, checks made)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    failures, checks = [], 0
    for name, params in cases:
        fn = REGISTRY[name].fn
        for arrival_label, arrival in _arrivals(name, size):
            ctx = Context(params=dict(params))
            if arrival is not None:
                ctx.scratch["arrival"] = arrival
            for dtype, opname, count in matrix(counts, size):
                data_op = "max" if opname == "user_max" else opname
                send = verify.contribution(rank, count, dtype, data_op)
                keep = send.copy()
                want = verify.expected(size, count, dtype, data_op)
                recv = verify.aligned_empty(count, dtype)
                label = (f"algorithm={name} params={params} arrival={arrival_label} "
                         f"dtype={dtype} op={opname} count={count} P={size}")
                for call in calls:
                    recv.fill(verify.sentinel(dtype))
                    try:
                        fn(comm, send, recv, ops[opname], ctx)
                    except Exception as exc:  # noqa: BLE001  (abort: a hang elsewhere is worse)
                        print(f"rank {rank}: {label} call {call} raised "
                              f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                        comm.Abort(2)
                    checks += 1
                    if not np.array_equal(recv, want):
                        bad = np.flatnonzero(recv != want)
                        failures.append(
                            f"rank {rank}: {label} call {call}: wrong result at "
                            f"{bad.size} of {count} elements, first index {bad[0]}: "
                            f"got {recv[bad[0]]}, want {want[bad[0]]}")
                    if not np.array_equal(send, keep):
                        failures.append(f"rank {rank}: {label} call {call}: sendbuf modified")
    return failures, checks


def matrix(counts, size) -> list[tuple[str, str, int]]:
    """The (dtype, op, count) combinations a case is checked on. Up to P = 3 (and with fewer
    counts than dtypes) every combination; above, an all-pairs design: every dtype meets every
    op and every count, and every op every count (op i, count j get dtype (i + j) mod 4), a
    quarter of the full product. Oversubscribed launches of P = 4..13 on two cores spent
    minutes on the full product, which finds no fault that only a triple would show."""
    if size <= FULL_PRODUCT_UP_TO or len(counts) < len(DTYPES):
        return [(d, o, c) for d in DTYPES for o in OPS for c in counts]
    out = [(DTYPES[(i + j) % len(DTYPES)], op, count)
           for i, op in enumerate(OPS) for j, count in enumerate(counts)]
    pairs = {(a, b) for d, o, c in out for a, b in ((d, o), (d, c), (o, c))}
    assert len(pairs) == len(DTYPES) * len(OPS) + (len(DTYPES) + len(OPS)) * len(counts), out
    return out


if __name__ == "__main__":
    sys.exit(main())
