"""The performance guidelines a campaign's summary can test: each library's AUTO against the
mock-ups made of its own other collectives (``harness/algorithms/guidelines.py``), measured
in the same cells (library, P, nodes, size, dtype, op, timing, thread level, cache state, no
delay).

A row per (cell, mock-up) says ``violation`` when the mock-up is faster than AUTO with
statistical support (its interval lies wholly below AUTO's: the library's own selection loses
to a composition it could have called), ``holds`` when it is slower with support, ``tie``
when the intervals overlap, ``oversubscribed`` (more ranks than cores: no claim) or ``no
data`` (either side without a time). ``speedup`` = t_AUTO / t_mock-up.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..algorithms.guidelines import MOCK_UPS
from ..results.summary import allreduce_rows, typed
from .vocabulary import AUTO, oversubscribed_mask, timed_mask

# the cell's conditions: AUTO on cold buffers (buffers: rotate) is no reference for a mock-up
# measured on warm ones
KEY = ["library", "procs", "nodes", "size", "dtype", "op", "timing", "thread_level", "buffers"]
COLUMNS = KEY + ["mock_up", "auto_mean", "auto_ci_low", "auto_ci_high", "mock_mean",
                 "mock_ci_low", "mock_ci_high", "speedup", "verdict"]


def comparisons(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per cell where AUTO and a mock-up were both measured (see the module doc)."""
    df = allreduce_rows(typed(summary))
    df = df[df["delay"] == "none"]
    df = df.assign(_timed=timed_mask(df), _over=oversubscribed_mask(df))
    auto = df[df["algorithm"] == AUTO].drop_duplicates(KEY, keep="last")
    mock = df[df["algorithm"].isin(MOCK_UPS)].drop_duplicates(KEY + ["algorithm"], keep="last")
    if auto.empty or mock.empty:
        return pd.DataFrame(columns=COLUMNS)
    both = mock.merge(auto, on=KEY, suffixes=("_m", "_a"))
    rows = []
    for r in both.to_dict("records"):
        a_mean, m_mean = float(r["mean_a"] or np.nan), float(r["mean_m"] or np.nan)
        if r["_over_a"] or r["_over_m"]:
            verdict = "oversubscribed"
        elif not (r["_timed_a"] and r["_timed_m"]):
            verdict = "no data"
        elif float(r["ci_high_m"]) < float(r["ci_low_a"]):
            verdict = "violation"
        elif float(r["ci_low_m"]) > float(r["ci_high_a"]):
            verdict = "holds"
        else:
            verdict = "tie"
        timed = verdict not in ("no data",)
        rows.append({**{k: r[k] for k in KEY}, "mock_up": r["algorithm_m"],
                     "auto_mean": a_mean, "auto_ci_low": r["ci_low_a"],
                     "auto_ci_high": r["ci_high_a"], "mock_mean": m_mean,
                     "mock_ci_low": r["ci_low_m"], "mock_ci_high": r["ci_high_m"],
                     "speedup": a_mean / m_mean if timed and m_mean > 0 else np.nan,
                     "verdict": verdict})
    out = pd.DataFrame(rows, columns=COLUMNS)
    order = {name: i for i, name in enumerate(MOCK_UPS)}
    return out.assign(_o=out["mock_up"].map(order)).sort_values(
        ["library", "procs", "size", "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
