"""Local MPI launches taking turns on one machine.

``HARNESS_LAUNCH_LOCK`` names a file. Every harness process that names the same file runs its
local MPI launches one at a time: runs (``harness run``, ``harness exec``, the workflow's
measure, confirmation, verification and rerun launches), SGD executions and the launcher
checks of ``harness doctor``. Two campaigns, or a campaign and a ``harness run``, on one
workstation then never time their launches against each other; on two cores, two
oversubscribed launches side by side each took several times as long as one alone, since
ranks that wait for a message keep their core busy. Unset (the default), launches do not wait:
one workflow already runs one launch at a time (rule ``measure`` takes every core).

Inside a Slurm allocation (``SLURM_JOB_ID`` set) nothing waits: the job has its nodes, and a
wait would count against its time limit. The wait ends before a run's wall-time clock starts.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from contextlib import contextmanager

VARIABLE = "HARNESS_LAUNCH_LOCK"
_held = 0  # turns this process holds (a launch inside a launch's turn does not wait for itself)


@contextmanager
def launch_turn(what: str):
    """Hold this machine's turn for local launches (``HARNESS_LAUNCH_LOCK``) while the block
    runs; yields the seconds waited for it (0 when there is no turn to take)."""
    global _held
    path = os.environ.get(VARIABLE)
    if not path or os.environ.get("SLURM_JOB_ID") or _held:
        yield 0.0
        return
    start = time.monotonic()
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{what}: waiting for another launch on this machine to end ({VARIABLE}={path})",
                  file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        _held += 1
        try:
            yield time.monotonic() - start
        finally:
            _held -= 1
            fcntl.flock(fh, fcntl.LOCK_UN)
