"""BEST, defined once.

Among a set of summary rows (one library, P, size and condition), BEST is the row with the
lowest mean among those that carry a time: status ``ok`` or ``not-converged`` and a positive
finite mean. Rows whose result was wrong, that failed or timed out are never candidates.
Equal means go to the algorithm whose name sorts first, so the same summary always gives the
same BEST. The AUTO-vs-BEST table (``harness.analysis.auto_vs_best``, AUTO among the
candidates, so BEST is never slower than AUTO), ``harness tune`` (which reads that table) and
the confirmation stage (``harness.campaign.confirm.pick``: the fastest forced algorithm, to be measured
against AUTO again) all take it from here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results.store import TIMED  # the statuses whose mean is a time

AUTO = "native:auto"  # the library's own choice
# the library selecting by a tuning file or its autotuner: never a BEST candidate (not forced)
SELECTING = ("native:tuned", "native:autotuner")


def timed_mask(d: pd.DataFrame) -> pd.Series:
    """Rows that carry a usable time: status ok/not-converged and a positive finite mean."""
    mean = pd.to_numeric(d["mean"], errors="coerce")
    return d["status"].isin(TIMED) & np.isfinite(mean) & (mean > 0)


def fastest(rows: pd.DataFrame) -> pd.Series | None:
    """BEST of ``rows``: the timed row with the lowest mean (ties: algorithm name); None when
    no row carries a time."""
    timed = rows[timed_mask(rows)]
    if timed.empty:
        return None
    return timed.assign(_mean=pd.to_numeric(timed["mean"])).sort_values(
        ["_mean", "algorithm"], kind="stable").iloc[0].drop("_mean")
