"""Memory a cell needs on this machine, checked before a local launch (``harness run``).

Each rank of a cell holds ``BUFFERS_PER_RANK`` buffers of the message size for the whole
measurement (``harness.measure.timing.TimedCell``: the send buffer, the receive buffer and the expected
result it is verified against), so a cell of P ranks on one machine needs at least
``BUFFERS_PER_RANK * size * P`` bytes; the library's own scratch space comes on top.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .units import format_size

BUFFERS_PER_RANK = 3  # send, receive, expected result (harness/measure/timing.py, TimedCell.__init__)
PAGE = 4096
FALLBACK_LLC = 32 * 2**20
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def last_level_cache(sysfs: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[int, str]:
    """(bytes, where from) of the largest data or unified cache of this host's first CPU, from
    sysfs; 32 MiB when sysfs says nothing (said so in the second item)."""
    best = 0
    for index in sorted(Path(sysfs).glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip()
            best = max(best, int(text[:-1]) * _UNITS[text[-1]] if text[-1] in _UNITS
                       else int(text))
        except (OSError, ValueError, IndexError):
            continue
    if best:
        return best, f"{sysfs}/index*/size"
    return FALLBACK_LLC, "not found in sysfs: 32 MiB assumed"


def rotation_slots(nbytes: int, llc: int) -> tuple[int, int]:
    """(slots, stride) of a ``buffers: rotate`` cell (harness/measure/buffers.py): each slot
    on pages of its own, enough slots that they exceed the last-level cache ``llc``."""
    stride = max(PAGE, math.ceil(nbytes / PAGE) * PAGE)
    return max(2, math.ceil(llc / stride)), stride


def rotation_bytes(size: int) -> int:
    """The bytes a rank's rotated send and receive slots take on this machine."""
    slots, stride = rotation_slots(size, last_level_cache()[0])
    return 2 * slots * stride


def cell_bytes(size: int, procs: int, buffers: str = "reuse") -> int:
    """The least memory, in bytes, the buffers of a cell of ``procs`` ranks take (with
    ``buffers: rotate``, its rotated slots too)."""
    extra = rotation_bytes(size) if buffers == "rotate" else 0
    return (BUFFERS_PER_RANK * size + extra) * procs


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


def too_big(size: int, procs: int, buffers: str = "reuse") -> str | None:
    """Why a local cell of ``size`` bytes per rank on ``procs`` ranks cannot fit in this
    machine's available memory, or None when it can."""
    need = cell_bytes(size, procs, buffers)
    have, source = available_bytes()
    if need <= have:
        return None
    rotated = (", plus the rotated send and receive slots (buffers: rotate)"
               if buffers == "rotate" else "")
    return (f"{format_size(size)} per rank on P={procs} needs at least {human(need)} of memory "
            f"({BUFFERS_PER_RANK} buffers of the message per rank: send, receive, expected "
            f"result{rotated}), more than the {human(have)} available ({source}); expected a "
            f"size of at most {human(have // (BUFFERS_PER_RANK * procs))} per rank")
