"""Process-arrival delays and the emulated compute phase.

Before each repetition every rank "computes" for ``base + delay[rank]`` seconds. Delay
modes (``max_delay`` in seconds):

- ``none``: no rank is late;
- ``one-late``: rank ``late_rank`` arrives ``max_delay`` late;
- ``rand-late``: each rank uniform in ``[0, max_delay]``, drawn from a generator seeded with
  ``(seed, repetition)`` so a cell can be replayed;
- ``linear-skew``: rank ``i`` is ``i/(P-1) * max_delay`` late.

The vector is computed identically on every rank.

Synchronisation before the compute phase (setting ``sync``): ``barrier`` (two barriers, as
the PAP benchmark) or ``window``: after the barriers rank 0 announces a start time a few
milliseconds ahead and every rank computes from that instant, so arrival differences equal
the injected delays (barrier exits can differ by scheduling noise, which a window absorbs).
``auto`` uses ``window`` when a delay mode is set and ``barrier`` otherwise.
"""

from __future__ import annotations

import time

import numpy as np

DELAY_MODES = ("none", "one-late", "rand-late", "linear-skew")
SYNC_MODES = ("auto", "barrier", "window")
SPIN_TAIL = 200e-6  # sleep until this close to the deadline, then spin


def delay_vector(mode: str, max_delay: float, procs: int, late_rank: int, seed: int, rep: int) -> np.ndarray:
    """Seconds each rank is late in repetition ``rep``."""
    d = np.zeros(procs)
    if mode == "none" or max_delay == 0:
        return d
    if mode == "one-late":
        d[late_rank] = max_delay
    elif mode == "rand-late":
        d[:] = np.random.default_rng([seed, rep]).uniform(0.0, max_delay, procs)
    elif mode == "linear-skew":
        d[:] = np.arange(procs) / max(procs - 1, 1) * max_delay
    else:
        raise ValueError(f"unknown delay mode {mode!r}; valid: {', '.join(DELAY_MODES)}")
    return d


def wait_until(deadline: float, clock=time.perf_counter) -> bool:
    """Sleep, then spin the last ``SPIN_TAIL``, until ``clock() >= deadline``. Returns False if
    the deadline had already passed on entry (the caller started late)."""
    remaining = deadline - clock()
    if remaining <= 0:
        return False
    if remaining > SPIN_TAIL:
        time.sleep(remaining - SPIN_TAIL)
    while clock() < deadline:
        pass
    return True


def compute_phase(seconds: float) -> None:
    """Emulated computation of ``seconds``, starting now."""
    if seconds > 0:
        wait_until(time.perf_counter() + seconds)
