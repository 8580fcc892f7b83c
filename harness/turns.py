"""Local MPI launches taking turns on one machine.

``HARNESS_LAUNCH_LOCK`` names a file. Every harness process that names the same file runs its
local MPI launches one at a time: runs (``harness run``, ``harness exec``, the workflow's
measure, confirmation, verification and rerun launches), SGD executions and the launcher
checks of ``harness doctor``. Two campaigns, or a campaign and a ``harness run``, on one
workstation then never time their launches against each other; on two cores, two
oversubscribed launches side by side each took several times as long as one alone, since
ranks that wait for a message keep their core busy. Unset (the default), launches do not wait:
one workflow already runs one launch at a time (rule ``measure`` takes every core).

``HARNESS_LAUNCH_TRACE`` (a file) makes each turn taken append one line to it: the seconds
waited and held, what held it, and the pytest test that caused it (``PYTEST_CURRENT_TEST``,
inherited by every process a test starts). docs/testing.md reads it to find where the test
suite's launch time goes.

Inside a Slurm allocation (``SLURM_JOB_ID`` set) nothing waits: the job has its nodes, and a
wait would count against its time limit. ``HARNESS_LAUNCH_LOCK_IN_SLURM=1`` makes Slurm jobs
take turns too, for a Slurm whose nodes share one host (the two-node test cluster of
``.ci/slurm``: its jobs' ranks and the local launches beside them would otherwise spin on the
same cores). The wait ends before a run's wall-time clock starts.

``HARNESS_LAUNCH_NICE`` (an integer) is the nice value a turn runs at: a session started at a
lower priority (the test suite runs at +10, ``tests/conftest.py``) gives its launches the cores
before its own reports, Snakemake and Python start-ups. An oversubscribed launch beside three
busy processes took 80 s at equal priority and 7 s with the others at a higher nice value.
Lowering a nice value needs the privilege to (root, or ``ulimit -e``); without it the turn
runs at the process's own priority.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from contextlib import contextmanager

VARIABLE = "HARNESS_LAUNCH_LOCK"
IN_SLURM = "HARNESS_LAUNCH_LOCK_IN_SLURM"
TRACE = "HARNESS_LAUNCH_TRACE"
NICE = "HARNESS_LAUNCH_NICE"
_held = 0  # turns this process holds (a launch inside a launch's turn does not wait for itself)


@contextmanager
def launch_turn(what: str):
    """Hold this machine's turn for local launches (``HARNESS_LAUNCH_LOCK``) while the block
    runs; yields the seconds waited for it (0 when there is no turn to take)."""
    global _held
    path = os.environ.get(VARIABLE)
    in_slurm_job = bool(os.environ.get("SLURM_JOB_ID")) and os.environ.get(IN_SLURM) != "1"
    if not path or in_slurm_job or _held:
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
        got = time.monotonic()
        restore = _take_priority()
        try:
            yield got - start
        finally:
            if restore is not None:
                os.setpriority(os.PRIO_PROCESS, 0, restore)
            _held -= 1
            _trace(what, got - start, time.monotonic() - got)
            fcntl.flock(fh, fcntl.LOCK_UN)


def _take_priority() -> int | None:
    """This thread (and what it starts) at ``HARNESS_LAUNCH_NICE`` for the turn; returns the
    nice value to go back to, or None when nothing changed."""
    wanted = os.environ.get(NICE, "").strip()
    if not wanted:
        return None
    try:
        now, value = os.getpriority(os.PRIO_PROCESS, 0), int(wanted)
        if value >= now:
            return None  # a turn only ever runs ahead of the rest, never behind it
        os.setpriority(os.PRIO_PROCESS, 0, value)  # on Linux, the calling thread's
        return now
    except (ValueError, PermissionError):
        return None  # not a number, or no right to raise the priority: the process's own


def _trace(what: str, waited: float, held: float) -> None:
    path = os.environ.get(TRACE)
    if not path:
        return
    record = {"what": what, "waited": round(waited, 3), "held": round(held, 3),
              "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "pid": os.getpid()}
    with open(path, "a") as fh:  # one short line per write: appends do not interleave
        fh.write(json.dumps(record) + "\n")
