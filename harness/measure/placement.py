"""Where each rank ran while a cell was measured (``CellPlacement``), for telling apart the
modes a cell's launches can land in.

Two launches of one cell can differ by more than either's interval: three launches of MPICH
AUTO at P = 2, 1 MiB, minutes apart, gave 836, 279 and 785 us. IMB-MPI1 on MPICH's own
libmpi lands in the same two modes, bound to cores or not (``benchmarks/launch_modes.py``), so
the harness does not try to steer its launches into one; what a launch cannot choose but can
see is recorded per cell, on every rank:

- ``cpu_start`` / ``cpu_end``: the CPU the rank was on when the cell began and ended
  (``/proc/self/stat``, field 39); two ranks on one CPU share its time;
- ``affinity``: the CPUs the rank may run on (``os.sched_getaffinity``), as ranges; a launcher
  that binds ranks shows one CPU each;
- ``involuntary_switches`` / ``voluntary_switches``: how often the kernel took the CPU from the
  rank during the cell (another process wanted it) and how often the rank gave it up (it
  slept or blocked), from ``getrusage``.

``shared_cpu`` (on rank 0's record) is true when two ranks of one host were on one CPU as
the cell began, or as it ended. The run document keeps the record under each cell's
``placement``; ``harness.results.launches`` flags the launches whose mean stands apart from
their replicas' (``odd_launches``), and the placement of those launches says which way they
differ.
"""

from __future__ import annotations

import os
import resource


def current_cpu() -> int | None:
    """The CPU this process last ran on (None where /proc does not say)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[36])  # field 39 of stat(5), counted after the command's ")"
    except (OSError, IndexError, ValueError):
        return None


def ranges(cpus) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out, run = [], []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [cpu]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _switches() -> tuple[int, int]:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_nivcsw, use.ru_nvcsw


def _affinity() -> str | None:
    try:
        return ranges(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


class CellPlacement:
    """Started on every rank as a cell begins; ``finish(comm, host)`` (collective) gives rank 0
    the record of every rank, None elsewhere."""

    def __init__(self):
        self.cpu = current_cpu()
        self.switches = _switches()

    def finish(self, comm, host: str) -> dict | None:
        involuntary, voluntary = _switches()
        mine = (host, self.cpu, current_cpu(), _affinity(), involuntary - self.switches[0],
                voluntary - self.switches[1])
        every = comm.gather(mine, root=0)
        if every is None:
            return None
        hosts, start, end, affinity, inv, vol = (list(x) for x in zip(*every))
        shared = any(len(on) != len(set(on)) for on in (
            [(h, c) for h, c in zip(hosts, cpus) if c is not None] for cpus in (start, end)))
        return {"cpu_start": start, "cpu_end": end, "affinity": affinity,
                "involuntary_switches": inv, "voluntary_switches": vol, "shared_cpu": shared}
