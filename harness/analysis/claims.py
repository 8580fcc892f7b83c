"""What the stages' tables (``tables/*.csv``) claim, decided once: the rows whose verdict
claims something and how many comparisons were ties, and AUTO's costliest decision per
library (the confirmed BEST-faster rows joined with what AUTO ran, ``auto_choices``).
``harness.report.findings`` words them for the report page.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd


def read_table(path: Path) -> pd.DataFrame | None:
    """The table at ``path``; None when there is none or it cannot be read."""
    try:
        return pd.read_csv(path) if path.is_file() else None
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return None


def number(x) -> float:
    """``x`` as a float; NaN when it is none."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def verdicts(path: Path, claimed: tuple[str, ...], tied) -> tuple[list[dict] | None, int]:
    """The rows of the table at ``path`` whose verdict is ``claimed`` (None: no table), and
    how many are ties (``tied``: the verdict of a tie, or a test of it)."""
    df = read_table(path)
    if df is None:
        return None, 0
    verdict = df["verdict"].astype(str)
    ties = verdict.map(tied) if callable(tied) else verdict == tied
    return df[verdict.isin(claimed)].to_dict("records"), int(ties.sum())


def costliest_decisions(confirmed: pd.DataFrame | None,
                        ran: pd.DataFrame | None) -> list[tuple[pd.Series, list[int]]]:
    """Per library, AUTO's decision that costs most: of the ``confirmed`` BEST-faster rows
    whose AUTO cell says what it ran (``ran``, the ``auto_choices`` table), the one with the
    largest gain, with the sizes of its P where the same pair of decisions (what AUTO ran,
    BEST) is confirmed too, smallest first."""
    if confirmed is None or ran is None or confirmed.empty or ran.empty:
        return []
    said = {(str(r["library"]), int(r["procs"]), int(r["size"])): str(r["auto_ran"])
            for r in ran.to_dict("records")}
    df = confirmed[confirmed["verdict"] == "BEST faster"].copy()
    df["auto_ran"] = [said.get((str(r["library"]), int(r["procs"]), int(r["size"])), "")
                      for r in df.to_dict("records")]
    out = []
    for _, g in df[df["auto_ran"] != ""].groupby("library", sort=False):
        top = g.loc[g["gain"].astype(float).idxmax()]
        same = g[(g["procs"] == top["procs"]) & (g["auto_ran"] == top["auto_ran"])
                 & (g["best"] == top["best"])]["size"].astype(int).sort_values()
        out.append((top, [int(s) for s in same]))
    return out
