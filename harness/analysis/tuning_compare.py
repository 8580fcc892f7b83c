"""One campaign's tuning files against the exhaustive truth's, as data (``harness tune <c>
--compare <truth>``): per point of the truth the algorithm each file runs there (AUTO where no
rule matches) and their regrets in the truth's times (``compare_tunings``); how far apart two
campaigns time the same cells (``campaign_noise``). Written by
``harness/report/tuning_compare.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ..results.summary import typed
from ..tuning import Table
from . import regret
from .vocabulary import AUTO, timed_mask

COMPARE_COLUMNS = ["library", "procs", "nodes", "size", "exhaustive", "other", "same",
                   "exhaustive_regret", "other_regret", "cost"]
def compare_tunings(summary: pd.DataFrame, truth_dir, other_dir) -> pd.DataFrame:
    """Per library tuned in both ``truth_dir`` and ``other_dir`` (``tuning/`` directories)
    and per point of the truth: ``COMPARE_COLUMNS``. ValueError when no library is in both."""
    truth_dir, other_dir = Path(truth_dir), Path(other_dir)
    both = sorted({p.stem for p in truth_dir.glob("*.json")} & {p.stem for p in other_dir.glob("*.json")}
                  - {"decisions"})
    both = [lib for lib in both if not lib.startswith("verify-")]
    if not both:
        raise ValueError(f"tuning: no library has tuning files in both {truth_dir} and "
                         f"{other_dir}; expected `harness tune` run on each campaign first")
    rows = []
    ran = auto_ran_at(summary)
    for library in both:
        tabs = [Table.from_dict(json.loads((d / f"{library}.json").read_text())["table"])
                for d in (truth_dir, other_dir)]
        table = regret.truth(summary, library)
        times = table.set_index([*regret.POINT, "algorithm"])["mean"]
        for point, group in table.groupby(regret.POINT, sort=True):
            picks = [f"native:{t.lookup(int(point[0]), int(point[2])) or 'auto'}" for t in tabs]
            said = ran.get((library, int(point[0]), int(point[2])))
            if said:  # the decision AUTO makes there, as the auto_ran stage saw it
                picks = [f"{p} ({said})" if p == AUTO else p for p in picks]
            got = [times.get((*point, a.split(" (")[0]), math.nan) for a in picks]
            best = float(group["best_mean"].iloc[0])
            rows.append({"library": library, "procs": int(point[0]), "nodes": int(point[1]),
                         "size": int(point[2]), "exhaustive": picks[0], "other": picks[1],
                         "same": picks[0] == picks[1], "exhaustive_regret": got[0] / best - 1,
                         "other_regret": got[1] / best - 1,
                         "cost": math.nan if picks[0] == picks[1] else got[1] / got[0] - 1})
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def auto_ran_at(summary: pd.DataFrame) -> dict:
    """``(library, procs, size) -> what AUTO ran`` from the summary's ``auto_ran`` column
    (the auto_ran stage), where it names a catalogue algorithm."""
    d = typed(summary)
    d = d[(d["algorithm"] == AUTO) & d["auto_ran"].str.fullmatch(r"[a-z0-9_]+")]
    return {(str(r.library), int(r.procs), int(r.size)): str(r.auto_ran) for r in d.itertuples()}


NOISE_COLUMNS = ["library", "cells", "median_change", "p90_change"]


def campaign_noise(truth: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Per library, the cells timed in both summaries (same ``cell_id``, neither failed) and
    how far apart their times are: the median and the 90th percentile of |t(other) /
    t(truth) - 1|. Two campaigns measure each cell in launches minutes apart; regrets and
    costs below this are the launches' own noise, not the tuning's."""
    timed = [d[timed_mask(d)][["library", "cell_id", "mean"]] for d in (truth, other)]
    both = timed[0].merge(timed[1], on=["library", "cell_id"], suffixes=("_truth", "_other"))
    change = (both["mean_other"] / both["mean_truth"] - 1).abs()
    rows = [{"library": lib, "cells": len(c), "median_change": float(c.median()),
             "p90_change": float(c.quantile(0.9))}
            for lib, c in change.groupby(both["library"], sort=True)]
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)
