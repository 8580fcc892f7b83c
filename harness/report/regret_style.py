"""What the regret tables and figures share (``harness.report.regret``, ``regret_judged``,
``tuning_compare``): percentages, the policies' colours, the median curve over seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .style import SERIES_COLORS

FLOOR = 1e-4  # a regret of 0 is drawn here on the log axis


def percent(x) -> str:
    return f"{100 * x:.1f} %" if isinstance(x, (int, float)) and math.isfinite(x) else ""


POLICY_STYLE = {policy: (SERIES_COLORS[policy], label) for policy, label in (
    ("adaptive", "adaptive (surrogate)"), ("random", "random cells"), ("grid", "fixed grid"))}


def median_curve(group: pd.DataFrame, x: str, column: str) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray, np.ndarray]:
    """(x, median, min, max) of ``column`` over the seeds of one policy: on the cells axis the
    seeds share their x; on the time axis each seed's step curve is read on a common grid."""
    seeds = [g for _, g in group.groupby("seed", sort=True)]
    if x == "cells":
        grid = np.array(sorted(set(group["cells"])), dtype=float)
    else:
        lo, hi = group[x].min(), group[x].max()
        grid = np.linspace(lo, hi, 400) if hi > lo else np.array([lo, hi], float)
    values = []
    for g in seeds:
        xs, ys = g[x].to_numpy(float), g[column].to_numpy(float)
        idx = np.searchsorted(xs, grid, side="right") - 1  # the last batch done by then
        values.append(np.where(idx >= 0, ys[np.clip(idx, 0, None)], np.nan))
    v = np.vstack(values)
    with np.errstate(all="ignore"):
        return grid, np.nanmedian(v, axis=0), np.nanmin(v, axis=0), np.nanmax(v, axis=0)
