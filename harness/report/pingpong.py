"""Ping-pong and local reduction (Castelló et al., Fig. 4; Bienz et al., Fig. 5) from summary.csv.

The ``pingpong`` rows (``harness/algorithms/p2p_bench.py``) hold the one-way time of ``size``
bytes between the two ranks of a pair, with k pairs at once, and the pair's level (socket,
node, network); the ``reduce_local`` rows hold the time of one local reduction of ``size``
bytes. Outputs:

- ``tables/pingpong.{md,tex,csv}``: per library, level and k, the one-way time (mean, 95 % CI,
  median) and bandwidth (size / one-way time, per pair) per size; then per library the local reduction's
  time and bytes/s per size (dtype and op of the cell);
- ``figures/<c>/pingpong_fig4.{png,pdf}``: left, the bandwidth of one pair against the size,
  a line per library and level; right, the per-pair bandwidth against the size, a line per
  library and k (Castelló's 4 concurrent pairs), or, when every row has k = 1, the local
  reduction's bytes/s against the size (the gamma of the models).

Failed, wrong and timeout cells are listed in the table without a time; oversubscribed rows
are marked and carry no claim. The rows: ``harness/analysis/pingpong.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.pingpong import rows
from ..analysis.vocabulary import is_timed
from ..units import format_size, format_time
from . import style, tables

TABLE = "pingpong"
FIGURE = "pingpong_fig4"
LIB_COLOURS = {"mpich": "#1f77b4", "openmpi": "#d62728", "impi": "#2ca02c"}
LIB_MARKERS = {"mpich": "o", "openmpi": "s", "impi": "D"}
LEVEL_STYLES = {"socket": ":", "node": "-", "network": "--", "mixed": "-."}
PAIR_STYLES = ["-", "--", ":", "-."]
CAPTION = ("Ping-pong one-way time (round trip / 2, mean over the k concurrent pairs) and "
           "per-pair bandwidth size / time, per library, level and k; local reduction "
           "recv = send op recv: time and bytes/s per rank (Castelló et al., Fig. 4).")


def _rate(bps: float) -> str:
    """Bytes per second as text: ``812 MiB/s``, ``3.41 GiB/s``."""
    if not (isinstance(bps, (int, float)) and math.isfinite(bps) and bps > 0):
        return ""
    if bps >= 2**30:
        return f"{bps / 2**30:.2f} GiB/s"
    if bps >= 2**20:
        return f"{bps / 2**20:.0f} MiB/s" if bps >= 100 * 2**20 else f"{bps / 2**20:.1f} MiB/s"
    return f"{bps / 2**10:.1f} KiB/s"


def table(df: pd.DataFrame) -> tuple[list[str], list[list[str]], pd.DataFrame]:
    """(header, formatted rows, numeric table) of ``tables/pingpong``."""
    d = rows(df)
    header = ["benchmark", "library", "level", "k", "P", "size", "time", "95% CI", "median",
              "bandwidth", "n", "status"]
    body, numeric = [], []
    for _, r in d.iterrows():
        timed = is_timed(r)
        ci = (f"{format_time(r.ci_low)} – {format_time(r.ci_high)}"
              if timed and math.isfinite(float(r.get("ci_low", np.nan))) else "")
        bench = ("one-way" if r.algorithm == "pingpong"
                 else f"reduce_local {r['dtype']} {r['op']}")
        status = str(r.status) + (" (oversubscribed)" if r.oversubscribed else "")
        body.append([bench, style.library_title(r.library), str(r.level),
                     str(r.pairs) if r.algorithm == "pingpong" else "",
                     str(int(r.procs)), format_size(int(r["size"])),
                     format_time(r["mean"]) if timed else "", ci,
                     format_time(float(r["median"])) if timed and pd.notna(r.get("median")) else "",
                     _rate(r.bytes_per_s) if timed else "",
                     str(int(r.n)) if pd.notna(r.get("n")) else "", status])
        numeric.append({"benchmark": r.algorithm, "library": r.library, "level": r.level,
                        "pairs": r.pairs if r.algorithm == "pingpong" else None,
                        "procs": int(r.procs), "size": int(r["size"]), "dtype": r["dtype"],
                        "op": r["op"], "mean_s": r["mean"] if timed else None,
                        "ci_low_s": r.get("ci_low") if timed else None,
                        "ci_high_s": r.get("ci_high") if timed else None,
                        "median_s": r.get("median") if timed else None,
                        "bytes_per_s": r.bytes_per_s if timed else None,
                        "n": r.get("n"), "status": r.status, "bound": r.bound,
                        "oversubscribed": bool(r.oversubscribed), "cell_id": r.cell_id})
    return header, body, pd.DataFrame(numeric)


def _lines(ax, d: pd.DataFrame, label_of, style_of) -> int:
    drawn = 0
    for key, g in d.groupby(["library", "level", "pairs"], sort=False):
        g = g[g.bytes_per_s.notna()].sort_values("size")
        if g.empty:
            continue
        lib = key[0]
        ax.plot(g["size"], g.bytes_per_s / 2**20, marker=LIB_MARKERS.get(lib, style.marker(lib)), markersize=4,
                linestyle=style_of(key), color=LIB_COLOURS.get(lib, style.color(lib)),
                label=label_of(key) + (" (oversubscribed)" if g.oversubscribed.any() else ""))
        drawn += 1
    return drawn


def _axes(ax, title: str, ylabel: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ticks = ax.get_xticks()
    lo, hi = ax.get_xlim()
    ticks = [t for t in ticks if lo <= t <= hi and t >= 1]
    ax.set_xticks(ticks, [format_size(int(t)) for t in ticks], rotation=30)


def figure(df: pd.DataFrame, path_without_ext) -> list[Path]:
    """``pingpong_fig4.{png,pdf}`` (see the module docstring)."""
    from matplotlib.figure import Figure

    d = rows(df)
    pp = d[d.algorithm == "pingpong"]
    rl = d[d.algorithm == "reduce_local"]
    title = "Ping-pong bandwidth (Castelló et al., Fig. 4)"
    if pp.bytes_per_s.notna().sum() == 0 and rl.bytes_per_s.notna().sum() == 0:
        return style.placeholder(path_without_ext, title, "no timed pingpong or reduce_local "
                                 "cell in the summary")
    style.setup()
    fig = Figure(figsize=(10.0, 4.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    one = pp[pp.pairs == 1]
    if _lines(left, one, lambda k: f"{style.library_title(k[0])}, {k[1]}",
              lambda k: LEVEL_STYLES.get(k[1], "-")):
        _axes(left, "one pair: size / one-way time", "MiB/s")
        left.legend(fontsize=7)
    else:
        left.set_axis_off()
        left.text(0.5, 0.5, "no timed single-pair ping-pong", ha="center", va="center")
    ks = sorted(set(pp.pairs))
    if len(ks) > 1:
        order = {k: i for i, k in enumerate(ks)}
        _lines(right, pp, lambda k: f"{style.library_title(k[0])}, {k[1]}, k={k[2]}",
               lambda k: PAIR_STYLES[order[k[2]] % len(PAIR_STYLES)])
        _axes(right, "k concurrent pairs: per-pair bandwidth", "MiB/s per pair")
        right.legend(fontsize=7)
    elif _lines(right, rl.assign(level=rl["dtype"] + " " + rl["op"]),
                lambda k: f"{style.library_title(k[0])}, {k[1]}", lambda k: "-"):
        _axes(right, "local reduction (gamma): size / time", "MiB/s")
        right.legend(fontsize=7)
    else:
        right.set_axis_off()
        right.text(0.5, 0.5, "one pair only and no local reduction", ha="center", va="center")
    fig.suptitle(title)
    return style.save(fig, path_without_ext)


def make(inputs) -> list[Path]:
    """Write the table and the figure; returns the paths."""
    df = inputs.summary
    header, body, numeric = table(df)
    written = tables.write_table(numeric, inputs.tables / TABLE, CAPTION, header=header,
                                 rows=body)
    return written + figure(df, inputs.figures / FIGURE)
