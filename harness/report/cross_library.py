"""The libraries side by side (Castelló et al. 2021, Fig. 6 and Fig. 10 right), from a
campaign's ``summary.csv``.

Per library, P and size (and the other conditions when they vary) AUTO and BEST come from
``harness.analysis.auto_vs_best`` (the table's rows: ``harness/analysis/cross_library.py``): only single-call ``native:*`` cells count (``tables.prepare`` leaves
out workload rows and the ping-pong / local-reduction probes of ``p2p_bench``). The normalised
view divides the reference library's AUTO time by each library's AUTO and BEST time
(speedup = ref AUTO time / time, > 1 is faster than the reference's AUTO), with the
conservative interval ``ref_ci_low / ci_high .. ref_ci_high / ci_low``; a ratio is called
(bold) only when the two 95 % CIs do not overlap and neither side is oversubscribed.

Outputs:

- ``tables/cross_library.{md,tex,csv}``: per P and size, each library's AUTO and BEST time,
  the BEST algorithm, and both over the reference's AUTO;
- ``figures/<c>/cross_library.{png,pdf}``: one panel per P (and condition), MiB/s = size /
  mean time against size (log2), a colour per library, AUTO solid, BEST dashed (labelled
  with BEST's algorithm), 95 % CI bars (Fig. 6);
- ``figures/<c>/cross_library_normalised.{png,pdf}``: the normalised view as grouped bars per
  size, AUTO hatched and BEST solid per library, a line at 1 (Fig. 10, right).

The reference is the ``report.reference_library`` of the config (default Intel MPI when
measured, else the first library). CLI: ``python -m harness.report cross_library --store
results/<c> --reference LIB``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.cross_library import REFERENCE, lines, panels, reference_of, table  # noqa: F401
from . import facets, style, tables
from .figures import context_label
from .workload import grouped_bars

TABLE = "cross_library"
FIGURES = ("cross_library", "cross_library_normalised")
OVERSUBSCRIBED = "oversubscribed: no claim"


# ------------------------------------------------------------------------------------ tables

def _speed(r, who) -> str | dict:
    s = r[f"{who}_speedup"]
    if not math.isfinite(s):
        return "n/a"
    text = f"{s:.2f}×" if s >= 0.1 else f"{s:.2g}×"
    if r[f"{who}_significant"]:
        return {"text": text, "bold": True}
    return text + (" ‡" if r["oversubscribed"] else "")


def _display(t: pd.DataFrame) -> tuple[list[str], list[list]]:
    keys = t.attrs.get("keys", ["procs", "size"])
    ctx = [k for k in keys if k not in ("procs", "size")]
    ref = style.library_title(t.attrs.get("reference") or "")
    header = ["P", *[c.replace("_", " ") for c in ctx], "Size", "Library", "AUTO", "95% CI",
              "BEST", "BEST time", "95% CI", f"AUTO vs {ref} AUTO", f"BEST vs {ref} AUTO"]
    body = []
    for r in t.to_dict("records"):
        dag = lambda s: " †" if s == "not-converged" else ""  # noqa: E731
        at, aci = tables.format_time(r["auto_mean"], r["auto_ci_low"], r["auto_ci_high"])
        bt, bci = tables.format_time(r["best_mean"], r["best_ci_low"], r["best_ci_high"])
        body.append([
            str(int(r["procs"])), *[tables.context_value_label(c, r[c]) for c in ctx],
            tables.format_size(r["size"]), style.library_label(r["library"], r["library_version"]),
            (at or r["auto_status"]) + (dag(r["auto_status"]) if at else ""), aci,
            tables.algorithm_label(r["best_algorithm"]) if r["best_algorithm"] else "none",
            bt + (dag(r["best_status"]) if bt else ""), bci, _speed(r, "auto"), _speed(r, "best"),
        ])
    return header, body


def caption(reference: str | None) -> str:
    ref = style.library_title(reference or REFERENCE)
    return ("AUTO and BEST of every library (Castelló et al., Fig. 6) and both over "
            f"{ref}'s AUTO (Fig. 10, right): speedup = {ref} AUTO time / time, > 1 is faster. "
            "Times are means with their 95% CI; bold: the two CIs do not overlap; ‡ "
            "oversubscribed (more ranks than cores): no claim; † not converged.")


# ----------------------------------------------------------------------------------- figures

def panel_title(key: dict, g: pd.DataFrame) -> str:
    """A panel's title (``panels``): P, its conditions, whether its rows claim nothing."""
    title = f"P = {int(key['procs'])}"
    ctx = {k: v for k, v in key.items() if k != "procs"}
    if ctx:
        title += ", " + (context_label(ctx) or ", ".join(f"{k} {v}" for k, v in ctx.items()))
    return title + (f" ({OVERSUBSCRIBED})" if g["oversubscribed"].any() else "")


def _series(g: pd.DataFrame):
    """(library, version, rows, label) per library version of a panel, libraries in their
    usual order: a library measured in two versions draws two series, one row per size each
    (``table`` has one row per library, version, P, condition and size)."""
    for (lib, version), d in sorted(g.groupby(["library", "library_version"], dropna=False),
                                    key=lambda kv: (style.library_sort_key(kv[0][0]),
                                                    str(kv[0][1]))):
        yield lib, version, d, style.library_label(lib, version)


def _look(line: str) -> facets.Look:
    lib, _, who = line.split("|")
    return dataclasses.replace(facets.library_look(lib), ls="-" if who == "auto" else "--",
                               lw=1.3)


def _label(line: str) -> str:
    lib, version, who = line.split("|")
    return f"{style.library_label(lib, version)} {who.upper()}"


def _order(lines) -> list[str]:
    return sorted(lines, key=lambda x: (style.library_sort_key(x.split("|")[0]), x))


def _best_names(ax, key, rows: pd.DataFrame, factor: float) -> None:
    """Each BEST point labelled with its algorithm, as the paper does."""
    best = rows[rows["line"].str.endswith("|best") & (rows["best_algorithm"] != "")]
    x, y, _ = facets.points(FIG6, best)
    for xi, yi, a, lib in zip(x, y, best["best_algorithm"], best["library"]):
        if math.isfinite(yi):
            ax.annotate(style.short(a), (xi, yi), textcoords="offset points", xytext=(3, 4),
                        fontsize=6, color=style.library_color(lib))


FIG6 = facets.Spec(x="size", y="throughput", series="line", cols="panel", wrap=2,
                   look=_look, label=_label, order=_order, ylabel="throughput, MiB/s = size / time",
                   title="AUTO and BEST of every library (Castelló et al., Fig. 6 style)",
                   panel_size=(5.2, 3.2), after=_best_names)


def figure(t: pd.DataFrame, base) -> list[Path]:
    """Fig. 6: MiB/s against size, AUTO solid and BEST dashed per library."""
    rows, keys = lines(t)
    titles = [panel_title(key, rows[rows["panel"] == i]) for i, key in enumerate(keys)]
    spec = dataclasses.replace(FIG6, panel_title=lambda k: titles[k["panel"]])
    return facets.figure(spec, rows, base, empty="no native cells with a time")


def figure_normalised(t: pd.DataFrame, base) -> list[Path]:
    """Fig. 10 (right): AUTO and BEST of every library over the reference's AUTO, grouped
    by size."""
    ref = style.library_title(t.attrs.get("reference") or REFERENCE)
    title = f"Speedup over {ref} AUTO (Castelló et al., Fig. 10 right style)"
    # a panel needs the reference's AUTO: P values only other libraries ran have no ratio
    shown = [(panel_title(key, g), g) for key, g in (panels(t) if len(t) else [])
             if np.isfinite(g[["auto_speedup", "best_speedup"]].to_numpy(float)).any()]
    if not shown:
        return style.placeholder(base, title, f"no P with {ref} AUTO and another library")
    spec = facets.Spec(x="size", cols="panel", wrap=2, panel_size=(5.6, 3.2), title=title)
    fig, axes, _, _ = facets.layout(spec, pd.DataFrame({"panel": range(len(shown))}))
    for ax in axes.flatten()[len(shown):]:
        ax.set_visible(False)
    handles: dict[str, object] = {}
    for ax, (ptitle, g) in zip(axes.flatten(), shown):
        ratio = np.isfinite(g[["auto_speedup", "best_speedup"]].to_numpy(float)).any(axis=1)
        sizes = sorted(g.loc[ratio, "size"].unique())  # the sizes with a ratio to draw
        series = []
        several = g.groupby("library")["library_version"].nunique()
        for lib, version, d, name in _series(g):
            d = d.set_index("size").reindex(sizes)
            name = name if several[lib] > 1 else style.library_title(lib)
            for who, hatch in (("auto", "//"), ("best", "")):
                v = d[f"{who}_speedup"].to_numpy(float)
                err = np.vstack([v - d[f"{who}_speedup_low"].to_numpy(float),
                                 d[f"{who}_speedup_high"].to_numpy(float) - v])
                series.append((f"{name} {who.upper()}", v, np.clip(np.nan_to_num(err, nan=0.0),
                               0, None), style.library_color(lib), hatch))
        grouped_bars(ax, [tables.format_size(s) for s in sizes], series)
        ax.axhline(1.0, color="0.3", linewidth=0.8)
        values = g[["auto_speedup", "best_speedup"]].to_numpy(float)
        values = values[np.isfinite(values) & (values > 0)]
        if len(values) and values.max() / values.min() > 8:  # ratios far apart: log axis
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(style.PLAIN_TICKS)
        ax.set_xlabel(facets.X_AXES["size"][0])
        ax.set_ylabel(f"{ref} AUTO time / time (> 1: faster)")
        ax.set_title(ptitle)
        handles.update({lab: h for h, lab in zip(*ax.get_legend_handles_labels())})
    return facets.finish(fig, spec, handles, base, ncols=axes.shape[1])


def make(inputs) -> list[Path]:
    """The cross-library table and both figures (over ``inputs.reference``'s AUTO); files
    exist even with no data."""
    t = table(inputs.summary, inputs.reference)
    header, body = _display(t)
    written = tables.write_table(t, inputs.tables / TABLE, caption(t.attrs.get("reference")),
                                 header=header, rows=body)
    written += figure(t, inputs.figures / FIGURES[0])
    written += figure_normalised(t, inputs.figures / FIGURES[1])
    return written
