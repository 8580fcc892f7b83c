"""Memory a cell needs on this machine, checked before a local launch (``harness run``).

Each rank of a cell holds ``BUFFERS_PER_RANK`` buffers of the message size for the whole
measurement (``harness.measure.timing.TimedCell``: the send buffer, the receive buffer and the expected
result it is verified against), so a cell of P ranks on one machine needs at least
``BUFFERS_PER_RANK * size * P`` bytes; the library's own scratch space comes on top.
"""

from __future__ import annotations

import os

from .units import format_size

BUFFERS_PER_RANK = 3  # send, receive, expected result (harness/measure/timing.py, TimedCell.__init__)


def cell_bytes(size: int, procs: int) -> int:
    """The least memory, in bytes, the buffers of a cell of ``procs`` ranks take."""
    return BUFFERS_PER_RANK * size * procs


def available_bytes() -> tuple[int, str]:
    """(bytes of memory available to new processes, where that number comes from):
    ``MemAvailable`` of /proc/meminfo, else the free physical pages (os.sysconf)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
    except (OSError, ValueError, IndexError):
        pass
    return (os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
            "free physical pages (sysconf)")


def human(nbytes: float) -> str:
    """``3 * 2**30`` -> ``"3.0 GiB"``: bytes in the largest binary unit below them."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= factor:
            return f"{nbytes / factor:.1f} {unit}"
    return f"{int(nbytes)} B"


def too_big(size: int, procs: int) -> str | None:
    """Why a local cell of ``size`` bytes per rank on ``procs`` ranks cannot fit in this
    machine's available memory, or None when it can."""
    need = cell_bytes(size, procs)
    have, source = available_bytes()
    if need <= have:
        return None
    return (f"{format_size(size)} per rank on P={procs} needs at least {human(need)} of memory "
            f"({BUFFERS_PER_RANK} buffers of the message per rank: send, receive, expected "
            f"result), more than the {human(have)} available ({source}); expected a size "
            f"of at most {human(have // (BUFFERS_PER_RANK * procs))} per rank")
