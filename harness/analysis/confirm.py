"""The confirmation stage's documents as data: the entries of ``confirm/<group>.json``
(``harness.campaign.confirm``) as one frame (``load``), AUTO-vs-BEST entries and the
guideline mock-ups measured again (``role`` ``GUIDELINE``). Written and drawn by
``harness/report/confirm.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

COLUMNS = ["library", "procs", "size", "dtype", "op", "timing", "buffers", "best", "auto_mean",
           "best_mean", "gain", "gain_ci_low", "gain_ci_high", "pairs", "campaign_gain",
           "verdict", "median_gain", "wilcoxon_p", "rank_biserial", "nonparametric", "role"]
GUIDELINE = "guideline"  # the role of an entry that measures a guideline's mock-up again


def load(paths) -> pd.DataFrame:
    """Every entry of the documents ``paths``, one row each with ``COLUMNS`` (None where an
    entry has none; ``role`` ``best`` by default), sorted by library, P and size."""
    rows = []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        rows.extend(doc["entries"])
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df:
            df[c] = None
    df["role"] = df["role"].fillna("best")
    return df[COLUMNS].sort_values(["library", "procs", "size"], kind="stable").reset_index(drop=True)
