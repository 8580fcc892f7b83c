"""Every timed allreduce cell against its lower bound (``tables/bound``): ``bound`` (Chan et
al. 2007 with the campaign's ping-pong fit, ``harness.analysis.bound``) and ``bound_ratio`` =
time / bound per cell in the CSV; the Markdown and LaTeX give, per installation, P and
algorithm, the median ratio over the sizes and its smallest and largest."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis.auto_vs_best import prepare
from ..analysis.best import timed_mask
from ..analysis.bound import add_bounds
from ..results.summary import allreduce_rows
from . import style, tables

TITLE = ("Time against the lower bound ceil(log2 P) alpha + 2(P-1)/P n beta + (P-1)/P n gamma "
         "(Chan et al. 2007; alpha, beta, gamma: the campaign's ping-pong fit)")


def make(inputs) -> list[Path]:
    d = prepare(allreduce_rows(inputs.summary))
    d = d[timed_mask(d)]
    doc = inputs.params or {}
    cols = ["library", "library_version", "algorithm", "procs", "nodes", "size", "dtype", "op",
            "delay", "mean", "oversubscribed"]
    t = add_bounds(d[cols], doc) if len(d) else pd.DataFrame(columns=cols + ["bound", "bound_ratio", "bound_level"])
    t = t[t["size"] > 0]
    rows = []
    keyed = t.dropna(subset=["bound_ratio"])
    for (lib, ver, procs, nodes, alg), g in keyed.groupby(
            ["library", "library_version", "procs", "nodes", "algorithm"], sort=False):
        r = g["bound_ratio"]
        crowded = bool(g["oversubscribed"].any())
        below = int((r < 1).sum())
        rows.append([style.library_label(lib, ver), str(int(procs)), str(int(nodes)),
                     tables.algorithm_label(alg),
                     str(len(g)), f"{r.median():.2f}×", f"{r.min():.2f}×", f"{r.max():.2f}×",
                     str(below) if below else "",
                     g["bound_level"].iloc[0] + (" ‡" if crowded else "")])
    header = ["Library", "P", "Nodes", "Algorithm", "Sizes", "Median time/bound", "Smallest",
              "Largest", "Below the bound", "Link"]
    return tables.write_table(
        t, inputs.tables / "bound", TITLE, header=header, rows=rows, align="lrrlrrrrrl",
        placeholder="no timed cell with a fitted ping-pong of its library",
        md_note="time/bound: 1 would be optimal; the CSV gives every cell's bound (s) and ratio. "
                "Link: the ping-pong level whose alpha and beta the bound uses (network across "
                "nodes; node or socket for ranks sharing one). Below the bound: sizes whose time "
                "is under it, where the fitted alpha or beta overstate what the link can do (a fit, "
                "not a minimum: e.g. a ping-pong latency that carries more Python overhead than one "
                "allreduce call, or a noisy fit); there the ratio is not a distance from the optimum. "
                "‡ oversubscribed cells.\n")
