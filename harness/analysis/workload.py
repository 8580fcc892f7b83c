"""What a summary says about training-iteration workloads (Castelló et al. 2021, Sect. 5,
Figs. 9-10): the workload rows with their parameters (``rows``), per library, P and workload
AUTO against BEST with the projected images per second (``table``), and every library's
images/s over a reference library's AUTO (``normalised``). Written and drawn by
``harness/report/workload.py`` (the formulas there).

A workload row's kind is ``workload`` (``harness.cells.kind_of``); among a workload's rows
BEST is chosen from the algorithms that are native cells of the library's own allreduce
(``kind_of`` of the algorithm alone: AUTO or a forced algorithm, never a selector).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..cells import kind_of
from ..dnn import workload as dnn_workload
from ..libraries import library_sort_key
from ..results.store import row_json
from .auto_vs_best import prepare, row_number
from .best import fastest
from .vocabulary import AUTO, is_oversubscribed, timed_mask

REFERENCE = "impi"  # Fig. 10 normalises to Intel MPI's AUTO
KEYS = ["library", "library_version", "procs", "nodes", "dtype", "model", "fusion",
        "precision", "batch", "iteration_compute"]


def rows(df: pd.DataFrame) -> pd.DataFrame:
    """The summary's workload rows, with the workload's parameters as columns."""
    d = prepare(df, workloads=True)
    d = d[d["kind"] == "workload"].copy()
    params = d["params"].map(row_json)
    for k in (dnn_workload.KEY, *dnn_workload.DEFAULTS):
        d[k if k != dnn_workload.KEY else "model"] = params.map(
            lambda p, k=k: p.get(k, dnn_workload.DEFAULTS.get(k)))
    return d.reset_index(drop=True)


def images(batch, procs, compute, t, overlap: bool) -> float:
    """Images per second of ``batch`` per rank on ``procs`` ranks with ``compute`` seconds of
    computation and ``t`` of communication per iteration (overlapped or not)."""
    if not (math.isfinite(t) and t > 0):
        return math.nan
    return batch * procs / (max(compute, t) if overlap else compute + t)


def _native(algorithms: pd.Series) -> pd.Series:
    """Which of a workload's algorithms are the library's own allreduce (AUTO or forced)."""
    return algorithms.map(lambda a: kind_of(a) == "native").astype(bool)


def table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per library x P x workload: AUTO, BEST, gain and the projected images/s."""
    d = rows(df)
    out = []
    if d.empty:
        return pd.DataFrame(columns=KEYS)
    timed = timed_mask(d)
    native_rows = _native(d["algorithm"])
    for key, g in d.groupby(KEYS, sort=True, dropna=False):
        r = dict(zip(KEYS, key))
        native = g[native_rows.loc[g.index] & timed.loc[g.index]]
        auto = native[native.algorithm == AUTO]
        a = auto.iloc[0] if len(auto) else None
        b = fastest(native)
        r.update(calls=int(row_json(g.iloc[0].get("record")).get("calls", 0)),
                 size=int(g.iloc[0]["size"]),
                 auto_status=a["status"] if a is not None else
                 (g[g.algorithm == AUTO].status.iloc[0]
                  if (g.algorithm == AUTO).any() else "missing"),
                 best_algorithm=b["algorithm"] if b is not None else "",
                 best_status=b["status"] if b is not None else "")
        for who, row in (("auto", a), ("best", b)):
            for c in ("mean", "ci_low", "ci_high"):
                r[f"{who}_{c}"] = row_number(row, c)
        r["gain"] = r["auto_mean"] / r["best_mean"] if r["best_mean"] else math.nan
        r["significant"] = bool(a is not None and b is not None and b["algorithm"] != AUTO
                                and r["best_ci_high"] < r["auto_ci_low"])
        over = any(is_oversubscribed(x) for x in (a, b))
        r["oversubscribed"] = over
        r["verdict"] = ("oversubscribed" if over else "AUTO is BEST" if
                        r["best_algorithm"] == AUTO else "BEST faster" if r["significant"]
                        else "tie" if b is not None and a is not None else "no data")
        for who in ("auto", "best"):
            for overlap, name in ((False, "images"), (True, "images_overlap")):
                r[f"{who}_{name}"] = images(r["batch"], r["procs"], r["iteration_compute"],
                                            r[f"{who}_mean"], overlap)
        r["n_algorithms"] = int(native_rows.loc[g.index].sum())
        out.append(r)
    return pd.DataFrame(out)


def normalised(t: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Fig. 10 (right): each library's AUTO and BEST images/s over the reference library's
    AUTO in the same P and workload; the reference is Intel MPI if measured, else the first
    library."""
    if t.empty:
        return pd.DataFrame()
    libs = sorted(t.library.unique(), key=library_sort_key)
    ref = reference if reference in libs else libs[0]
    keys = [k for k in KEYS if k not in ("library", "library_version")]
    out = []
    for key, g in t.groupby(keys, sort=True, dropna=False):
        base = g[g.library == ref]
        if base.empty:
            continue
        b = float(base.iloc[0]["auto_images"])
        for r in g.itertuples(index=False):
            out.append({**dict(zip(keys, key)), "reference": ref, "library": r.library,
                        "auto": r.auto_images / b if b else math.nan,
                        "best": r.best_images / b if b else math.nan,
                        "best_algorithm": r.best_algorithm})
    return pd.DataFrame(out)


def images_errors(t: pd.DataFrame, who: str) -> np.ndarray:
    """(2 x rows) distances below and above ``<who>_images`` of the images/s that the time's
    95% CI gives (a shorter time is more images), 0 where there is none."""
    mid = t[f"{who}_images"].to_numpy(float)
    lo = np.array([images(r["batch"], r["procs"], r["iteration_compute"], r[f"{who}_ci_high"],
                          False) for r in t.to_dict("records")])
    hi = np.array([images(r["batch"], r["procs"], r["iteration_compute"], r[f"{who}_ci_low"],
                          False) for r in t.to_dict("records")])
    return np.nan_to_num(np.vstack([mid - lo, hi - mid]), nan=0.0).clip(min=0)
