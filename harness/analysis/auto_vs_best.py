"""AUTO vs BEST (Castelló et al. 2021, Sec. 4.3), computed from a summary.

``auto_vs_best(summary)`` gives one row per library x P x message size (and per dtype, op,
delay, max_delay, late_rank, nodes, metric when those vary in the input): the time of
``native:auto`` (AUTO), the BEST native algorithm (``best.fastest``: the lowest mean among the
``native:*`` cells that carry a time, status ``ok`` or ``not-converged``), AUTO included, so
BEST is never slower than AUTO -- and gain = AUTO time / BEST time. Cells with status wrong,
failed or timeout are never candidates; they are listed in the ``excluded`` column.
``prepare`` cleans a summary for it (and for every report). Written as tables by
``harness.report.tables``; read by ``harness tune``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..libraries import library_sort_key
from ..results.summary import allreduce_rows, load, typed
from ..results.view import t_flags
from .best import AUTO, fastest, timed_mask
from .vocabulary import is_oversubscribed

MIB = float(2**20)
# Columns that define the conditions of a cell besides library, P and size; a table or figure
# splits by them only when they vary.
CONTEXT = ["nodes", "dtype", "op", "delay", "max_delay", "late_rank", "metric", "buffers"]
# conditions a figure cannot mix (nodes is shown per column with P)
FIGURE_CONTEXT = [c for c in CONTEXT if c != "nodes"]

TABLE_COLUMNS = [
    "auto_status", "auto_mean", "auto_ci_low", "auto_ci_high", "auto_mibs",
    "best_algorithm", "best_status", "best_mean", "best_ci_low", "best_ci_high", "best_mibs",
    "gain", "gain_low", "gain_high", "significant", "verdict", "oversubscribed",
    "t_assumptions", "n_algorithms", "n_timed", "excluded",
]


# --------------------------------------------------------------------------- data preparation

def load_summary(path) -> pd.DataFrame:
    return prepare(load(path))


def prepare(df: pd.DataFrame, workloads: bool = False) -> pd.DataFrame:
    """The typed summary's allreduce rows (``harness.results.summary``), one row per cell (the
    newest, by ``finished``). Workload rows (a training iteration, ``harness.dnn.workload``)
    are left out unless ``workloads``."""
    if df.attrs.get("prepared") == ("workloads" if workloads else "allreduce"):
        return df  # prepared already (rows selected from a prepared frame stay prepared)
    d = allreduce_rows(typed(df), workloads=workloads)
    ident = ["library", "library_version", "algorithm", "params", "procs", "size", *CONTEXT]
    d = d.sort_values("finished", kind="stable").drop_duplicates(ident, keep="last")
    d = d.reset_index(drop=True)
    d.attrs["prepared"] = "workloads" if workloads else "allreduce"
    return d


def varying(d: pd.DataFrame, cols=CONTEXT) -> list[str]:
    return [c for c in cols if c in d.columns and d[c].nunique(dropna=False) > 1]


def constants(d: pd.DataFrame, cols=CONTEXT) -> dict:
    return {c: d[c].iloc[0] for c in cols if c in d.columns and len(d) and d[c].nunique(dropna=False) == 1}


def mibs(size, seconds):
    """Throughput in MiB/s (2**20 bytes) of ``size`` bytes in ``seconds``; NaN if unusable."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(size, dtype=float) / np.asarray(seconds, dtype=float) / MIB
    out = np.where(np.isfinite(out) & (out > 0), out, np.nan)
    return out if out.ndim else float(out)


# --------------------------------------------------------------------------------- the table

def _assumptions(auto, best) -> str:
    """'AUTO: normality; BEST: independence': which compared t-interval's assumptions its
    repetitions reject (results/view.py), '' when none does."""
    said = [f"{who}: {flag}" for who, row in (("AUTO", auto), ("BEST", best))
            if (flag := t_flags(row)) and not (who == "BEST" and best is not None
                                               and auto is not None and best is auto)]
    return "; ".join(said)


def row_number(row, col):
    if row is None:
        return math.nan
    try:
        v = float(row[col])
    except (KeyError, TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def auto_vs_best(df: pd.DataFrame) -> pd.DataFrame:
    """The AUTO-vs-BEST table of a summary (see the module doc). Only ``native:*`` rows are
    considered. Columns: library, library_version, procs, the varying context columns, size,
    then ``TABLE_COLUMNS``; times in seconds, throughputs in MiB/s. ``attrs["context"]`` holds
    the context columns that are constant (e.g. ``{"dtype": "float64", ...}``)."""
    d = prepare(df)
    d = d[d["kind"] == "native"]  # AUTO and the forced algorithms, per delay condition
    ctx = varying(d)
    keys = ["library", "library_version", "procs", *ctx, "size"]
    ok = timed_mask(d)
    ran = "auto_ran" in d and d["auto_ran"].fillna("").astype(str).ne("").any()
    rows = []
    for key, g in d.groupby(keys, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        gt = g[ok.loc[g.index]]
        autos = g[g["algorithm"] == AUTO]
        a = autos.iloc[-1] if len(autos) else None
        a_timed = a is not None and bool(ok.loc[autos.index[-1]])
        b = fastest(g)
        am = row_number(a, "mean") if a_timed else math.nan
        al = row_number(a, "ci_low") if a_timed else math.nan
        ah = row_number(a, "ci_high") if a_timed else math.nan
        bm, bl, bh = row_number(b, "mean"), row_number(b, "ci_low"), row_number(b, "ci_high")
        size = float(row["size"])
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = am / bm if a_timed and b is not None else math.nan
            gain_low = al / bh if a_timed and bh > 0 else math.nan
            gain_high = ah / bl if a_timed and bl > 0 else math.nan
        if b is not None and b["algorithm"] == AUTO:
            gain_low = gain_high = 1.0  # AUTO is BEST: the gain is 1 by construction
        bad = g[~ok.loc[g.index]].sort_values("algorithm")
        crowded = is_oversubscribed(a) or is_oversubscribed(b)
        significant = bool(a_timed and b is not None and b["algorithm"] != AUTO and bh < al
                           and not crowded)
        if crowded:
            verdict = "oversubscribed"  # ranks shared cores: no win or loss is drawn
        elif b is None or not a_timed:
            verdict = "no data"
        elif b["algorithm"] == AUTO:
            verdict = "AUTO is BEST"
        else:
            verdict = "BEST faster" if significant else "tie"
        row.update({
            "auto_status": a["status"] if a is not None else "missing",
            "auto_mean": am, "auto_ci_low": al, "auto_ci_high": ah, "auto_mibs": mibs(size, am),
            "best_algorithm": b["algorithm"] if b is not None else "",
            "best_status": b["status"] if b is not None else "",
            "best_mean": bm, "best_ci_low": bl, "best_ci_high": bh, "best_mibs": mibs(size, bm),
            "gain": gain, "gain_low": gain_low, "gain_high": gain_high,
            # BEST is faster than AUTO beyond noise: the two 95% CIs do not overlap (never
            # drawn from an oversubscribed launch); otherwise the gain is a tie
            "significant": significant, "verdict": verdict, "oversubscribed": crowded,
            # the t-intervals the verdict compared, where their data reject what they assume
            "t_assumptions": _assumptions(a if a_timed else None, b),
            "n_algorithms": int(g["algorithm"].nunique()),
            "n_timed": int(gt["algorithm"].nunique()),
            "excluded": "; ".join(f"{r.algorithm} ({r.status})" for r in bad.itertuples()),
        })
        if ran:  # what AUTO ran (the auto_ran stage), where the summary says
            said = a.get("auto_ran") if a is not None else ""
            row["auto_ran"] = said if isinstance(said, str) else ""
        rows.append(row)
    out = pd.DataFrame(rows, columns=keys + TABLE_COLUMNS + (["auto_ran"] if ran else []))
    if len(out):
        out["_lib"] = out["library"].map(library_sort_key)
        out = out.sort_values(["_lib", "library_version", "procs", *ctx, "size"], kind="stable")
        out = out.drop(columns="_lib").reset_index(drop=True)
    out.attrs["context"] = constants(d)
    out.attrs["keys"] = keys
    out.attrs["statistic"] = str(d["statistic"].iloc[0]) if "statistic" in d and len(d) else "mean"
    return out


def harness_best(h: pd.DataFrame) -> pd.DataFrame:
    """Per (P, nodes, size) the fastest timed harness-algorithm row of ``h`` (``best.fastest``:
    ``algorithm`` names it), drawn beside AUTO and BEST."""
    best = [fastest(g) for _, g in h.groupby(["procs", "nodes", "size"])] if len(h) else []
    return h.loc[[b.name for b in best if b is not None]].sort_values("size")


def auto_choices(summary: pd.DataFrame) -> pd.DataFrame:
    """The AUTO-vs-BEST rows whose AUTO cell says what it ran (the summary's ``auto_ran``,
    from the campaign's auto_ran stage); empty when none does."""
    table = auto_vs_best(summary)
    if "auto_ran" not in table or table.empty:
        return pd.DataFrame()
    return table[table["auto_ran"] != ""].reset_index(drop=True)


def one_context(d: pd.DataFrame) -> dict:
    """The conditions of ``d``, which a figure cannot mix (ValueError when they vary)."""
    vary = varying(d, FIGURE_CONTEXT)
    if vary:
        combos = d[vary].drop_duplicates().to_dict("records")
        raise ValueError(f"the rows mix conditions {vary} ({len(combos)} combinations); filter "
                         f"to one of {combos[:4]}... (make splits them)")
    return constants(d, FIGURE_CONTEXT)


def figure_columns(d: pd.DataFrame) -> tuple[list, list]:
    """The (P, nodes) columns to draw, and those left out: a column with a time for AUTO alone
    compares nothing (counted in the title, not drawn, unless no column compares anything)."""
    cols = [tuple(c) for c in d[["procs", "nodes"]].drop_duplicates()
            .sort_values(["procs", "nodes"]).itertuples(index=False)]
    timed = d[timed_mask(d)]
    compared = [c for c in cols if timed[(timed["procs"] == c[0]) & (timed["nodes"] == c[1])]
                ["algorithm"].nunique() >= 2]
    return (compared, [c for c in cols if c not in compared]) if compared else (cols, [])


def figure_rows(df: pd.DataFrame, library: str) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """What a library's AUTO-vs-BEST figure draws of a summary: its own allreduce (AUTO, the
    forced algorithms, the selectors; ValueError when there is none), the conditions they share
    (``one_context``), and per (P, nodes, size) the fastest of its harness algorithms in those
    conditions (``harness_best``)."""
    full = prepare(df)
    full = full[full["library"] == library]
    d = full[full["kind"] != "harness"]
    h = full[full["kind"] == "harness"]
    if d.empty:
        raise ValueError(f"no native:* rows of library {library!r}")
    ctx = one_context(d)
    for col, v in ctx.items():  # harness rows in the figure's conditions only
        h = h[(h[col] == v) | (h[col].isna() & pd.isna(v))]
    return d, ctx, harness_best(h)


def figure_sets(prepared: pd.DataFrame, library: str) -> tuple[list[str], list, pd.DataFrame]:
    """A library's rows of a ``prepare``d summary as its AUTO-vs-BEST figures split them:
    ``(vary, sets, richest)``. ``vary``: the conditions of ``FIGURE_CONTEXT`` that vary among
    its native rows; ``sets``: per combination of them (sorted), its conditions and rows;
    ``richest``: the rows of the combination with the most timed cells (the first on ties), the
    library's main figure (empty: no native row). The library's harness-algorithm rows of the
    same P and sizes ride along in every set."""
    own = prepared[prepared["library"] == library]
    d = own[own["kind"] != "harness"]
    h = own[(own["kind"] == "harness") & own["procs"].isin(set(d["procs"]))
            & own["size"].isin(set(d["size"]))]
    vary = varying(d, FIGURE_CONTEXT)
    groups = [g for _, g in d.groupby(vary, dropna=False, sort=True)] if vary else [d]
    richest = max(groups, key=lambda g: int(timed_mask(g).sum()))
    sets = [(constants(g, FIGURE_CONTEXT), pd.concat([g, h])) for g in groups]
    return vary, sets, pd.concat([richest, h]) if len(d) else d


def untimed(d: pd.DataFrame) -> dict[str, str]:
    """The algorithms of ``d`` without a timed row, each with its statuses (``failed/timeout``)."""
    unplotted = set(d["algorithm"]) - set(d[timed_mask(d)]["algorithm"])
    rows = d[d["algorithm"].isin(unplotted)]
    return rows.groupby("algorithm")["status"].agg(lambda s: "/".join(sorted(set(map(str, s))))).to_dict()
