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

import pandas as pd

from ..cells import SELECTORS as SELECTING  # noqa: F401  (never a BEST candidate: not forced)
from ..results.store import TIMED  # noqa: F401  (the statuses whose mean is a time)
from .vocabulary import AUTO, timed_mask  # noqa: F401


def fastest(rows: pd.DataFrame) -> pd.Series | None:
    """BEST of ``rows``: the timed row with the lowest mean (ties: algorithm name); None when
    no row carries a time."""
    timed = rows[timed_mask(rows)]
    if timed.empty:
        return None
    return timed.assign(_mean=pd.to_numeric(timed["mean"])).sort_values(
        ["_mean", "algorithm"], kind="stable").iloc[0].drop("_mean")
