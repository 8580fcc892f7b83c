"""What a summary's rows mean, decided once (over the typed summary, ``harness.results.summary``).

- **timed**: the row carries a usable time: status ``ok`` or ``not-converged``
  (``store.TIMED``) and a positive finite mean. Only timed rows are compared, fitted or drawn
  as times.
- **comparable native cell**: a cell of the library's own allreduce that can stand beside AUTO:
  kind ``native`` (AUTO or a forced algorithm: not a selector, a workload, a probe or a harness
  algorithm) and no delay (``COMPARABLE``). BEST, the confirmation stage, tuning, the adaptive
  tuner and the regret replay choose among these; the plan (``is_comparable``) and the summary
  (``comparable_mask``) read the same condition.
- **oversubscribed**: a launch with more ranks on a node than it has cores; such a row claims
  nothing (no win, no loss). The typed summary holds it as a boolean; ``oversubscribed_mask`` reads it.
- **platform**: where a row's number comes from: ``""`` measured, else the id of the simulated
  platform it was simulated on (the flag ``simulated``). A claim that sets libraries side by
  side reads rows of one platform only (``platform_of``, ``same_platform_mask``): a simulated
  number never stands beside a measured one.

BEST itself (the fastest timed comparable row) is ``harness.analysis.best.fastest``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..cells import AUTO  # noqa: F401  (the library's own choice, offered with the rest)
from ..results.store import TIMED
from ..results.summary import typed

# the comparable native cell, as (attribute or column) -> value
COMPARABLE = {"kind": "native", "delay": "none"}


def timed_mask(d: pd.DataFrame) -> pd.Series:
    """Rows that carry a usable time: status ok/not-converged and a positive finite mean."""
    mean = pd.to_numeric(d["mean"], errors="coerce")
    return d["status"].astype(str).isin(TIMED) & np.isfinite(mean) & (mean > 0)


def is_timed(row) -> bool:
    """``timed_mask`` of one row (a Series, a dict or a named tuple)."""
    get = row.get if hasattr(row, "get") else (lambda k: getattr(row, k, None))
    try:
        mean = float(get("mean"))
    except (TypeError, ValueError):
        return False
    return str(get("status")) in TIMED and np.isfinite(mean) and mean > 0


def comparable_mask(d: pd.DataFrame) -> pd.Series:
    """Rows of comparable native cells (``COMPARABLE``) of a typed summary."""
    rows = typed(d)
    mask = pd.Series(True, index=d.index)
    for column, value in COMPARABLE.items():
        mask &= rows[column].astype(str) == value
    return mask


def is_comparable(cell) -> bool:
    """``comparable_mask`` for one cell of the plan (``harness.cells.Cell``)."""
    return all(getattr(cell, name) == value for name, value in COMPARABLE.items())


def oversubscribed_mask(d: pd.DataFrame) -> pd.Series:
    """Rows measured with more ranks on a node than it has cores (they claim nothing)."""
    return d["oversubscribed"].astype(bool)


def is_oversubscribed(row) -> bool:
    """``oversubscribed_mask`` of one row (None: False)."""
    if row is None:
        return False
    value = row.get("oversubscribed") if hasattr(row, "get") else getattr(row, "oversubscribed",
                                                                          False)
    return value is True or str(value).strip().lower() == "true"


def claims_nothing_mask(rows: pd.DataFrame) -> np.ndarray:
    """Rows that claim nothing (the figures draw them hollow): not converged (the categorical
    ``status``) or oversubscribed (``oversubscribed_mask``; in a frame joined from typed rows
    and others, True where True)."""
    mask = np.zeros(len(rows), dtype=bool)
    if "status" in rows:
        mask |= (rows["status"] == "not-converged").to_numpy(bool)
    if "oversubscribed" in rows:
        flag = rows["oversubscribed"]
        mask |= (oversubscribed_mask(rows) if flag.dtype == bool else flag.eq(True)).to_numpy(bool)
    return mask


def platform_of(d: pd.DataFrame, library: str) -> str:
    """The platform of ``library``'s rows (``""``: measured); a simulated installation's rows
    share one (its name is ``<family>@<platform>``)."""
    rows = typed(d)
    values = rows.loc[rows["library"] == library, "platform"].astype(str)
    return values.iloc[0] if len(values) else ""


def same_platform_mask(d: pd.DataFrame, library: str) -> pd.Series:
    """Rows on the platform of ``library``'s (measured rows beside a measured library)."""
    rows = typed(d)
    return rows["platform"].astype(str) == platform_of(rows, library)


def simulated_mask(d: pd.DataFrame) -> pd.Series:
    """Rows simulated on a platform (the typed summary's flag ``simulated``)."""
    return typed(d)["simulated"].astype(bool)
