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

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.pingpong import numeric, rows
from ..analysis.vocabulary import is_timed
from ..units import format_size, format_time
from . import facets, style, tables

TABLE = "pingpong"
FIGURE = "pingpong_fig4"
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
    body = []
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
    return header, body, numeric(d)


def _panel(ax, d: pd.DataFrame, label_of, style_of, title: str, ylabel: str) -> bool:
    """MiB/s against size, a line per (library, level, k) in the library's colour and the
    line style ``style_of(key)``; False (and a blank panel) when no row has a time."""
    d = d[d.bytes_per_s.notna()]
    if d.empty:
        return False
    keys = list(zip(d["library"], d["level"], d["pairs"]))
    d = d.assign(mibs=d.bytes_per_s / 2**20, line=["|".join(map(str, k)) for k in keys])
    key = dict(zip(d["line"], keys))
    spec = facets.Spec(
        x="size", y="mibs", series="line", ci="none", order=list, ylabel=ylabel,
        look=lambda x: dataclasses.replace(facets.library_look(key[x][0]), ls=style_of(key[x])),
        label=lambda x: label_of(key[x]))
    handles = facets.panel(ax, spec, d)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend(list(handles.values()), list(handles), fontsize=7)
    return True


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
    if not _panel(left, pp[pp.pairs == 1], lambda k: f"{style.library_title(k[0])}, {k[1]}",
                  lambda k: LEVEL_STYLES.get(k[1], "-"), "one pair: size / one-way time",
                  "MiB/s"):
        facets.blank(left, "no timed single-pair ping-pong")
    ks = {k: i for i, k in enumerate(sorted(set(pp.pairs)))}
    if len(ks) > 1:
        _panel(right, pp, lambda k: f"{style.library_title(k[0])}, {k[1]}, k={k[2]}",
               lambda k: PAIR_STYLES[ks[k[2]] % len(PAIR_STYLES)],
               "k concurrent pairs: per-pair bandwidth", "MiB/s per pair")
    elif not _panel(right, rl.assign(level=rl["dtype"] + " " + rl["op"]),
                    lambda k: f"{style.library_title(k[0])}, {k[1]}", lambda k: "-",
                    "local reduction (gamma): size / time", "MiB/s"):
        facets.blank(right, "one pair only and no local reduction")
    fig.suptitle(title)
    return style.save(fig, path_without_ext)


def make(inputs) -> list[Path]:
    """Write the table and the figure; returns the paths."""
    df = inputs.summary
    header, body, numeric = table(df)
    written = tables.write_table(numeric, inputs.tables / TABLE, CAPTION, header=header,
                                 rows=body)
    return written + figure(df, inputs.figures / FIGURE)
