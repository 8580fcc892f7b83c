"""Training-iteration workloads (Castelló et al. 2021, Sect. 5, Figs. 9-10) from summary.csv
(the rows, AUTO, BEST and images/s: ``harness/analysis/workload.py``).

A workload row (``harness.dnn.workload``) times one training iteration's gradient
communication: every allreduce call of the model's fused trace, back to back. Per library,
P and workload (model, fusion policy, precision) the table gives AUTO, BEST (the native
algorithm with the lowest iteration time, AUTO included) and the gain, and projects
images per second for the workload's batch per rank::

    images/s = batch * P / (compute + communication)       no overlap
    images/s = batch * P / max(compute, communication)     full overlap (an upper bound)

``compute`` is the ``workload.compute`` of the config (0: communication only, and the two
projections agree). Outputs:

- ``tables/workload.{md,tex,csv}``: AUTO vs BEST per library (Fig. 9's data);
- ``tables/workload_normalised.{md,tex,csv}``: every library's AUTO and BEST images/s
  divided by the reference library's AUTO (Fig. 10, right);
- ``figures/<c>/workload_fig9.{png,pdf}``: AUTO vs BEST images/s per library (Fig. 9);
- ``figures/<c>/workload_fig10.{png,pdf}``: BEST over the library's own AUTO (Fig. 10,
  left) and every library over the reference AUTO (Fig. 10, right).

A gain is called only when the two 95 % CIs do not overlap; oversubscribed rows carry no
claim.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis.workload import KEYS, REFERENCE, normalised, rows, table  # noqa: F401
from ..analysis.workload import images_errors
from . import style, tables
from ..units import format_number
from .dnn_traces import make_fig7


def _label(r) -> str:
    return f"{r['model']} {r['fusion']} {r['precision']}"


CAPTION = ("One training iteration's gradient communication (every allreduce call of the "
           "model's fused gradient trace, back to back), AUTO vs BEST per library. Times are "
           "means with their 95% CI; Gain = AUTO / BEST, bold when the CIs do not overlap. "
           "images/s = batch x P / (compute + communication); 'overlap' uses max(compute, "
           "communication), an upper bound. † not converged. ‡ oversubscribed: no claim.")


def _display(t: pd.DataFrame) -> tuple[list[str], list[list]]:
    header = ["Library", "P", "Workload", "Calls", "Per iteration", "AUTO", "95% CI", "BEST",
              "BEST time", "95% CI", "Gain", "img/s AUTO", "img/s BEST", "img/s BEST (overlap)"]
    out = []
    for r in t.to_dict("records"):
        dag = lambda s: " †" if s == "not-converged" else ""  # noqa: E731
        _, aci = tables.format_time(r["auto_mean"], r["auto_ci_low"], r["auto_ci_high"])
        _, bci = tables.format_time(r["best_mean"], r["best_ci_low"], r["best_ci_high"])
        g = r["gain"]
        gain = (f"{g:.2f}×" if math.isfinite(g) else "n/a") + (" (tie)" if r["verdict"] == "tie"
                                                               else "")
        if r["significant"]:
            gain = f"**{gain}**"
        if r["oversubscribed"]:
            gain += " ‡"
        gain = {"text": gain, "tex": gain.replace("**", "")}  # LaTeX: not bold
        out.append([
            style.library_label(r["library"], r["library_version"]), str(int(r["procs"])),
            _label(r) + f" b={int(r['batch'])}", str(r["calls"]), f"{r['size'] / 2**20:.1f} MiB",
            (tables.format_time(r["auto_mean"])[0] or r["auto_status"]) + dag(r["auto_status"]), aci,
            tables.algorithm_label(r["best_algorithm"]) if r["best_algorithm"] else "none",
            tables.format_time(r["best_mean"])[0] + dag(r["best_status"]), bci, gain,
            format_number(r["auto_images"], ".1f"), format_number(r["best_images"], ".1f"),
            format_number(r["best_images_overlap"], ".1f"),
        ])
    return header, out


def grouped_bars(ax, groups: list[str], series: list[tuple[str, list, list, str, str]]) -> None:
    """Grouped bars: ``series`` of (label, values, (low, high) errors, colour, hatch)."""
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    for i, (label, vals, err, colour, hatch) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width, yerr=err, label=label,
               color=colour, hatch=hatch, edgecolor="white" if not hatch else "0.2",
               linewidth=0.5, error_kw={"elinewidth": 0.7, "ecolor": "0.25"})
    ax.set_xticks(x, groups, rotation=20, ha="right")


AUTO_BEST = {" AUTO": ("auto", "//"), " BEST": ("best", "")}  # legend suffix: (who, hatch)


def _library_bars(ax, d: pd.DataFrame, groups, columns: dict, ylabel: str, title: str,
                  err=None) -> None:
    """Each library's bars per workload, in its colour: ``columns`` {legend suffix: (column
    prefix, hatch)}; ``err(rows, who)`` their error bars; the legend on the right."""
    d = d.assign(g=[_label(r) for r in d.to_dict("records")])
    series = []
    for lib in sorted(d.library.unique(), key=style.library_sort_key):
        x = d[d.library == lib].set_index("g").reindex(groups)
        series += [(style.library_title(lib) + suffix, x[col].to_numpy(float),
                    err(x.reset_index(), col) if err else None, style.library_color(lib), hatch)
                   for suffix, (col, hatch) in columns.items()]
    grouped_bars(ax, groups, series)
    if not err:
        ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)


def _grid(t: pd.DataFrame, columns: int, width: float):
    style.setup()
    fig = Figure(figsize=(columns * (width + 0.9 * t.groupby(["model", "fusion", "precision"])
                                     .ngroups), 2.9 * t.procs.nunique()), layout="constrained")
    return fig, fig.subplots(t.procs.nunique(), columns, squeeze=False)


def figure_images(t: pd.DataFrame, base: Path) -> list[Path]:
    """Fig. 9: images/s of AUTO and BEST, a panel per P, the libraries side by side."""
    title = "Training iteration: images/s with AUTO and BEST (Castelló et al., Fig. 9 style)"
    if t.empty:
        return style.placeholder(base, title, "no workload cells with a time")
    fig, axes = _grid(t, 1, 3.2)
    images = {k: (f"{who}_images", h) for k, (who, h) in AUTO_BEST.items()}
    for (ax,), p in zip(axes, sorted(t.procs.unique())):
        d = t[t.procs == p]
        compute = sorted(d.iteration_compute.unique())
        _library_bars(ax, d, sorted({_label(r) for r in d.to_dict("records")}), images,
                      "images/s (projected)",
                      f"P = {p}, batch {', '.join(str(int(b)) for b in sorted(d.batch.unique()))}"
                      f" per rank, compute {', '.join(tables.format_time(c)[0] or '0' for c in compute)}"
                      + (" (communication only)" if compute == [0.0] else ""),
                      err=lambda x, col: images_errors(x, col.split("_")[0]))
    fig.suptitle(title)
    return style.save(fig, base)


def figure_normalised(t: pd.DataFrame, n: pd.DataFrame, base: Path) -> list[Path]:
    """Fig. 10: left, BEST over the library's own AUTO; right, AUTO and BEST of every
    library over the reference library's AUTO."""
    title = "Training iteration, normalised (Castelló et al., Fig. 10 style)"
    if t.empty or n.empty:
        return style.placeholder(base, title, "no workload cells with a time")
    fig, axes = _grid(t, 2, 2.4)
    ref = style.library_title(n.reference.iloc[0])
    for (left, right), p in zip(axes, sorted(t.procs.unique())):
        d = t[t.procs == p].assign(gain=lambda q: q.best_images / q.auto_images)
        groups = sorted({_label(r) for r in d.to_dict("records")})
        _library_bars(left, d, groups, {"": ("gain", "")}, "BEST / own AUTO (images/s)",
                      f"P = {p}: BEST over the library's AUTO")
        _library_bars(right, n[n.procs == p], groups, AUTO_BEST, f"over {ref} AUTO",
                      f"P = {p}: over {ref} AUTO")
    fig.suptitle(title)
    return style.save(fig, base)


def make(inputs) -> list[Path]:
    """Every workload table and figure of a campaign (files exist even with no data); with
    ``inputs.models`` (the workloads' model names) also Fig. 7 of their gradients
    (``dnn_traces``)."""
    t = table(inputs.summary)
    n = normalised(t)
    tdir, fdir = inputs.tables, inputs.figures
    header, body = _display(t)
    written = tables.write_table(t, tdir / "workload", CAPTION, header=header, rows=body)
    nh = ["P", "Workload", "Library", "AUTO / ref AUTO", "BEST / ref AUTO", "BEST"]
    nb = [[str(int(r["procs"])), _label(r), style.library_title(r["library"]),
           f"{r['auto']:.3f}", f"{r['best']:.3f}", tables.algorithm_label(r["best_algorithm"])
           if r["best_algorithm"] else "none"] for r in n.to_dict("records")]
    ref = n.reference.iloc[0] if len(n) else REFERENCE
    written += tables.write_table(n, tdir / "workload_normalised",
                                  f"Projected images/s of each library's AUTO and BEST over "
                                  f"{style.library_title(ref)}'s AUTO (Castelló et al., Fig. 10 "
                                  f"right).", header=nh, rows=nb)
    written += figure_images(t, fdir / "workload_fig9")
    written += figure_normalised(t, n, fdir / "workload_fig10")
    if inputs.models:
        written += make_fig7(list(inputs.models), tdir, fdir)
    return written
