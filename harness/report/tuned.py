"""Tuned selection verified (``harness.campaign.tune_verify``): ``tables/tuned.{md,tex,csv}`` and
``figures/<c>/tuned_<library>.{png,pdf}``.

Per library, P and size: AUTO, tuned, BEST and (Intel MPI) the autotuner, each the mean of
its launch means with the paired 95 % interval of the ratios; held-out points (sizes or P the
campaign did not measure) are marked. The figure draws time against message size per P, in
the style of the AUTO-vs-BEST figures: AUTO black, tuned as a thick line, BEST and the
autotuner as markers; held-out points hollow.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ..cells import kind_of
from . import style, tables
from .tables import format_size, format_time

COLUMNS = ["library", "procs", "size", "held_out", "expected", "auto_mean", "tuned_mean",
           "gain", "gain_ci_low", "gain_ci_high", "best", "best_mean", "vs_best",
           "vs_best_ci_low", "vs_best_ci_high", "autotuner_mean", "vs_autotuner",
           "vs_autotuner_ci_low", "vs_autotuner_ci_high", "pairs", "oversubscribed", "verdict"]
CAPTION = ("AUTO vs the library following the campaign's tuning file (tuned), measured in fresh "
           "launches interleaved A T B .. B T A; gain = t_AUTO / t_tuned and tuned/BEST = "
           "t_tuned / t_BEST over paired launches, 95% CI; autotuner/tuned for Intel MPI's own "
           "autotuner. Held out: a size or P the campaign did not measure. Oversubscribed: "
           "more ranks than cores, no claim.")


def load(paths) -> pd.DataFrame:
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


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _ratio(r, key) -> str:
    g, lo, hi = r[key], r[f"{key}_ci_low"], r[f"{key}_ci_high"]
    if not _num(g):
        return ""
    return f"{g:.2f} [{lo:.2f}, {hi:.2f}]" if _num(lo) and _num(hi) else f"{g:.2f}"


def _time(x) -> str:
    return format_time(x)[0] if _num(x) else ""


def display(df: pd.DataFrame) -> pd.DataFrame:
    """The table as printed: one row per point, times with units, ratios with their CI."""
    rows = []
    for _, r in df.iterrows():
        rows.append({
            "library": style.library_title(r.library), "P": str(int(r.procs)),
            "size": format_size(r["size"]) + (" (held out)" if r.held_out else ""),
            "tuned runs": str(r.expected).replace("native:", ""),
            "AUTO": _time(r.auto_mean), "tuned": _time(r.tuned_mean),
            "gain AUTO/tuned [95% CI]": _ratio(r, "gain"),
            "BEST": str(r.best).replace("native:", "") if isinstance(r.best, str) else "",
            "tuned/BEST [95% CI]": _ratio(r, "vs_best"),
            "autotuner": _time(r.autotuner_mean),
            "autotuner/tuned [95% CI]": _ratio(r, "vs_autotuner"),
            "verdict": "AUTO kept, " + r.verdict if r.expected == "auto" and r.verdict == "tie"
            else r.verdict})
    return pd.DataFrame(rows)


def figure(df: pd.DataFrame, library: str, path) -> list[Path]:
    from matplotlib.figure import Figure  # no pyplot: the workflow draws in threads

    d = df[df.library == library]
    if d.empty or not d.tuned_mean.map(_num).any():
        return style.placeholder(path, f"{style.library_title(library)}: tuned vs AUTO",
                                 "no verification launches carry a time")
    style.setup()
    procs = sorted(int(p) for p in d.procs.unique())
    fig = Figure(figsize=(3.4 * len(procs), 3.0))
    axes = fig.subplots(1, len(procs), squeeze=False)
    for ax, p in zip(axes[0], procs):
        g = d[d.procs == p].sort_values("size")
        series = [("AUTO", "auto_mean", style.AUTO_COLOR, "o", 1.0),
                  ("tuned", "tuned_mean", "#d62728", "s", 2.2)]
        if g.autotuner_mean.map(_num).any():
            series.append(("autotuner", "autotuner_mean", "#9467bd", "^", 1.0))
        for label, col, color, mk, lw in series:
            ax.plot(g["size"], g[col] * 1e6, color=color, lw=lw, label=label, zorder=2)
            for held, fill in ((False, color), (True, "white")):
                h = g[g.held_out == held]
                ax.plot(h["size"], h[col] * 1e6, ls="none", marker=mk, color=color,
                        markerfacecolor=fill, ms=5, zorder=3)
        b = g[g.best.map(lambda x: isinstance(x, str) and kind_of(x) == "native")]
        for _, r in b.iterrows():
            if _num(r.best_mean):
                ax.plot(r["size"], r.best_mean * 1e6, marker="*", ms=9, ls="none",
                        color=style.color(r.best), zorder=4)
                ax.annotate(style.short(r.best), (r["size"], r.best_mean * 1e6), xytext=(3, -9),
                            textcoords="offset points", fontsize=6, color=style.color(r.best))
        crowded = bool(g.oversubscribed.fillna(False).astype(bool).any())
        ax.set_title(f"P={p}" + (" (oversubscribed)" if crowded else ""), fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (B)")
    axes[0][0].set_ylabel("time per call (us)")
    axes[0][0].plot([], [], marker="*", ls="none", color="0.3", label="BEST (campaign's)")
    axes[0][0].plot([], [], marker="o", ls="none", color="0.3", markerfacecolor="white",
                    label="held out")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{style.library_title(library)}: AUTO vs tuned, fresh interleaved launches",
                 fontsize=9)
    fig.tight_layout()
    return style.save(fig, path)


def make(inputs) -> list[Path]:
    """The table and each library's figure (``inputs.libraries``) from the verification's
    documents (``inputs.documents``: ``tuning/verify-<library>.json``)."""
    df = load([p for p in inputs.documents if Path(p).is_file()])
    # the csv: the numbers, times in seconds
    written = tables.write_table(df, inputs.tables / "tuned", CAPTION,
                                 **tables.cells_of(display(df)))
    for lib in inputs.libraries:
        written += figure(df, lib, inputs.figures / f"tuned_{lib}")
    return written
