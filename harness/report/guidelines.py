"""The performance-guidelines report: per library, P and size, AUTO against the mock-ups
made of the library's own other collectives (Reduce + Bcast, Reduce_scatter + Allgatherv,
two Allreduces of half the vector; ``harness.analysis.guidelines``). A violation (the mock-up
faster than AUTO, the 95 % intervals apart) is a performance bug of the library's selection.

``tables/guidelines.{md,tex,csv}``: every comparison, the violations first, with the speedup
t_AUTO / t_mock-up; ``figures/<c>/guidelines.{png,pdf}``: per library, that speedup against
message size, one line per mock-up and P, filled markers where the guideline is violated.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis.guidelines import comparisons
from . import facets, style, tables
from ..units import format_number, format_size

CAPTION = ("Performance guidelines: each library's AUTO against mock-ups made of its own "
           "collectives. Speedup = t_AUTO / t_mock-up; violation: the mock-up is faster with "
           "non-overlapping 95% CIs (a performance bug of the library's selection); holds: "
           "slower with non-overlapping CIs; tie: the CIs overlap; oversubscribed: no claim.")
LABELS = {"reduce_bcast": "Reduce+Bcast", "reduce_scatter_allgather": "Reduce_scatter+Allgather",
          "allreduce_halves": "2 x Allreduce(n/2)"}
ORDER = {"violation": 0, "holds": 1, "tie": 2, "oversubscribed": 3, "no data": 4}


def write(t: pd.DataFrame, tables_dir) -> list[Path]:
    t = t.assign(_o=t["verdict"].map(ORDER)).sort_values(
        ["_o", "library", "procs", "size"], kind="stable").drop(columns="_o")
    header = ["library", "P", "size", "AUTO (us)", "mock-up", "mock-up (us)", "speedup",
              "verdict"]
    rows = [[style.library_title(r.library), str(r.procs),
             format_size(r.size) + (" rotated" if r.buffers == "rotate" else ""),
             format_number(r.auto_mean, scale=1e6), LABELS.get(r.mock_up, r.mock_up),
             format_number(r.mock_mean, scale=1e6), format_number(r.speedup), r.verdict]
            for r in t.itertuples()]
    violations = int((t["verdict"] == "violation").sum())
    caption = CAPTION + (f" {violations} violation(s)." if len(t) else " No cell has both.")
    return tables.write_table(t, Path(tables_dir) / "guidelines", caption, header=header,
                              rows=rows, layout=tables.Layout(
                                  align="lrrrlrrl", placeholder="no cell with AUTO and a mock-up"))


def _line(line: str) -> tuple[str, int, str]:
    mock, procs, buffers = line.split("|")
    return mock, int(procs), buffers


def _look(line: str) -> facets.Look:
    mock, _, buffers = _line(line)
    return facets.Look(style.color(mock), style.marker(mock), "--" if buffers == "rotate" else "-",
                       lw=1.0, ms=4.5)


def _label(line: str) -> str:
    mock, procs, buffers = _line(line)
    return f"{LABELS.get(mock, mock)}, P={procs}" + (", rotated" if buffers == "rotate" else "")


def figure(t: pd.DataFrame, path) -> list[Path]:
    """AUTO's time over each mock-up's against size, a panel per library, a line per mock-up,
    P and buffers; filled where the guideline is violated (95% CIs apart)."""
    d = t[t["verdict"].isin(["violation", "holds", "tie"])]
    d = d.assign(line=[f"{m}|{int(p)}|{b}" for m, p, b in zip(d["mock_up"], d["procs"],
                                                              d["buffers"])],
                 holds=d["verdict"] != "violation")
    spec = facets.Spec(
        x="size", y="speedup", series="line", cols="library", ci="none", reference=1.0,
        hollow="holds", hollow_note="hollow: the guideline holds or ties (filled: violated, "
        "95% CIs apart)", look=_look, label=_label, order=lambda x: sorted(x, key=_line),
        ylabel="t_AUTO / t_mock-up (log)\nabove 1: mock-up faster",
        panel_title=lambda k: style.library_title(k["library"]), title="Performance guidelines")
    return facets.figure(spec, d, path, empty="no cell where AUTO and a mock-up both have a "
                         "time on enough cores")


def make(inputs) -> list[Path]:
    t = comparisons(inputs.summary)
    return write(t, inputs.tables) + figure(t, inputs.figures / "guidelines")
