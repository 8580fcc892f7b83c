"""The libraries side by side (Castelló et al. 2021, Fig. 6 and Fig. 10 right), as data: per
P, size and conditions each library's AUTO and BEST (``auto_vs_best``) and both over the
reference library's AUTO, with the conservative interval ``ref_ci_low / ci_high ..
ref_ci_high / ci_low``; a ratio is significant only when the two 95 % CIs do not overlap and
neither side is oversubscribed. Written and drawn by ``harness/report/cross_library.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..libraries import library_sort_key
from .auto_vs_best import auto_vs_best
from .vocabulary import same_platform_mask

REFERENCE = "impi"


def reference_of(libraries, wanted: str | None = None) -> str:
    """``wanted`` when it is one of ``libraries`` (ValueError naming it otherwise); without
    it Intel MPI when measured, else the first library."""
    libs = sorted(set(libraries), key=library_sort_key)
    if not libs:
        raise ValueError("no library with native cells to compare")
    if wanted:
        if wanted not in libs:
            raise ValueError(f"reference library {wanted!r} has no native cells in the summary; "
                             f"expected one of {', '.join(libs)}")
        return wanted
    return REFERENCE if REFERENCE in libs else libs[0]


def _ratio(ref, ref_lo, ref_hi, t, lo, hi):
    """Speedup ref / t and its conservative interval (NaN where a time is missing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (ref / t if t > 0 else math.nan, ref_lo / hi if hi > 0 else math.nan,
                ref_hi / lo if lo > 0 else math.nan)


def table(df: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """One row per P x conditions x size x library: AUTO, BEST (``auto_vs_best``) and
    both over the reference library's AUTO. ``attrs``: ``reference``, ``keys`` (the grouping
    columns besides library), ``context`` (the constant conditions)."""
    avb = auto_vs_best(df)
    keys = [k for k in avb.attrs.get("keys", []) if k not in ("library", "library_version")]
    ref = reference_of(avb["library"], reference) if len(avb) else reference
    if len(avb):  # the reference's platform only: simulated and measured are never compared
        avb = avb[avb["library"].isin(set(df.loc[same_platform_mask(df, ref), "library"]))]
    rows = []
    for key, g in avb.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        base = g[g["library"] == ref]
        b = base.iloc[0] if len(base) else None
        bm, bl, bh = ((float(b["auto_mean"]), float(b["auto_ci_low"]), float(b["auto_ci_high"]))
                      if b is not None else (math.nan,) * 3)
        for r in g.to_dict("records"):
            row = dict(r)
            row["reference"] = ref
            row["ref_auto_mean"] = bm
            crowded = bool(r["oversubscribed"]) or (b is not None and bool(b["oversubscribed"]))
            for who in ("auto", "best"):
                s, lo, hi = _ratio(bm, bl, bh, r[f"{who}_mean"], r[f"{who}_ci_low"],
                                   r[f"{who}_ci_high"])
                is_ref = who == "auto" and r["library"] == ref
                row[f"{who}_speedup"], row[f"{who}_speedup_low"], row[f"{who}_speedup_high"] = (
                    (1.0, 1.0, 1.0) if is_ref else (s, lo, hi))
                # called only when the 95% CIs of the two times do not overlap
                row[f"{who}_significant"] = bool(not is_ref and not crowded
                                                 and (lo > 1 or hi < 1))
            row["oversubscribed"] = crowded
            rows.append(row)
    cols = [*keys, "library", "library_version", "auto_status", "auto_mean", "auto_ci_low",
            "auto_ci_high", "auto_mibs", "best_algorithm", "best_status", "best_mean",
            "best_ci_low", "best_ci_high", "best_mibs", "reference", "ref_auto_mean",
            "auto_speedup", "auto_speedup_low", "auto_speedup_high", "auto_significant",
            "best_speedup", "best_speedup_low", "best_speedup_high", "best_significant",
            "oversubscribed"]
    out = pd.DataFrame(rows, columns=cols)
    if len(out):
        out["_lib"] = out["library"].map(library_sort_key)
        out = out.sort_values([*keys[:-1], "size", "_lib"], kind="stable").drop(columns="_lib")
        out = out.reset_index(drop=True)
    out.attrs.update(reference=ref, keys=keys, context=avb.attrs.get("context", {}))
    return out


def panels(t: pd.DataFrame):
    """(key, rows) per P and condition combination of ``table``'s rows (its ``keys`` but the
    size), in order."""
    keys = [k for k in t.attrs.get("keys", ["procs", "size"]) if k != "size"]
    for key, g in t.groupby(keys, sort=True, dropna=False):
        yield dict(zip(keys, key if isinstance(key, tuple) else (key,))), g


def lines(t: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """AUTO and BEST of every library as the rows of a faceted figure: ``panel`` (the index
    of its key in the keys also returned, ``panels``), ``line`` (``<library>|<version>|auto``),
    ``status`` and the time with its CI."""
    keys, parts = [], []
    for i, (key, g) in enumerate(panels(t) if len(t) else []):
        keys.append(key)
        for who in ("auto", "best"):
            parts.append(g.assign(
                panel=i, line=g["library"] + "|" + g["library_version"].astype(str) + "|" + who,
                status=g[f"{who}_status"],
                **{c: g[f"{who}_{c}"] for c in ("mean", "ci_low", "ci_high")}))
    return (pd.concat(parts, ignore_index=True) if parts else t), keys
