"""The cells of a summary by status, as the report page counts them: per experiment (a cell
of two experiments counts in both) and all cells once, and why the unfinished ones did not
finish."""

from __future__ import annotations

import pandas as pd

from ..results.store import STATUSES

UNFINISHED = ("failed", "wrong", "timeout")
ALL = "all cells"


def status_counts(summary: pd.DataFrame, experiments: dict[str, list[str]]) -> pd.DataFrame:
    """Cells per experiment (rows, sorted, then ``ALL``) and status (columns, in the store's
    order of ``STATUSES``); ``experiments``: each cell's experiments by cell id."""
    status = summary["status"].astype(str)
    pairs = pd.DataFrame([(e, s) for cell, s in zip(summary["cell_id"], status)
                          for e in experiments.get(cell) or ["(not recorded)"]],
                         columns=["experiment", "status"])
    pairs = pd.concat([pairs, pd.DataFrame({"experiment": ALL, "status": status})])
    counts = pd.crosstab(pairs["experiment"], pairs["status"])
    counts = counts.reindex(columns=[s for s in STATUSES if s in counts.columns])
    return counts.loc[sorted(i for i in counts.index if i != ALL) + [ALL]]


def unfinished_reasons(summary: pd.DataFrame) -> pd.Series:
    """How many unfinished cells (``UNFINISHED``) each (status, error message) has."""
    status = summary["status"].astype(str)
    bad = summary[status.isin(UNFINISHED)]
    why = bad["error"].where(bad["error"].astype(str) != "", "(no message)")
    return bad.groupby([bad["status"].astype(str), why]).size()
