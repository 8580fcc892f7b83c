"""The summary's probes as data (Castelló et al., Fig. 4; Bienz et al., Fig. 5): the
``pingpong`` and ``reduce_local`` rows (kind ``probe``, ``harness.cells.kind_of``), newest per
cell, with the ping-pong's level and pair count and the bytes per second of the timed rows.
Written and drawn by ``harness/report/pingpong.py``; fitted by ``harness.analysis.netparams``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..libraries import library_sort_key
from ..results.store import row_json
from ..results.summary import typed
from .vocabulary import is_timed, timed_mask


def rows(df: pd.DataFrame) -> pd.DataFrame:
    """The summary's ``pingpong`` and ``reduce_local`` rows, newest per cell, with ``level``,
    ``pairs`` and ``bytes_per_s`` (size / mean) as columns."""
    d = typed(df)
    d = d[d["kind"] == "probe"].copy()
    if d.empty:
        return d.assign(level=[], pairs=[], bytes_per_s=[])
    d = d.sort_values("finished", na_position="first").drop_duplicates("cell_id", keep="last")
    rec = d["record"].map(row_json)
    par = d["params"].map(row_json)
    d["level"] = [("local" if a == "reduce_local" else r.get("level", ""))
                  for a, r in zip(d["algorithm"], rec)]
    d["bound"] = [r.get("bound") for r in rec]
    d["pairs"] = [(int(p.get("pairs", 1)) if a == "pingpong" else 0)
                  for a, p in zip(d["algorithm"], par)]
    timed = timed_mask(d)
    d["bytes_per_s"] = np.where(timed, d["size"] / d["mean"].where(timed, 1.0), np.nan)
    return d.sort_values(["algorithm", "library", "level", "pairs", "procs", "size"],
                         key=lambda s: s.map(library_sort_key) if s.name == "library"
                         else s).reset_index(drop=True)


def numeric(d: pd.DataFrame) -> pd.DataFrame:
    """``rows`` as the table's CSV holds them: times in seconds, none where a row has no time."""
    out = []
    for _, r in d.iterrows():
        timed = is_timed(r)
        out.append({"benchmark": r.algorithm, "library": r.library, "level": r.level,
                    "pairs": r.pairs if r.algorithm == "pingpong" else None,
                    "procs": int(r.procs), "size": int(r["size"]), "dtype": r["dtype"],
                    "op": r["op"], "mean_s": r["mean"] if timed else None,
                    "ci_low_s": r.get("ci_low") if timed else None,
                    "ci_high_s": r.get("ci_high") if timed else None,
                    "median_s": r.get("median") if timed else None,
                    "bytes_per_s": r.bytes_per_s if timed else None,
                    "n": r.get("n"), "status": r.status, "bound": r.bound,
                    "oversubscribed": bool(r.oversubscribed), "cell_id": r.cell_id})
    return pd.DataFrame(out)
