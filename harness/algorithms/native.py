"""The library's own ``MPI_Allreduce``. Which of its algorithms runs is chosen by the launch
environment (catalogue in ``harness/data/libraries.yaml``), not here."""

from __future__ import annotations


def native_allreduce(comm, sendbuf, recvbuf, op, ctx):
    comm.Allreduce(ctx.sendspec or sendbuf, ctx.recvspec or recvbuf, op)
