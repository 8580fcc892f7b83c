"""Message counting: point-to-point messages and bytes of one allreduce call, per rank, split
into intra-node and inter-node by the cell's node layout (``harness.layout``).

``count_call(comm, fn, sendbuf, recvbuf, op, params, lay)`` runs one extra, untimed call of a
harness algorithm on a ``CountingComm``: a wrapper of the communicator that counts every
point-to-point send and receive (``Send``/``Ssend``/``Isend``/``Issend``/``Recv``/``Irecv``/
``Sendrecv``, …) by the peer's rank in the cell's communicator, and forwards everything else
to the real communicator. Communicators the algorithm makes from it (``Split``,
``Split_type``, ``Dup``, ``Create``, ``Create_group``) are wrapped too, with their ranks
translated to the cell's communicator, so SUARA2's row and column messages count as well.
Collective calls on a wrapped communicator (e.g. a native sub-allreduce) are not messages of
ours to count: they are counted as ``collectives``. The algorithm's ``prepare`` runs first, on
the wrapper and a fresh context, and is not counted. Then one allreduce over ranks gives the
maximum (and the sum) of every tally; the result is a flat dict of plain numbers:

- ``inter_msgs`` / ``intra_msgs``: the most messages one rank sends to ranks on other nodes /
  on its own node in one call, ``inter_bytes`` / ``intra_bytes`` the most bytes;
- ``inter_msgs_recv`` / ``intra_msgs_recv`` (and ``..._bytes_recv``): the same for receives;
- ``inter_msgs_total`` / ``intra_msgs_total``: messages sent by all ranks together;
- ``collectives``: the most collective calls one rank made on the algorithm's communicators.

Each maximum is taken on its own (the rank sending most messages need not send most bytes).
"""

from __future__ import annotations

import numpy as np

from ..algorithms import Context
from ..layout import resolve

# index of each tally in the per-rank vector
FIELDS = ("intra_msgs", "inter_msgs", "intra_bytes", "inter_bytes",
          "intra_msgs_recv", "inter_msgs_recv", "intra_bytes_recv", "inter_bytes_recv",
          "collectives")
_IX = {name: i for i, name in enumerate(FIELDS)}
TOTALS = ("intra_msgs", "inter_msgs")

_SENDS = ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend")
_RECVS = ("Recv", "Irecv")
_COLLECTIVES = ("Allreduce", "Reduce", "Bcast", "Barrier", "Allgather", "Allgatherv", "Gather",
                "Gatherv", "Scatter", "Scatterv", "Alltoall", "Alltoallv", "Reduce_scatter",
                "Reduce_scatter_block", "Scan", "Exscan", "Iallreduce", "Ireduce", "Ibcast",
                "Ibarrier", "Iallgather", "allreduce", "reduce", "bcast", "barrier", "allgather",
                "gather", "scatter", "alltoall")
_MAKERS = ("Split", "Split_type", "Dup", "Create", "Create_group")


def nbytes(buf) -> int:
    """Bytes of an mpi4py buffer argument: an array, a buffer, or ``[buf, count, type]`` /
    ``[buf, type]`` / ``[buf, (count, displ), type]`` specs."""
    if isinstance(buf, (list, tuple)):
        data = buf[0]
        if len(buf) >= 3:
            count, dtype = buf[1], buf[-1]
            if isinstance(count, (list, tuple)):
                count = count[0]
            return int(count) * int(dtype.Get_size())
        if len(buf) == 2 and hasattr(buf[1], "Get_size"):
            size = int(buf[1].Get_size())
            return (len(memoryview(data).cast("B")) // size) * size if size else 0
        return nbytes(data)
    if buf is None:
        return 0
    if hasattr(buf, "nbytes"):
        return int(buf.nbytes)
    return len(memoryview(buf).cast("B"))


class Tally:
    """Counts of one rank, in the order of ``FIELDS``."""

    def __init__(self, node_of, my_world: int):
        self.node_of, self.me = node_of, my_world
        self.v = np.zeros(len(FIELDS), dtype=np.int64)
        self.made: list = []  # communicators the algorithm created (freed after the call)

    def message(self, peer_world: int, size: int, sent: bool) -> None:
        inter = self.node_of[peer_world] != self.node_of[self.me]
        suffix = "" if sent else "_recv"
        where = "inter" if inter else "intra"
        self.v[_IX[f"{where}_msgs{suffix}"]] += 1
        self.v[_IX[f"{where}_bytes{suffix}"]] += size

    def reset(self) -> None:
        self.v[:] = 0


class CountingComm:
    """A communicator that counts the point-to-point messages passing through it (see the
    module doc); ``world_of[i]`` is the rank, in the cell's communicator, of its rank ``i``."""

    def __init__(self, comm, world_of, tally: Tally):
        self._comm, self._world_of, self._tally = comm, list(world_of), tally

    # -- point to point
    def _peer(self, rank):
        return self._world_of[rank] if rank is not None and rank >= 0 else None

    def _count(self, buf, rank, sent):
        peer = self._peer(rank)
        if peer is not None:
            self._tally.message(peer, nbytes(buf), sent)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None,
                 status=None):
        from mpi4py import MPI

        source = MPI.ANY_SOURCE if source is None else source
        recvtag = MPI.ANY_TAG if recvtag is None else recvtag
        st = status if status is not None else MPI.Status()
        out = self._comm.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, st)
        self._count(sendbuf, dest, True)
        self._count(recvbuf, st.Get_source(), False)
        return out

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=None, recvtag=None, status=None):
        from mpi4py import MPI

        source = MPI.ANY_SOURCE if source is None else source
        recvtag = MPI.ANY_TAG if recvtag is None else recvtag
        st = status if status is not None else MPI.Status()
        out = self._comm.Sendrecv_replace(buf, dest, sendtag, source, recvtag, st)
        self._count(buf, dest, True)
        self._count(buf, st.Get_source(), False)
        return out

    def Recv(self, buf, source=None, tag=None, status=None):
        from mpi4py import MPI

        source = MPI.ANY_SOURCE if source is None else source
        tag = MPI.ANY_TAG if tag is None else tag
        st = status if status is not None else MPI.Status()
        out = self._comm.Recv(buf, source, tag, st)
        self._count(buf, st.Get_source(), False)
        return out

    def Irecv(self, buf, source=None, tag=None):
        from mpi4py import MPI

        if source is None or source == MPI.ANY_SOURCE:
            raise NotImplementedError("counting: Irecv from MPI_ANY_SOURCE is not counted; "
                                      "name the source")
        self._count(buf, source, False)
        return self._comm.Irecv(buf, source, MPI.ANY_TAG if tag is None else tag)

    # -- communicators made from this one
    def _wrap(self, new):
        from mpi4py import MPI

        if new == MPI.COMM_NULL:
            return new
        me = self._world_of[self._comm.Get_rank()]
        self._tally.made.append(new)
        return CountingComm(new, new.allgather(me), self._tally)

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name in _SENDS:
            def send(buf, dest, *args, **kw):
                self._count(buf, dest, True)
                return attr(buf, dest, *args, **kw)
            return send
        if name in _MAKERS:
            def make(*args, **kw):
                return self._wrap(attr(*args, **kw))
            return make
        if name in _COLLECTIVES:
            def collective(*args, **kw):
                self._tally.v[_IX["collectives"]] += 1
                return attr(*args, **kw)
            return collective
        return attr


def count_call(comm, fn, sendbuf, recvbuf, op, params: dict, lay) -> dict:
    """One untimed call of ``fn`` on a counting wrapper of ``comm`` (collective). Returns the
    maxima and totals over ranks described in the module doc."""
    from mpi4py import MPI

    tally = Tally(lay.node_of, comm.Get_rank())
    wrapped = CountingComm(comm, range(comm.Get_size()), tally)
    ctx = Context(params=dict(params))
    out = np.empty_like(recvbuf)
    try:
        prepare = getattr(fn, "prepare", None)
        if prepare:
            prepare(wrapped, sendbuf, out, op, ctx)
        tally.reset()
        fn(wrapped, sendbuf, out, op, ctx)
        mine = tally.v.copy()
    finally:
        for c in tally.made:
            if c != MPI.COMM_NULL:
                c.Free()
    most = np.empty_like(mine)
    comm.Allreduce(mine, most, op=MPI.MAX)
    total = np.empty_like(mine)
    comm.Allreduce(mine, total, op=MPI.SUM)
    result = {name: int(most[i]) for i, name in enumerate(FIELDS)}
    result.update({f"{name}_total": int(total[_IX[name]]) for name in TOTALS})
    return result


def wants_counts(cell, fn) -> bool:
    """Count a cell's messages when it runs a harness algorithm (not ``native:*``) that does
    not opt out (``fn.countable = False``) and either names a node layout in its parameters or
    is node-aware by nature (``fn.node_aware``)."""
    if cell.algorithm.startswith("native:") or getattr(fn, "countable", True) is False:
        return False
    return "layout" in dict(cell.params) or bool(getattr(fn, "node_aware", False))


def record_counts(comm, cell, fn, sendbuf, recvbuf, op, record) -> dict | None:
    """The cell's record with its node layout and message counts added (collective; every
    rank calls it with the same cell). Cells that ``wants_counts`` refuses keep ``record``."""
    if not wants_counts(cell, fn):
        return record

    params = dict(cell.params)
    lay = resolve(comm, params)
    out = dict(record or {})
    for key, value in lay.describe().items():
        out.setdefault(key, value)
    out.update(count_call(comm, fn, sendbuf, recvbuf, op, params, lay))
    return out
