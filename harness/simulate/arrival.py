"""Arrival delays of a simulated cell (``simulate_sizes(..., delays=...)``) and the arrival
times handed to the PAP algorithms (``slt``, ``prr``: ``fn.uses_arrival``).

A delayed call runs as the measured bench's per-call mode runs it (``harness/measure/modes.py``
``PerCall``, ``harness/measure/timing.py``): every rank starts together, rank r then waits its
delay (``sg.this_actor.sleep_for``, simulated time) and calls the algorithm. Its time is its
own arrival (the call) to its return, the bench's ``elapsed``; the delay is not in it.

Knowledge (the cell parameter ``knowledge``, as ``harness.measure.arrival`` reads it):

- ``oracle`` (the default for an algorithm that reads arrival times): before each call
  ``ctx.scratch["arrival"]`` holds ``base + delays``, identical on every rank: the exact
  arrivals, as the bench hands them. ``base`` is ``max delay + compute`` with the
  ``compute`` parameter, else 0 (the bench's ``base_compute`` default); only differences
  between ranks matter to the algorithms;
- ``none``: nothing (SLT and PRR run in rank order);
- ``online`` (the monitor thread's estimates, exchanged while the ranks compute) is not
  simulated: refused with a ``ValueError`` that says so.
"""

from __future__ import annotations

import numpy as np

from ..algorithms import registry
from ..cells import kind_of
from ..units import parse_time

KNOWLEDGE = ("none", "oracle", "online")


def check_delays(delays, calls: int, procs: int):
    """``delays`` as a list of ``calls`` lists of ``procs`` non-negative floats, or None."""
    if delays is None:
        return None
    rows = [[float(x) for x in np.asarray(d, dtype=float).reshape(-1)] for d in delays]
    if len(rows) != calls or any(len(r) != procs for r in rows):
        raise ValueError(f"delays: expected {calls} vectors (one per call) of {procs} seconds "
                         f"(one per rank), got {[len(r) for r in rows]}")
    if any(not (np.isfinite(x) and x >= 0) for r in rows for x in r):
        raise ValueError("delays: expected finite, non-negative seconds")
    return rows


def _uses_arrival(algorithm: str):
    """True / False, or None when the algorithm is not known here (a plugin's)."""
    if kind_of(algorithm) != "harness" or algorithm not in registry.REGISTRY:
        return None
    return bool(getattr(registry.REGISTRY[algorithm].fn, "uses_arrival", False))


def knowledge(params: dict, algorithm: str) -> str | None:
    """What the algorithm is handed before each call: ``oracle``, ``none`` or None (an
    algorithm that reads no arrival times). ``ValueError`` for ``online`` or a bad value."""
    value = params.get("knowledge")
    if value is not None and value not in KNOWLEDGE:
        raise ValueError(f"parameter knowledge: expected one of {', '.join(KNOWLEDGE)}, got {value!r}")
    if value == "online":
        raise ValueError("parameter knowledge=online: the monitor thread that estimates and exchanges "
                         "arrival times (harness.measure.arrival) is not simulated; use knowledge "
                         "oracle (the exact arrivals) or none")
    uses = _uses_arrival(algorithm)
    if uses is False:
        if value not in (None, "none"):
            raise ValueError(f"parameter knowledge={value}: {algorithm} reads no arrival times "
                             f"(slt and prr do); leave knowledge out for it")
        return None
    return value or "oracle"


def base(params: dict, delays) -> float:
    """The compute phase common to every rank: ``max delay + compute``, else 0."""
    if "compute" not in params:
        return 0.0
    try:
        compute = parse_time(params["compute"])
    except ValueError as exc:
        raise ValueError(f"parameter compute: {exc}") from None
    return max((max(d) for d in delays), default=0.0) + compute


def hand_over(ctx, knowledge: str | None, delays, common: float) -> None:
    """Before a call: the arrival times in ``ctx.scratch["arrival"]`` (oracle), or none."""
    if knowledge == "oracle":
        ctx.scratch["arrival"] = common + np.asarray(delays, dtype=float)
    else:
        ctx.scratch.pop("arrival", None)
