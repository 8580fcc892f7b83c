"""The tuned selection's verification as data: the entries of ``tuning/verify-<library>.json``
(``harness.campaign.tune_verify``) as one frame (``load``). Written and drawn by
``harness/report/tuned.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

COLUMNS = ["library", "procs", "size", "held_out", "expected", "auto_mean", "tuned_mean",
           "gain", "gain_ci_low", "gain_ci_high", "best", "best_mean", "vs_best",
           "vs_best_ci_low", "vs_best_ci_high", "autotuner_mean", "vs_autotuner",
           "vs_autotuner_ci_low", "vs_autotuner_ci_high", "pairs", "oversubscribed", "verdict"]


def load(paths) -> pd.DataFrame:
    """Every entry of the verification documents ``paths``, one row each with ``COLUMNS``
    (NaN where an entry has none), sorted by library, P and size."""
    rows = []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        rows.extend({**e, "library": doc["library"]} for e in doc["entries"])
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df:
            df[c] = math.nan
    df = df[COLUMNS]
    if len(df):
        df = df.sort_values(["library", "procs", "size"], kind="stable")
    return df.reset_index(drop=True)
