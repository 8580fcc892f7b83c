"""Test-only algorithms that misbehave, loaded with ``--plugin`` (never part of the harness)."""

import os
import sys
import time

from harness.algorithms import register


@register("test:wrong", family="test")
def wrong(comm, sendbuf, recvbuf, op, ctx):
    """Correct allreduce, then one element off by one on the last rank."""
    comm.Allreduce(sendbuf, recvbuf, op)
    if comm.Get_rank() == comm.Get_size() - 1 and recvbuf.size:
        recvbuf[recvbuf.size // 2] += 1


@register("test:noop", family="test")
def noop(comm, sendbuf, recvbuf, op, ctx):
    """Does nothing: the receive buffer keeps the sentinel."""


@register("test:crash", family="test")
def crash(comm, sendbuf, recvbuf, op, ctx):
    """Kills the process group the first time it is called on rank 0."""
    if comm.Get_rank() == 0:
        print("test:crash: rank 0 leaves with status 17", file=sys.stderr, flush=True)
        os._exit(17)
    comm.Allreduce(sendbuf, recvbuf, op)


@register("test:hang", family="test")
def hang(comm, sendbuf, recvbuf, op, ctx):
    """Never returns."""
    while True:
        time.sleep(1)
