"""Tuned selection verified (``harness.campaign.tune_verify``): ``tables/tuned.{md,tex,csv}`` and
``figures/<c>/tuned_<library>.{png,pdf}``.

Per library, P and size: AUTO, tuned, BEST and (Intel MPI) the autotuner, each the mean of
its launch means with the paired 95 % interval of the ratios; held-out points (sizes or P the
campaign did not measure) are marked. The figure draws time against message size per P, in
the style of the AUTO-vs-BEST figures: AUTO black, tuned as a thick line, BEST and the
autotuner as markers; held-out points hollow.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..analysis.tuned import COLUMNS, load  # noqa: F401  (the verification's rows)
from ..cells import kind_of
from . import facets, style, tables
from .tables import format_size, format_time

CAPTION = ("AUTO vs the library following the campaign's tuning file (tuned), measured in fresh "
           "launches interleaved A T B .. B T A; gain = t_AUTO / t_tuned and tuned/BEST = "
           "t_tuned / t_BEST over paired launches, 95% CI; autotuner/tuned for Intel MPI's own "
           "autotuner. Held out: a size or P the campaign did not measure. Oversubscribed: "
           "more ranks than cores, no claim.")


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def ratio(r, key) -> str:
    """A paired ratio of ``r`` (``gain``, ...) with its 95% CI: ``1.23 [1.10, 1.37]``."""
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
            "gain AUTO/tuned [95% CI]": ratio(r, "gain"),
            "BEST": str(r.best).replace("native:", "") if isinstance(r.best, str) else "",
            "tuned/BEST [95% CI]": ratio(r, "vs_best"),
            "autotuner": _time(r.autotuner_mean),
            "autotuner/tuned [95% CI]": ratio(r, "vs_autotuner"),
            "verdict": "AUTO kept, " + r.verdict if r.expected == "auto" and r.verdict == "tie"
            else r.verdict})
    return pd.DataFrame(rows)


# the lines of a figure: AUTO, the tuned selection, Intel MPI's autotuner (series, column)
SERIES = {"native:auto": ("AUTO", "auto_mean"), "native:tuned": ("tuned", "tuned_mean"),
          "native:autotuner": ("autotuner", "autotuner_mean")}


def _best(ax, key, rows: pd.DataFrame, factor: float) -> None:
    """The campaign's BEST at each size: a star in its colour, named."""
    b = rows[(rows.series == "native:auto") & rows.best.map(
        lambda x: isinstance(x, str) and kind_of(x) == "native") & rows.best_mean.map(_num)]
    for r in b.itertuples(index=False):
        y = r.best_mean * factor
        ax.plot(r.size, y, marker="*", ms=9, ls="none", color=style.color(r.best), zorder=7)
        ax.annotate(style.short(r.best), (r.size, y), xytext=(3, -9), textcoords="offset points",
                    fontsize=6, color=style.text_color(r.best))


def figure(df: pd.DataFrame, library: str, path) -> list[Path]:
    """AUTO, tuned and autotuner against size, a panel per P; held-out points hollow."""
    d = df[df.library == library]
    title = f"{style.library_title(library)}: AUTO vs tuned, fresh interleaved launches"
    if d.empty or not d.tuned_mean.map(_num).any():
        return style.placeholder(path, title, "no verification launches carry a time")
    lines = pd.concat([d.assign(series=name, mean=pd.to_numeric(d[col], errors="coerce"),
                                ci_low=math.nan, ci_high=math.nan)
                       for name, (_, col) in SERIES.items()], ignore_index=True)
    crowded = set(d.loc[d.oversubscribed.fillna(False).astype(bool), "procs"])
    spec = facets.Spec(
        x="size", series="series", cols="procs", ci="none", hollow="held_out",
        hollow_note="hollow: held out (a size or P the campaign did not measure)",
        label=lambda s: SERIES[s][0], order=lambda s: [k for k in SERIES if k in s],
        panel_title=lambda k: f"P = {int(k['procs'])}" + (
            " (oversubscribed: no claim)" if k["procs"] in crowded else ""),
        notes=("star: the campaign's BEST at that size",), title=title, after=_best)
    return facets.figure(spec, lines[lines["mean"].notna()], path)


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
