"""The two timing modes of the measurement loop (``bench.py``), one class each with the same
small interface, and the one reduction of a cell's repetitions over its ranks.

A mode says what one sample is (``sample``: a timed repetition, or an IMB sample of calls back
to back), what it records besides the exchange rows (``raw_columns``, ``record``, ``timing``),
and how the stopping rule sees a sample: the bytes it moves (``volume``, for the repetition
limit) and each rank's time in it (``elapsed``, ``span``), which ``over_ranks`` reduces to the
cell's metric, per repetition and for the whole series alike.
"""

from __future__ import annotations

import numpy as np

from ..cells import Cell
from ..delays import delay_vector
from .timing import ARRIVAL, EXTRA, FINISH, OFFSET, TimedCell

METRICS = ("mean", "max", "min", "span")


def imb_iterations(size: int) -> int:
    """Calls per IMB sample: IMB-MPI1's default ``-iter 1000,40``: 1000, at most 40 MiB of
    messages (``min(1000, 40 MiB / size)``, at least 1)."""
    return max(1, min(1000, (40 * 2**20) // max(size, 1)))


def on_common_clock(log: np.ndarray, column: int) -> np.ndarray:
    """Arrival or finish times of exchange rows (``... × ranks × 6``) on the launch's common
    clock: seconds after the cell's epoch."""
    return log[..., column] + log[..., OFFSET]


def over_ranks(metric: str, mode, log: np.ndarray) -> np.ndarray:
    """The metric over the ranks of each repetition in ``log`` (repetitions × ranks × 6): the
    mean, max or min of the ranks' times (``mode.elapsed``), or the span (``mode.span``). The
    stopping rule sees it per repetition (a log of one row), the summary for the series."""
    if metric == "span":
        return mode.span(log)
    e = mode.elapsed(log)
    return e.mean(axis=1) if metric == "mean" else e.max(axis=1) if metric == "max" else e.min(axis=1)


class Growing:
    """A preallocated array of rows that doubles when full: O(1) work per repetition."""

    def __init__(self, *shape: int):
        self.data = np.empty((64, *shape))

    def put(self, i: int, row) -> None:
        if i == len(self.data):
            self.data = np.concatenate([self.data, np.empty_like(self.data)])
        self.data[i] = row

    def first(self, n: int) -> np.ndarray:
        return self.data[:n]


class PerCall:
    """Per-call timing: a sample is one synchronised, timed, verified call after the cell's
    compute phase and delays (``TimedCell.repetition``); each rank's time is its call's."""

    unit = "repetition"

    @staticmethod
    def volume(cell: Cell, settings: dict) -> int:
        return cell.size

    def __init__(self, m: TimedCell, settings: dict, seed: int):
        cell = m.cell
        self.m, self.cell, self.seed = m, cell, seed
        self.warmup = int(settings.get("warmup", 0))
        no_delay = cell.delay == "none" or cell.max_delay == 0
        self.zeros = np.zeros(m.procs)
        self.delays = None if no_delay else Growing(m.procs)  # each repetition's delays

    def _delays(self, rep: int) -> np.ndarray:
        c = self.cell
        return delay_vector(c.delay, c.max_delay, self.m.procs, c.late_rank, self.seed, rep)

    def warm_up(self):
        """``(exchange rows, label)`` per warm-up call: the same path as a measured
        repetition, with delay draws of its own."""
        for w in range(self.warmup):
            yield self.m.repetition(self._delays(2**31 + w)), f"warm-up {w + 1}"

    def sample(self, rep: int) -> np.ndarray:
        if self.delays is None:
            return self.m.repetition(self.zeros)
        delays = self._delays(rep)
        every = self.m.repetition(delays)
        self.delays.put(rep, delays)
        return every

    def elapsed(self, log: np.ndarray) -> np.ndarray:
        """Each counted rank's time of each call (a body's ranks, times its scale)."""
        rows = self.m.rows
        return (log[:, rows, FINISH] - log[:, rows, ARRIVAL]) * self.m.scale

    def span(self, log: np.ndarray) -> np.ndarray:
        """First arrival to last finish on the common clock; NaN without one."""
        m = self.m
        if not m.common_clock:
            return np.full(len(log), np.nan)
        finish, arrival = on_common_clock(log, FINISH), on_common_clock(log, ARRIVAL)
        return (finish[:, m.rows].max(axis=1) - arrival[:, m.rows].min(axis=1)) * m.scale

    def timing(self) -> dict:
        m = self.m
        return {"sync": m.sync, "window": m.window if m.sync == "window" else None}

    def record(self, record: dict | None) -> dict | None:
        return record

    def raw_columns(self, log: np.ndarray) -> dict:
        n = len(log)
        return {"delay": (self.delays.first(n) if self.delays is not None
                          else np.zeros((n, self.m.procs))).tolist(),
                # ranks that got the window's start time too late
                "late_starts": log[:, :, EXTRA].sum(axis=1).astype(int).tolist()}


class Imb:
    """IMB-MPI1 timing: a sample is ``iterations`` calls back to back between one Wtime pair
    (``TimedCell.imb_batch``); each rank's time is its mean time per call, no span."""

    unit = "sample"

    @staticmethod
    def calls(cell: Cell, settings: dict) -> int:
        """Calls per sample: the setting ``imb_iterations``, else IMB's default."""
        return int(settings.get("imb_iterations") or imb_iterations(cell.size))

    @classmethod
    def volume(cls, cell: Cell, settings: dict) -> int:
        return cell.size * cls.calls(cell, settings)

    def __init__(self, m: TimedCell, settings: dict, seed: int):
        if m.body is not None:
            raise ValueError(f"timing: {m.cell.algorithm} is timed per repetition, not 'imb'")
        self.m = m
        self.iterations = self.calls(m.cell, settings)

    def warm_up(self):
        """IMB warms up with max(10, n/10) calls of the loop body; Python needs one more whole
        sample before its times settle (the first sample ran 2-4x slower at 4 KiB)."""
        n = self.iterations
        for calls in (max(10, n // 10), n):
            yield self.m.imb_batch(calls), "warm-up"

    def sample(self, rep: int) -> np.ndarray:
        return self.m.imb_batch(self.iterations)

    def elapsed(self, log: np.ndarray) -> np.ndarray:
        """IMB's t_avg / t_max / t_min are over the ranks' mean time per call."""
        return log[:, :, EXTRA]

    def span(self, log: np.ndarray) -> np.ndarray:
        return np.full(len(log), np.nan)

    def timing(self) -> dict:
        return {"sync": "imb", "window": None}

    def record(self, record: dict | None) -> dict:
        return dict(record or {}, imb_iterations=self.iterations)

    def raw_columns(self, log: np.ndarray) -> dict:
        n = len(log)
        return {"delay": np.zeros((n, self.m.procs)).tolist(), "late_starts": [0] * n,
                "iterations": [self.iterations] * n}
