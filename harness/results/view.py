"""The statistic the tables, figures and verdicts are built on (``report.statistic``).

``mean`` (the default, the papers' choice): the mean of a cell's repetitions and its Student-t
95 % interval (or the log-scale or no interval ``ci_method`` names). ``median``: the median and
its order-statistics 95 % interval, which assumes no distribution; a cell whose repetitions
reject normality, or are autocorrelated, keeps a valid interval.

``statistic_view(summary, statistic)`` is the one place that choice is applied: under
``median`` every row's ``mean``, ``ci_low``, ``ci_high`` and ``rel_halfwidth`` hold the
median's, so every report, BEST (``analysis/best.py``) and every verdict built on those columns
reads the median without knowing it. A ``statistic`` column names what they hold; the mean
itself stays in ``sample_mean``. Under ``mean`` nothing changes but that column.

``t_flags(row)`` names, for a row read under ``mean``, the assumptions of its t-interval that
its repetitions reject (``t_rejected`` of the summary: normality, independence or both): the
tables flag such cells instead of hiding them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STATISTICS = ("mean", "median")
STATISTIC_LABEL = {"mean": "mean, Student-t 95 % interval",
                   "median": "median, order-statistics 95 % interval"}


def statistic_view(summary: pd.DataFrame, statistic: str = "mean") -> pd.DataFrame:
    """``summary`` with its time columns holding ``statistic`` (see the module's text)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    d = summary.copy()
    d["statistic"] = statistic
    if statistic == "mean" or d.empty or "median" not in d.columns:
        return d
    median = pd.to_numeric(d["median"], errors="coerce")
    low = pd.to_numeric(d.get("median_ci_low"), errors="coerce")
    high = pd.to_numeric(d.get("median_ci_high"), errors="coerce")
    d["sample_mean"] = d["mean"]
    d["mean"], d["ci_low"], d["ci_high"] = median, low, high
    with np.errstate(divide="ignore", invalid="ignore"):
        half = np.maximum(median - low, high - median) / median
    d["rel_halfwidth"] = half.where(np.isfinite(half))
    return d


def t_flags(row) -> str:
    """What the row's t-interval assumes and its data reject ('' when nothing is, when the row
    is read under the median, or when the summary predates the check)."""
    if row is None or str(row.get("statistic", "mean")) != "mean":
        return ""
    rejected = row.get("t_rejected")
    if not isinstance(rejected, str) or rejected in ("", "none"):
        return ""
    return rejected
