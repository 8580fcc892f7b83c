"""Family ``guidelines``: an allreduce built from the library's own other collectives, the
mock-ups of the self-consistent performance guidelines (Hunold's PGChecker; Träff, Gropp and
Thakur): a library's ``MPI_Allreduce`` should not be slower than

- ``reduce_bcast``: ``MPI_Reduce`` to rank 0, then ``MPI_Bcast`` from it;
- ``reduce_scatter_allgather``: ``MPI_Reduce_scatter`` (the block of each rank; a count not
  divisible by P gives the first count % P ranks one element more, as ``Reduce_scatter_block``
  would with padding) then ``MPI_Allgatherv`` in place;
- ``allreduce_halves``: two ``MPI_Allreduce`` calls on the two halves of the vector.

Measured beside AUTO, a mock-up that is faster with statistical support is a guideline
violation: a performance bug of the library's selection, since it could have called the
mock-up itself. Which algorithm each of the inner collectives runs is the library's choice,
as for AUTO (the launch environment forces nothing in these cells).
"""

from __future__ import annotations

import numpy as np

from .p2p import trivial_call
from .registry import register

FAMILY = "guidelines"
MOCK_UPS = ("reduce_bcast", "reduce_scatter_allgather", "allreduce_halves")


@register("reduce_bcast", family=FAMILY,
          description="guideline mock-up: the library's MPI_Reduce to rank 0, then MPI_Bcast")
def reduce_bcast(comm, sendbuf, recvbuf, op, ctx):
    if trivial_call(comm, sendbuf, recvbuf):
        return
    comm.Reduce(sendbuf, recvbuf, op, root=0)
    comm.Bcast(recvbuf, root=0)


def _blocks(ctx, recvbuf, size: int, comm=None):
    """Per-rank counts and displacements of a block distribution of ``recvbuf``'s elements,
    and the in-place marker and datatype of the Allgatherv (made once per buffer, count and
    P, outside the timed calls: mpi4py is imported here, not where the harness is)."""
    key = ("guidelines.blocks", recvbuf.__array_interface__["data"][0], recvbuf.size,
           recvbuf.dtype.str, size)
    got = ctx.scratch.get(key)
    if got is None:
        count = recvbuf.size
        counts = np.full(size, count // size, dtype=np.int64)
        counts[:count % size] += 1
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        counts, displs = [int(c) for c in counts], [int(d) for d in displs]
        sim = getattr(comm, "MPI", None)  # a simulated communicator's constants (harness/simulate)
        if sim is not None:
            in_place, datatype = sim.IN_PLACE, recvbuf.dtype
        else:
            from mpi4py import MPI
            from mpi4py.util.dtlib import from_numpy_dtype

            in_place, datatype = MPI.IN_PLACE, from_numpy_dtype(recvbuf.dtype)
        got = ctx.scratch[key] = (counts, displs, in_place, [recvbuf, counts, displs, datatype])
    return got


@register("reduce_scatter_allgather", family=FAMILY,
          description="guideline mock-up: the library's MPI_Reduce_scatter, then "
                      "MPI_Allgatherv in place")
def reduce_scatter_allgather(comm, sendbuf, recvbuf, op, ctx):
    if trivial_call(comm, sendbuf, recvbuf):
        return
    rank = comm.Get_rank()
    counts, displs, in_place, gather = _blocks(ctx, recvbuf, comm.Get_size(), comm)
    comm.Reduce_scatter(sendbuf, recvbuf[displs[rank]:displs[rank] + counts[rank]], counts, op)
    comm.Allgatherv(in_place, gather)


@register("allreduce_halves", family=FAMILY,
          description="guideline mock-up: two MPI_Allreduce calls, one per half of the vector")
def allreduce_halves(comm, sendbuf, recvbuf, op, ctx):
    if trivial_call(comm, sendbuf, recvbuf):
        return
    half = recvbuf.size // 2
    comm.Allreduce(sendbuf[:half], recvbuf[:half], op)
    comm.Allreduce(sendbuf[half:], recvbuf[half:], op)
