"""The performance-guidelines report: per library, P and size, AUTO against the mock-ups
made of the library's own other collectives (Reduce + Bcast, Reduce_scatter + Allgatherv,
two Allreduces of half the vector; ``harness.analysis.guidelines``). A violation (the mock-up
faster than AUTO, the 95 % intervals apart) is a performance bug of the library's selection.

``tables/guidelines.{md,tex,csv}``: every comparison, the violations first, with the speedup
t_AUTO / t_mock-up; ``figures/<c>/guidelines.{png,pdf}``: per library, that speedup against
message size, one line per mock-up and P, filled markers where the guideline is violated.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..analysis.guidelines import comparisons
from . import style, tables
from .figures import size_ticks
from .tables import format_size

CAPTION = ("Performance guidelines: each library's AUTO against mock-ups made of its own "
           "collectives. Speedup = t_AUTO / t_mock-up; violation: the mock-up is faster with "
           "non-overlapping 95% CIs (a performance bug of the library's selection); holds: "
           "slower with non-overlapping CIs; tie: the CIs overlap; oversubscribed: no claim.")
LABELS = {"reduce_bcast": "Reduce+Bcast", "reduce_scatter_allgather": "Reduce_scatter+Allgather",
          "allreduce_halves": "2 x Allreduce(n/2)"}
ORDER = {"violation": 0, "holds": 1, "tie": 2, "oversubscribed": 3, "no data": 4}


def _us(x) -> str:
    return f"{x * 1e6:.2f}" if isinstance(x, (int, float)) and math.isfinite(x) else ""


def write(t: pd.DataFrame, tables_dir) -> list[Path]:
    t = t.assign(_o=t["verdict"].map(ORDER)).sort_values(
        ["_o", "library", "procs", "size"], kind="stable").drop(columns="_o")
    header = ["library", "P", "size", "AUTO (us)", "mock-up", "mock-up (us)", "speedup",
              "verdict"]
    rows = [[style.library_title(r.library), str(r.procs),
             format_size(r.size) + (" rotated" if r.buffers == "rotate" else ""), _us(r.auto_mean),
             LABELS.get(r.mock_up, r.mock_up), _us(r.mock_mean),
             f"{r.speedup:.2f}" if math.isfinite(r.speedup) else "", r.verdict]
            for r in t.itertuples()]
    violations = int((t["verdict"] == "violation").sum())
    caption = CAPTION + (f" {violations} violation(s)." if len(t) else " No cell has both.")
    return tables.write_table(t, Path(tables_dir) / "guidelines", caption, header=header,
                              rows=rows, align="lrrrlrrl",
                              placeholder="no cell with AUTO and a mock-up")


def figure(t: pd.DataFrame, path) -> list[Path]:
    d = t[t["verdict"].isin(["violation", "holds", "tie"])]
    if d.empty:
        return style.placeholder(path, "Performance guidelines",
                                 "no cell where AUTO and a mock-up both have a time on "
                                 "enough cores")
    from matplotlib.figure import Figure

    style.setup()
    libs = sorted(d["library"].unique())
    fig = Figure(figsize=(3.6 * len(libs), 3.0), layout="constrained")
    axes = fig.subplots(1, len(libs), squeeze=False, sharey=True)[0]
    markers = {"reduce_bcast": "o", "reduce_scatter_allgather": "s", "allreduce_halves": "^"}
    for ax, lib in zip(axes, libs):
        mine = d[d["library"] == lib]
        for (mock, procs, buffers), g in mine.groupby(["mock_up", "procs", "buffers"], sort=True):
            g = g.sort_values("size")
            colour = style.color(mock)
            cold = buffers == "rotate"
            ax.plot(g["size"], g["speedup"], color=colour, lw=1, alpha=0.8, ls="--" if cold else "-",
                    label=f"{LABELS.get(mock, mock)}, P={procs}" + (", rotated" if cold else ""))
            bad = g["verdict"] == "violation"
            ax.scatter(g["size"], g["speedup"], marker=markers.get(mock, "o"), s=22,
                       facecolors=[colour if b else "white" for b in bad], edgecolors=colour,
                       zorder=3)
        ax.axhline(1.0, color="0.3", lw=0.8)
        size_ticks(ax, sorted(mine["size"].unique()))
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(style.PLAIN_TICKS)
        ax.yaxis.set_minor_formatter(style.PLAIN_TICKS)
        ax.set_title(style.library_title(lib))
        ax.set_xlabel("message size")
        ax.legend(fontsize=6, loc="best")
    axes[0].set_ylabel("t_AUTO / t_mock-up (log)\nabove 1: mock-up faster")
    fig.suptitle("Performance guidelines (filled: violated, 95% CIs apart)", fontsize=9)
    return style.save(fig, path)


def make(inputs) -> list[Path]:
    t = comparisons(inputs.summary)
    return write(t, inputs.tables) + figure(t, inputs.figures / "guidelines")
