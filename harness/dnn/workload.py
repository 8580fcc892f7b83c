"""One training iteration's gradient communication as a cell (the ``workload`` experiment kind).

A cell with the parameter ``workload=<model>`` replays the model's gradient trace
(``harness.dnn.traces``), fused into allreduce calls by ``fusion`` (``horovod`` or ``ddp``)
at ``precision`` (``fp32`` or ``fp16``, ``harness.dnn.fusion``), through the cell's algorithm
and library: one repetition is the whole iteration, every call back to back in call order,
so the stopping rule applies to the iteration's communication time.

The cell's buffer is the iteration's gradients laid end to end; call k reduces its own slice
of it, so the receive buffer is verified whole after every repetition, as for any cell. A
call's bytes become elements of the cell's dtype, rounded up (an fp16 bucket of 3 elements,
6 bytes, is 2 float32 elements): MPI has no standard half-precision type, so fp16 calls move
the same bytes as float32 data. The cell's ``size`` is the iteration's bytes after that
rounding.

``batch`` (images per rank and iteration) and ``iteration_compute`` (seconds of forward and backward
compute per iteration, default 0) are not part of the measurement; the report uses them to
project images per second, ``batch * P / (compute + communication)``, with no overlap.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..cells import WORKLOAD_KEY
from . import fusion, traces

KEY = WORKLOAD_KEY  # harness/cells.py decides the kind "workload" by it
# parameters of a workload cell and their defaults; the measurement reads the first three
DEFAULTS = {"fusion": "ddp", "precision": "fp32", "batch": 32, "iteration_compute": 0.0}


def is_workload(params) -> bool:
    return bool(dict(params).get(KEY))


def check(params) -> None:
    """ValueError naming the parameter whose value is not a model, policy or precision."""

    p = dict(params)
    if p.get(KEY) not in traces.MODELS:
        raise ValueError(f"parameter workload: expected one of {', '.join(traces.MODELS)}, "
                         f"got {p.get(KEY)!r}")
    if p.get("fusion", DEFAULTS["fusion"]) not in fusion.POLICIES:
        raise ValueError(f"parameter fusion: expected one of {', '.join(fusion.POLICIES)}, "
                         f"got {p.get('fusion')!r}")
    if p.get("precision", DEFAULTS["precision"]) not in fusion.PRECISIONS:
        raise ValueError(f"parameter precision: expected one of "
                         f"{', '.join(fusion.PRECISIONS)}, got {p.get('precision')!r}")


@lru_cache(maxsize=None)
def _counts(model: str, policy: str, precision: str, itemsize: int) -> tuple:
    calls = fusion.calls(traces.load(model).numels, policy, precision)
    return tuple(-(-b // itemsize) for b in calls)


def counts(params, dtype: str) -> tuple:
    """Elements of ``dtype`` of each allreduce call of one iteration, in call order."""
    check(params)
    p = dict(params)
    return _counts(p[KEY], p.get("fusion", DEFAULTS["fusion"]),
                   p.get("precision", DEFAULTS["precision"]), np.dtype(dtype).itemsize)


def size(params, dtype: str) -> int:
    """Bytes of one iteration's communication as the cell measures it (its ``size``)."""
    return sum(counts(params, dtype)) * np.dtype(dtype).itemsize


def slices(params, dtype: str) -> list[slice]:
    """Each call's slice of the cell's buffer."""
    out, start = [], 0
    for n in counts(params, dtype):
        out.append(slice(start, start + n))
        start += n
    return out


def record(params, dtype: str) -> dict:
    """What the cell stores about its replay: call count and the call sizes in bytes."""
    itemsize = np.dtype(dtype).itemsize
    sizes = [n * itemsize for n in counts(params, dtype)]
    return {"calls": len(sizes), "largest_call": max(sizes), "smallest_call": min(sizes)}


def rows(df):
    """Boolean mask of a summary's workload rows (their ``params`` name a workload). The
    single-call reports, the confirmation stage, tuning and model fitting leave them out:
    their ``size`` is an iteration's bytes, not one call's."""
    return df["params"].fillna("{}").astype(str).str.contains(f'"{KEY}"', regex=False)


def without(df):
    """The summary without its workload rows."""
    return df[~rows(df)] if "params" in df.columns and len(df) else df
