"""Verification data: small integers whose reduction is exact in every dtype and every
summation order, and the expected result computed independently of MPI.

Rank ``r`` contributes ``x_r[i] = g(r, i)``; the reference is the same reduction done with
numpy over all ranks' contributions.
"""

from __future__ import annotations

import numpy as np

DTYPES = ("float32", "float64", "int32", "int64")
OPS = ("sum", "prod", "max", "min")


def contribution(rank: int, count: int, dtype: str, op: str) -> np.ndarray:
    """Rank ``rank``'s send buffer for a cell of ``count`` elements."""
    i = np.arange(count, dtype=np.int64)
    if op == "prod":
        # mostly 1, some -1 and a few 2: products stay small powers of two, exact everywhere
        k = (i + rank) % 13
        x = np.where(k == 0, -1, np.where(k == 5, 2, 1))
    elif op == "sum":
        x = (i * 7 + rank * 3) % 9 - 4
    else:  # max, min
        x = (i * 5 + rank * 11) % 23 - 11
    out = aligned_empty(count, dtype)
    out[:] = x
    return out


def aligned_empty(count: int, dtype: str, alignment: int = 4096) -> np.ndarray:
    """An uninitialised array whose data starts on an ``alignment``-byte boundary (as C
    benchmarks allocate; MPI copy paths can be slower on unaligned buffers)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(count * itemsize + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + count * itemsize].view(dtype)


def expected(procs: int, count: int, dtype: str, op: str) -> np.ndarray:
    """The correct allreduce result over ``procs`` ranks."""
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    acc = contribution(0, count, dtype, op).copy()
    for r in range(1, procs):
        ufunc(acc, contribution(r, count, dtype, op), out=acc)
    return acc


def sentinel(dtype: str):
    """A value no correct result holds (results stay within ±(4·P) or small powers of two)."""
    return np.dtype(dtype).type(-(2**30) + 7)
