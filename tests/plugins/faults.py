"""Test-only fault injection (never part of the harness), loaded with ``plugins:``.

``test:die`` is a correct allreduce whose rank ``victim`` (default 1) kills itself with
SIGKILL once, at the stage named by its ``die`` parameter:

- ``prepare``: in the algorithm's set-up, before any call;
- ``warmup``: in the first call (a warm-up repetition);
- ``measure``: in call ``at`` (default 4: after one warm-up, a measured repetition);
- ``count``: in the untimed call that counts messages, after the measurement.

It dies only the first time: a marker file under ``$HARNESS_RESULTS`` records that it did, so
a retry of the run measures the cell. ``test:slow`` is a correct allreduce that sleeps
``sleep`` seconds per call (a run that stays in one stage long enough to be interrupted);
with ``gate`` (a file name under ``$HARNESS_RESULTS``) each call also waits while that file
exists, so a test holds the run in its measurement for as long as it needs, however fast the
machine.
"""

import os
import signal
import time
from pathlib import Path

from harness.algorithms import register


def _marker(ctx, comm):
    tag = f"{ctx.params.get('die')}-{ctx.params.get('tag', '')}-{comm.Get_size()}"
    return Path(os.environ["HARNESS_RESULTS"]) / f".died-{tag}"


def _maybe_die(comm, ctx, stage):
    if ctx.params.get("die") != stage or comm.Get_rank() != int(ctx.params.get("victim", 1)):
        return
    marker = _marker(ctx, comm)
    if marker.exists():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)


def _counting(comm) -> bool:
    return type(comm).__name__ == "CountingComm"


@register("test:die", family="test")
def die(comm, sendbuf, recvbuf, op, ctx):
    if _counting(comm):
        _maybe_die(comm, ctx, "count")
    else:
        calls = ctx.scratch["calls"] = ctx.scratch.get("calls", 0) + 1
        if calls == 1:
            _maybe_die(comm, ctx, "warmup")
        if calls == int(ctx.params.get("at", 4)):
            _maybe_die(comm, ctx, "measure")
    comm.Allreduce(sendbuf, recvbuf, op)


def _prepare(comm, sendbuf, recvbuf, op, ctx):
    if not _counting(comm):
        _maybe_die(comm, ctx, "prepare")


die.prepare = _prepare
die.node_aware = True  # so the bench makes its counting call


@register("test:slow", family="test")
def slow(comm, sendbuf, recvbuf, op, ctx):
    time.sleep(float(ctx.params.get("sleep", 0.2)))
    gate = ctx.params.get("gate")
    while gate and (Path(os.environ["HARNESS_RESULTS"]) / gate).exists():
        time.sleep(0.05)
    comm.Allreduce(sendbuf, recvbuf, op)
