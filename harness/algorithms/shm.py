"""Shared-memory allreduce for ranks on one node (family ``shm``), on MPI-3 shared-memory
windows (``MPI.Win.Allocate_shared``) viewed as NumPy arrays.

**Data path.** The message is cut into steps of P pieces; in a step, piece j is reduced by
rank j. Per step, rank r

1. *copies in* its own data of every other rank's piece into its window's input slot;
2. *reduces* its piece: its own data (straight from ``sendbuf``) with the other ranks' copies
   of that piece (straight from their windows), written into its window's output slot;
3. *copies out* every rank's output slot into ``recvbuf``.

Reduce-scatter (1-2) and allgather (3) move each byte once through the window. Pieces are
``chunk`` bytes (parameter, default ``DEFAULT_CHUNK``), small enough that a step's slots stay
in the cache: the copy a rank writes in step 1 is read from cache by the rank that reduces it,
and the result from cache by the ranks that copy it out, so memory sees about one read of
``sendbuf`` and one write of ``recvbuf`` per rank. The slots are double-buffered (step g uses
slot g mod 2) and a rank copies in step g+1 before it copies out step g: copy-in, reduction
and copy-out of neighbouring steps overlap across ranks.

**Synchronisation** (parameter ``sync``):

- ``flags`` (default): every rank owns four step counters in its window (its input slot is
  written, its input slots have been read, its output slot is written, the others' output
  slots have been read), each on its own cache line. A rank waits only for the counters that
  guard the slot it is about to read or overwrite, so ranks drift apart by up to one step
  and no rank waits for all. ``Win.Sync`` (a memory fence, ``MPI_Win_sync`` in the window's
  ``Lock_all`` epoch) orders the data before the counter that publishes it and after the
  counter that guards it. The counters keep counting across calls: a call never needs a
  closing barrier.
- ``barrier``: the same steps with ``MPI_Barrier`` on the communicator after the copy-in and
  after the reduction (two per step) instead of counters.

``docs/shm.md`` has the measurements behind the default (``benchmarks/shm_vs_native.py``).

**Waiting** never starves the rank it waits for: a wait spins ``SPIN`` reads of the counter,
then calls ``os.sched_yield`` up to ``YIELD`` times, then sleeps 50 us between reads. With
more ranks on the node than cores (oversubscription) it neither spins nor yields: the waiting
rank sleeps at once, giving its core to the rank it waits for. A yield hands the core to any
runnable process, and the yielding rank gets it back only at the next scheduler tick: beside
three busy processes, Intel MPI's P = 3 check of this algorithm took 27 s with yields first
and 7.5 s sleeping at once (6.8 s alone).

**Reductions.** ``sum``, ``prod``, ``max`` and ``min`` on the predefined MPI ops run as the
NumPy ufuncs with three operands (no extra copy); any other op, user-defined ones included,
through ``op.Reduce_local`` after a copy. Each piece is reduced by one rank in a fixed order
(own data first, then the other ranks' in rank order), so every rank gets the same bits.

**Windows** are allocated once per (ranks of the communicator, chunk) and kept for the life of
the process, in the algorithm's ``prepare`` (never timed): a window's size depends on P and
the chunk only, not on the message, so every cell of a run shares it. A communicator whose
ranks are on more than one node is an error naming the node count: run ``shm`` on a node
communicator (``intra=shm`` of ``smp`` and ``nap``, ``row=shm`` / ``col=shm`` of SUARA2).

Also exported for the node-aware algorithms: ``node_allreduce(comm, send, recv, op, params)``
and ``node_bcast(comm, buf, root, params)``.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..units import parse_size
from .registry import register

FAMILY = "shm"

DEFAULT_CHUNK = 256 * 1024  # bytes of one rank's piece per step
DEFAULT_SYNC = "flags"
SYNCS = ("flags", "barrier")
SPIN, YIELD, SLEEP = 50_000, 200, 50e-6
LINE = 64  # one counter per cache line
IN, USED, OUT, READ = 0, 1, 2, 3  # the four counters of a rank
HEADER = 4096  # counters, then the slots page-aligned

_WINDOWS: dict = {}


_UFUNCS: dict = {}


def _ufunc(op):
    """The NumPy ufunc of a predefined op (sum, prod, max, min), else None."""
    key = op.py2f()
    if key not in _UFUNCS:
        from mpi4py import MPI

        pairs = ((MPI.SUM, np.add), (MPI.PROD, np.multiply), (MPI.MAX, np.maximum),
                 (MPI.MIN, np.minimum))
        _UFUNCS[key] = next((u for o, u in pairs if op == o), None)
    return _UFUNCS[key]


def parse_params(params: dict) -> tuple[int, str]:
    """(chunk bytes, sync) from an algorithm's parameters, checked."""
    raw = params.get("chunk", DEFAULT_CHUNK)
    try:
        chunk = parse_size(raw) if isinstance(raw, str) else int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"shm: chunk must be a size such as 256KiB, got {raw!r}") from None
    if not LINE <= chunk <= 1 << 30:
        raise ValueError(f"shm: chunk must be between 64B and 1GiB, got {raw!r}")
    sync = str(params.get("sync", DEFAULT_SYNC))
    if sync not in SYNCS:
        raise ValueError(f"shm: sync must be one of {', '.join(SYNCS)}, got {sync!r}")
    return chunk - chunk % LINE, sync


class Node:
    """One shared window over the ranks of a node communicator: per rank a header of four
    counters and two input slots of P pieces and two output slots of one piece."""

    def __init__(self, comm, chunk: int):
        from mpi4py import MPI

        self.size, self.rank, self.chunk = comm.Get_size(), comm.Get_rank(), chunk
        shared = comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        nodes = comm.allreduce(1 if shared.Get_rank() == 0 else 0)
        same = shared.Get_size() == self.size
        shared.Free()
        if nodes != 1 or not same:
            raise ValueError(f"shm: the communicator's {self.size} ranks are on {nodes} nodes; "
                             "shm needs ranks that share memory (use it on a node "
                             "communicator: intra=shm of smp or nap)")
        P = self.size
        self.in_bytes = P * chunk
        nbytes = HEADER + 2 * self.in_bytes + 2 * chunk
        self.win = MPI.Win.Allocate_shared(nbytes, 1, comm=comm)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.mem = []
        for q in range(P):
            buf, _ = self.win.Shared_query(q)
            self.mem.append(np.frombuffer(buf, dtype=np.uint8, count=nbytes))
        self.flags = [m[:HEADER].view(np.int64) for m in self.mem]
        stride = LINE // 8
        self.flags[self.rank][:] = 0
        self.at = [i * stride for i in range(4)]
        self.step = 0  # the next step's number, the same on every rank
        # more ranks than cores: a waiting rank sleeps at once (its core runs the rank it
        # waits for); else it spins, then yields, the fastest ways to see a counter change
        fits = P <= (os.cpu_count() or 1)
        self.spin, self.yields = (SPIN, YIELD) if fits else (0, 0)
        comm.Barrier()
        self.sync = self.win.Sync

    # -- slots
    def in_slot(self, q: int, s: int, dtype) -> np.ndarray:
        lo = HEADER + s * self.in_bytes
        return self.mem[q][lo:lo + self.in_bytes].view(dtype)

    def out_slot(self, q: int, s: int, dtype) -> np.ndarray:
        lo = HEADER + 2 * self.in_bytes + s * self.chunk
        return self.mem[q][lo:lo + self.chunk].view(dtype)

    # -- counters
    def publish(self, which: int, value: int) -> None:
        self.sync()  # the data written before is visible before the counter
        self.flags[self.rank][self.at[which]] = value

    def publish_all(self, value: int) -> None:
        self.sync()
        f = self.flags[self.rank]
        for i in self.at:
            f[i] = value

    def wait(self, which: int, value: int, ranks) -> None:
        """Until counter ``which`` of every rank in ``ranks`` is at least ``value``."""
        i = self.at[which]
        for q in ranks:
            f = self.flags[q]
            if f[i] >= value:
                continue
            n, spin = 0, self.spin
            while f[i] < value:
                n += 1
                if n > spin:
                    if n > spin + self.yields:
                        time.sleep(SLEEP)
                    else:
                        os.sched_yield()
        self.sync()  # reads of the guarded data come after the counter's


def node(comm, chunk: int) -> Node:
    """The window of (the communicator's ranks, chunk), made on first use (collective)."""
    from mpi4py import MPI

    group = comm.Get_group()
    world = group.Translate_ranks(list(range(comm.Get_size())), MPI.COMM_WORLD.Get_group())
    group.Free()
    key = (tuple(world), chunk)
    win = _WINDOWS.get(key)
    if win is None:
        win = _WINDOWS[key] = Node(comm, chunk)
    return win


def _plan(count: int, procs: int, itemsize: int, chunk: int):
    """(steps, piece length in elements): pieces of at most ``chunk`` bytes, balanced so that
    the last step is not a sliver."""
    per = max(1, chunk // itemsize)
    steps = -(-count // (procs * per))
    return steps, -(-count // (steps * procs))


def _reduce(ufunc, op, first, others, out) -> None:
    """out = first op others[0] op ... (in that order)."""
    if not others:
        np.copyto(out, first)
        return
    if ufunc is not None:
        ufunc(first, others[0], out=out)
        for x in others[1:]:
            ufunc(out, x, out=out)
        return
    np.copyto(out, first)
    for x in others:
        op.Reduce_local(x, out)


def _call(nd: Node, recvbuf, op):
    """What both variants need: count, P, rank, dtype, (steps, piece length), ufunc, others."""
    count, P, r = recvbuf.size, nd.size, nd.rank
    dtype = recvbuf.dtype
    return (count, P, r, dtype, _plan(count, P, dtype.itemsize, nd.chunk), _ufunc(op),
            [q for q in range(P) if q != r])


def allreduce_flags(nd: Node, comm, sendbuf, recvbuf, op) -> None:
    count, P, r, dtype, (steps, per), ufunc, others = _call(nd, recvbuf, op)
    g0 = nd.step
    nd.step += steps

    def bounds(k, j):
        lo = min(count, (k * P + j) * per)
        return lo, min(count, lo + per)

    def copy_in(k):
        g = g0 + k
        s = g & 1
        nd.wait(USED, g - 1, others)  # step g-2's copies in this slot are consumed
        slot = nd.in_slot(r, s, dtype)
        for j in others:
            lo, hi = bounds(k, j)
            if hi > lo:
                np.copyto(slot[j * per:j * per + hi - lo], sendbuf[lo:hi])
        nd.publish(IN, g + 1)

    copy_in(0)
    for k in range(steps):
        g = g0 + k
        s = g & 1
        lo, hi = bounds(k, r)
        n = hi - lo
        nd.wait(READ, g - 1, others)  # my output slot of step g-2 has been copied out
        nd.wait(IN, g + 1, others)
        out = nd.out_slot(r, s, dtype)[:n]
        _reduce(ufunc, op, sendbuf[lo:hi],
                [nd.in_slot(q, s, dtype)[r * per:r * per + n] for q in others], out)
        nd.sync()
        f = nd.flags[r]
        f[nd.at[USED]] = g + 1
        f[nd.at[OUT]] = g + 1
        if k + 1 < steps:
            copy_in(k + 1)
        nd.wait(OUT, g + 1, others)
        for q in range(P):
            qlo, qhi = bounds(k, q)
            if qhi > qlo:
                np.copyto(recvbuf[qlo:qhi], nd.out_slot(q, s, dtype)[:qhi - qlo])
        nd.publish(READ, g + 1)


def allreduce_barrier(nd: Node, comm, sendbuf, recvbuf, op) -> None:
    count, P, r, dtype, (steps, per), ufunc, others = _call(nd, recvbuf, op)
    barrier = comm.Barrier
    # the first step's input slot was last read in step g-2, maybe by a flags call or a
    # broadcast that no barrier closed; later steps follow this call's barriers
    nd.wait(READ, nd.step - 1, others)
    for k in range(steps):
        s = (nd.step + k) & 1
        base = k * P * per
        slot = nd.in_slot(r, s, dtype)
        for j in others:
            lo, hi = min(count, base + j * per), min(count, base + (j + 1) * per)
            if hi > lo:
                np.copyto(slot[j * per:j * per + hi - lo], sendbuf[lo:hi])
        barrier()
        lo, hi = min(count, base + r * per), min(count, base + (r + 1) * per)
        n = hi - lo
        _reduce(ufunc, op, sendbuf[lo:hi],
                [nd.in_slot(q, s, dtype)[r * per:r * per + n] for q in others],
                nd.out_slot(r, s, dtype)[:n])
        barrier()
        for q in range(P):
            qlo, qhi = min(count, base + q * per), min(count, base + (q + 1) * per)
            if qhi > qlo:
                np.copyto(recvbuf[qlo:qhi], nd.out_slot(q, s, dtype)[:qhi - qlo])
    # slots alternate: step k+2 overwrites what step k's copy-out read only after two
    # barriers that follow that copy-out; the counters stay in step for a later flags call
    nd.step += steps
    nd.publish_all(nd.step)


def node_bcast(nd: Node, buf, root: int) -> None:
    """``buf`` of rank ``root`` to every rank of the window, through root's input slots."""
    count, P, r = buf.size, nd.size, nd.rank
    if count == 0 or P == 1:
        return
    per = max(1, nd.in_bytes // buf.dtype.itemsize)
    steps = -(-count // per)
    others = [q for q in range(P) if q != r]
    for k in range(steps):
        g = nd.step
        nd.step += 1
        s = g & 1
        lo, hi = k * per, min(count, (k + 1) * per)
        if r == root:
            nd.wait(READ, g - 1, others)
            np.copyto(nd.in_slot(r, s, buf.dtype)[:hi - lo], buf[lo:hi])
            nd.publish(IN, g + 1)
        else:
            nd.wait(IN, g + 1, [root])
            np.copyto(buf[lo:hi], nd.in_slot(root, s, buf.dtype)[:hi - lo])
        nd.publish_all(g + 1)


def _simulated(comm) -> bool:
    """A simulated communicator (``harness/simulate``): it has no shared-memory windows."""
    return getattr(comm, "MPI", None) is not None


def prepare(comm, sendbuf, recvbuf, op, ctx):
    """The node's window (collective, once per ranks and chunk) and the call to make."""
    if _simulated(comm):
        raise NotImplementedError("shm: shared-memory windows (MPI.Win.Allocate_shared, Win.Sync) "
                                  "are not simulated; the simulated communicator has no shm")
    chunk, sync = parse_params(ctx.params)
    key = ("shm", comm.py2f(), chunk, sync)
    plan = ctx.scratch.get(key)
    if plan is None:
        nd = node(comm, chunk) if comm.Get_size() > 1 else None
        plan = ctx.scratch[key] = (nd, allreduce_flags if sync == "flags" else allreduce_barrier)
        ctx.scratch["record"] = {"chunk": chunk, "sync": sync}
    return plan


@register("shm", family=FAMILY,
          description="shared-memory window allreduce on one node: pipelined reduce-scatter "
                      "+ allgather (params chunk, sync=flags|barrier)")
def shm(comm, sendbuf, recvbuf, op, ctx):
    """Shared-memory allreduce; see the module docstring."""
    if recvbuf.size == 0:
        return
    nd, run = prepare(comm, sendbuf, recvbuf, op, ctx)
    if nd is None:
        np.copyto(recvbuf, sendbuf)
        return
    run(nd, comm, sendbuf, recvbuf, op)


shm.prepare = prepare


def node_allreduce(comm, sendbuf, recvbuf, op, params: dict) -> None:
    """The shm allreduce on ``comm`` with ``params`` (chunk, sync); for other families. On a
    simulated communicator (no windows): its simulated ``Allreduce`` (harness/simulate)."""
    if recvbuf.size == 0:
        return
    if _simulated(comm):
        comm.Allreduce(sendbuf, recvbuf, op)
        return
    if comm.Get_size() == 1:
        np.copyto(recvbuf, sendbuf)
        return
    chunk, sync = parse_params(params)
    run = allreduce_flags if sync == "flags" else allreduce_barrier
    run(node(comm, chunk), comm, sendbuf, recvbuf, op)


def bcast(comm, buf, root: int, params: dict) -> None:
    """The shm broadcast on ``comm``; for other families. On a simulated communicator: its
    simulated ``Bcast``."""
    if _simulated(comm):
        comm.Bcast(buf, root)
        return
    if comm.Get_size() > 1:
        node_bcast(node(comm, parse_params(params)[0]), buf, root)


def window(comm, params: dict):
    """Allocate (collective over ``comm``, once) the window ``node_allreduce`` and ``bcast``
    will use with ``params``; for other families' ``prepare`` (none on a simulated one)."""
    if comm.Get_size() > 1 and not _simulated(comm):
        node(comm, parse_params(params)[0])
