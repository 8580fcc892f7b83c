"""Family ``p2p-bench``: point-to-point and local microbenchmarks measured by the bench loop.

These are not allreduces. They give the network and compute parameters of the cost models:

- ``pingpong``: ``pairs`` = k concurrent pairs (default 1). Pair i is ranks (i, i + P/2), so
  with block placement over two nodes every pair spans the nodes; other ranks idle. One
  repetition: the low rank of each pair sends ``size`` bytes, the high rank receives them and
  sends them back. The repetition's value is the round trip / 2 measured on the low ranks
  (the one-way time, as IMB PingPong reports), averaged over the pairs (Castelló et al.,
  Fig. 4; Bienz et al., Fig. 5).
- ``reduce_local``: each rank computes ``recv = send op recv`` locally with
  ``MPI.Op.Reduce_local`` on ``size`` bytes of the cell's dtype (Castelló et al.'s gamma: a
  STREAM-like sum of two long vectors). No communication in the timed region.

An algorithm declares its own timed body and verification with a ``bench`` attribute:
``fn.bench(comm, cell, ctx, send, recv)`` returns a ``Body`` (``call``/``args`` timed,
``before()`` untimed before the barriers, ``check()`` untimed after the timer, ``rows``
the ranks whose times make the repetition's value, ``scale`` applied to them, ``record``).
``harness.measure.bench`` uses it in place of the allreduce call and the allreduce reference; the
stopping rule, warm-up, budget, journal and provenance are the same.

Test-only knob: the parameter ``corrupt: 1`` makes the high rank of every pair flip one byte
of the echo it sends back (and restore its own copy after the send), so the low rank's
verification must report the cell ``wrong``.
"""

from __future__ import annotations

import os

import numpy as np

from .. import verify
from ..cells import PROBES
from ..layout import parse
from ..layout import resolve as layout_of
from .registry import register

FAMILY = "p2p-bench"
NAMES = PROBES  # the kind "probe" of harness/cells.py
LEVELS = ("socket", "node", "network")
TAG = 7
PINGPONG_PARAMS = ("pairs", "layout", "ppn", "corrupt")


def is_bench(algorithm) -> bool:
    """True for an algorithm of this family (its rows are not allreduce times)."""
    return str(algorithm) in NAMES


def without(df):
    """The summary without its ``pingpong`` / ``reduce_local`` rows (they time no allreduce)."""
    if "algorithm" not in df.columns or not len(df):
        return df
    return df[~df.algorithm.astype(str).isin(NAMES)]


def pairs_of(params) -> int:
    """The ``pairs`` parameter as an int >= 1 (default 1); ValueError naming it."""
    value = dict(params).get("pairs", 1)
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(value) < 1:
        raise ValueError(f"parameter pairs: expected an integer >= 1 (concurrent ping-pong "
                         f"pairs), got {value!r}")
    return int(value)


def check(algorithm: str, params, procs: int | None = None, timing: str = "percall",
          delay: str = "none") -> None:
    """ValueError naming the parameter (or setting) a ``p2p-bench`` cell cannot take; the
    P-dependent checks only when ``procs`` is given. A no-op for every other algorithm."""
    if not is_bench(algorithm):
        return
    p = dict(params)
    if timing != "percall":
        raise ValueError(f"timing: {algorithm} is timed per repetition ('percall'), got "
                         f"{timing!r}")
    if delay != "none":
        raise ValueError(f"delay: {algorithm} takes no delay mode, got {delay!r}")
    if algorithm == "reduce_local":
        if p:
            raise ValueError(f"parameter {sorted(p)[0]}: reduce_local takes no parameters "
                             f"(it runs on every rank, without communication), got "
                             f"{sorted(p)}")
        return
    unknown = sorted(set(p) - set(PINGPONG_PARAMS))
    if unknown:
        raise ValueError(f"parameter {unknown[0]}: pingpong takes {', '.join(PINGPONG_PARAMS)}, "
                         f"got {unknown[0]}={p[unknown[0]]!r}")
    k = pairs_of(p)
    if "layout" in p or "ppn" in p:
        parse(p)
    if procs is None:
        return
    if procs < 2:
        raise ValueError(f"procs: pingpong needs P >= 2 (one pair of ranks), got P={procs}")
    if 2 * k > procs:
        raise ValueError(f"parameter pairs: {k} pairs need P >= {2 * k} ranks, got P={procs}")


class Body:
    """What the bench times for one cell of this family (see the module docstring)."""

    call = None
    args: tuple = ()
    rows = slice(None)
    scale = 1.0
    record: dict = {}

    def before(self) -> None:
        pass

    def check(self) -> bool:
        return True


def _idle() -> None:
    pass


# ------------------------------------------------------------------------------ pingpong

def _table(size: int) -> np.ndarray:
    """Bytes 1..255 with period 255: rank r's message in repetition t is the slice starting
    at (7 r + 13 t) mod 255, so it depends on both and never holds a zero byte."""
    j = np.arange(size + 255, dtype=np.int64)
    return ((j * 31) % 255 + 1).astype(np.uint8)


def _offset(rank: int, rep: int) -> int:
    return (7 * rank + 13 * rep) % 255


def _package(cpu: int):
    try:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def placement() -> dict:
    """This process's cores and socket: ``bound`` when its affinity is narrower than the
    machine, ``package`` the physical package of those cores when they share one (else None)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return {"cpus": None, "bound": False, "package": None}
    bound = len(cpus) < (os.cpu_count() or len(cpus))
    packages = {_package(c) for c in cpus}
    package = packages.pop() if bound and len(packages) == 1 else None
    return {"cpus": cpus, "bound": bound, "package": package}


def pair_level(layout, where: list, lo: int, hi: int) -> str:
    """``network`` across nodes (real or emulated), else ``socket`` or ``node`` from the
    packages of the two ranks' cores; ``node`` when either rank is not bound to one socket."""
    if not layout.same_node(lo, hi):
        return "network"
    a, b = where[lo]["package"], where[hi]["package"]
    if a is None or b is None:
        return "node"
    return "socket" if a == b else "node"


class PingPong(Body):
    def __init__(self, comm, cell, ctx, send, recv):
        from mpi4py import MPI

        procs, rank = comm.Get_size(), comm.Get_rank()
        check(cell.algorithm, cell.params, procs, cell.timing, cell.delay)
        k = pairs_of(cell.params)
        half = procs // 2
        lo_ranks = list(range(k))
        layout = layout_of(comm, {key: v for key, v in dict(cell.params).items()
                                  if key in ("layout", "ppn")})
        where = comm.allgather(placement())
        levels = [pair_level(layout, where, i, i + half) for i in lo_ranks]
        bound = all(where[r]["bound"] for i in lo_ranks for r in (i, i + half))
        self.record = {"level": levels[0] if len(set(levels)) == 1 else "mixed",
                       "pairs": k, "bound": bound,
                       "cpus": [[where[i]["cpus"], where[i + half]["cpus"]] for i in lo_ranks]
                       if bound else None,
                       **({"levels": levels} if len(set(levels)) > 1 else {}),
                       **layout.describe()}
        self.rows, self.scale = np.arange(k), 0.5
        n = cell.size
        self.n, self.rep, self.rank = n, 0, rank
        self.table = _table(n)
        self.send = np.empty(n, dtype=np.uint8)
        self.recv = np.empty(n, dtype=np.uint8)
        sendspec = [MPI.buffer(self.send), n, MPI.BYTE]
        recvspec = [MPI.buffer(self.recv), n, MPI.BYTE]
        corrupt = bool(int(dict(cell.params).get("corrupt", 0) or 0))
        Send, Recv = comm.Send, comm.Recv
        if rank < k:
            self.role, self.peer = "low", rank + half

            def ping(s=sendspec, r=recvspec, peer=self.peer):
                Send(s, peer, TAG)
                Recv(r, peer, TAG)

            self.call = ping
        elif half <= rank < half + k:
            self.role, self.peer = "high", rank - half
            if corrupt:
                buf, mid = self.recv, n // 2

                def pong(r=recvspec, peer=self.peer):
                    Recv(r, peer, TAG)
                    buf[mid] ^= 0xFF  # the echo differs in one byte ...
                    Send(r, peer, TAG)
                    buf[mid] ^= 0xFF  # ... this rank's copy does not
            else:
                def pong(r=recvspec, peer=self.peer):
                    Recv(r, peer, TAG)
                    Send(r, peer, TAG)

            self.call = pong
        else:
            self.role, self.peer, self.call = "idle", None, _idle
        self.want = None

    def before(self) -> None:
        """The repetition's message (depends on the sender's rank and the repetition) and a
        receive buffer of zeros, which no message holds."""
        n, t = self.n, self.rep
        self.rep += 1
        if self.role == "low":
            s = _offset(self.rank, t)
            np.copyto(self.send, self.table[s:s + n])
            self.recv.fill(0)
        elif self.role == "high":
            s = _offset(self.peer, t)
            self.want = self.table[s:s + n]
            self.recv.fill(0)

    def check(self) -> bool:
        if self.role == "low":
            return bool(np.array_equal(self.recv, self.send))
        if self.role == "high":
            return bool(np.array_equal(self.recv, self.want))
        return True


def _pingpong_bench(comm, cell, ctx, send, recv):
    return PingPong(comm, cell, ctx, send, recv)


@register("pingpong", family=FAMILY,
          description="ping-pong of `size` bytes between ranks (i, i+P/2) of `pairs` concurrent "
                      "pairs; one-way time = round trip / 2 (Castelló Fig. 4, Bienz Fig. 5)")
def pingpong(comm, sendbuf, recvbuf, op, ctx):
    """Not an allreduce: measured only through its ``bench`` body."""
    raise TypeError("pingpong is a point-to-point benchmark, not an allreduce; the bench "
                    "measures it through pingpong.bench")


pingpong.bench = _pingpong_bench


# --------------------------------------------------------------------------- reduce_local

def _reduce_local_bench(comm, cell, ctx, send, recv):
    """``recv = send op recv`` on this rank: ``recv`` is reset to a second operand (the next
    rank's contribution) before each repetition; the result is compared with numpy's."""
    from mpi4py import MPI

    check(cell.algorithm, cell.params, comm.Get_size(), cell.timing, cell.delay)
    rank = comm.Get_rank()
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[cell.op]
    op = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[cell.op]
    body = Body()
    acc0 = verify.contribution(rank + 1, cell.count, cell.dtype, cell.op)
    want = ufunc(send, acc0)
    body.record = {"op": cell.op, "dtype": cell.dtype, "bytes": cell.size,
                   "how": "MPI.Op.Reduce_local"}
    body.call, body.args = op.Reduce_local, (ctx.sendspec, ctx.recvspec)
    body.before = lambda: np.copyto(recv, acc0)
    body.check = lambda: bool(np.array_equal(recv, want))
    return body


@register("reduce_local", family=FAMILY,
          description="local reduction recv = send op recv of `size` bytes on every rank "
                      "(MPI.Op.Reduce_local; gamma, Castelló et al.)")
def reduce_local(comm, sendbuf, recvbuf, op, ctx):
    """Not an allreduce: measured only through its ``bench`` body."""
    raise TypeError("reduce_local is a local reduction benchmark, not an allreduce; the bench "
                    "measures it through reduce_local.bench")


reduce_local.bench = _reduce_local_bench
