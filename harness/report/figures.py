"""AUTO vs BEST figures (Castelló et al. 2021, Figs. 5-6) and ``make``.

``auto_vs_best_figure(df, library, path_without_ext)`` draws, for one library and one set of
conditions (dtype, op, delay, ...), one column per process count P:

- top: throughput (MiB/s = size / mean time, 2**20 B) against message size (log2 axis), one
  line per forced native algorithm (status ok / not-converged only; hollow markers are
  not-converged cells), AUTO (``native:auto``) as a thick black line, 95% CI error bars (the
  time CI converted to throughput), the BEST cell of every size ringed and its abbreviation
  written in the strip at the top of the panel, in the winner's colour;
- the fastest harness algorithm of every size (e.g. ``shm``), when the summary has harness rows
  of the library in the same conditions, as a dark-red dashed line ("harness best");
- bottom: gain = AUTO time / BEST time per size (bars rise from the 1.0 reference, coloured as
  the winner; whiskers: the conservative CI ``auto_ci_low/best_ci_high .. auto_ci_high/best_ci_low``).
  A tie (the two CIs overlap) is an empty bar labelled "tie"; an oversubscribed cell (more
  ranks than cores) a hatched one labelled "oversub.": neither is drawn as a win.

``make(inputs)`` writes ``figures/<c>/auto_vs_best_<library>.{png,pdf}`` per library (and
``..._<conditions>`` when several conditions exist) and ``tables/auto_vs_best.*``; returns
the written paths (``python -m harness.report auto_vs_best --store results/<c>``).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import matplotlib
import matplotlib.ticker
import matplotlib.transforms
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..analysis.auto_vs_best import (  # noqa: F401  (harness_best: read by the tests)
    FIGURE_CONTEXT, figure_columns, figure_rows, figure_sets, harness_best, untimed)
from ..analysis.bound import chan, link, of_bound
from . import facets, style, tables

def context_label(ctx: dict) -> str:
    """``float64 sum, no delay`` from constant conditions."""
    parts = []
    head = " ".join(str(ctx[c]) for c in ("dtype", "op") if c in ctx)
    if head:
        parts.append(head)
    delay = ctx.get("delay")
    if delay is not None:
        if delay == "none":
            parts.append("no delay")
        else:
            md = float(ctx.get("max_delay", 0) or 0)
            text = f"delay {delay}, max {tables.format_time(md)[0]}" if md > 0 else f"delay {delay}"
            if delay == "one-late" and "late_rank" in ctx:
                text += f" (rank {int(float(ctx['late_rank']))})"
            parts.append(text)
    metric = ctx.get("metric")
    if metric is not None and metric != "mean":
        parts.append(f"metric: {metric} over ranks")
    if ctx.get("buffers") == "rotate":
        parts.append("buffers rotated past the last-level cache")
    return ", ".join(parts)


def _bar_halfwidth(sizes) -> float:
    """Half-width of gain bars in log2 units: 30 % of the closest spacing of sizes, <= 0.45."""
    logs = np.log2(sorted(sizes))
    gaps = np.diff(logs)
    gap = float(gaps.min()) if len(gaps) else 1.0
    return min(0.45, 0.3 * gap)


# the top panels: MiB/s of every timed algorithm, AUTO thick and black; the fastest harness
# algorithm of each size dashed
THROUGHPUT = facets.Spec(x="size", y="throughput", series="algorithm", label=style.long_label,
                         order=style.algorithm_order, ylabel="Throughput (MiB/s)")
HARNESS_BEST = facets.Spec(x="size", y="throughput", series="line", look=lambda _: facets.Look(
    style.SERIES_COLORS["harness best"], "D", "--", lw=2.0, ms=4, zorder=8))


def _throughput_panel(ax, d: pd.DataFrame, hb, yscale: str, strip: float) -> dict:
    """One column's top panel (``THROUGHPUT``, the harness best over it); the top ``strip``
    of its height kept free for the BEST labels. Returns the legend's handles."""
    timed = d[tables.timed_mask(d)].drop_duplicates(["algorithm", "size"], keep="last")
    handles = facets.panel(ax, dataclasses.replace(THROUGHPUT, ylog=yscale == "log"), timed)
    if hb is not None and len(hb):
        names = ", ".join(sorted(set(hb["algorithm"])))
        handles.update(facets.panel(ax, HARNESS_BEST, hb.assign(line=f"harness best ({names})")))
        timed = pd.concat([timed, hb])
    facets.size_axis(ax, d["size"].unique())
    ax.tick_params(labelbottom=False)
    ax.set_xlabel("")
    _, y, err = facets.points(THROUGHPUT, timed)
    ok = np.isfinite(y)
    ax.set_yscale(yscale)
    if not ok.any():
        ax.text(0.5, 0.5, "no valid measurement", transform=ax.transAxes, ha="center",
                va="center", color="0.4")
        ax.set_yticks([])
        ax.set_yticks([], minor=True)
        return handles
    ymin = min(float(np.nanmin((y - err[0])[ok])), float(np.nanmin(y[ok])))
    ymax = float(np.nanmax((y + err[1])[ok]))
    if yscale == "log":
        ymin = ymin if ymin > 0 else ymax / 10
        span = max(math.log10(ymax / ymin), 0.3)
        ax.set_ylim(ymin / 10 ** (0.04 * span), ymax * 10 ** ((span * 1.04) * strip / (1 - strip)))
        facets.plain_log(ax)
    else:
        span = max(ymax - min(ymin, 0), ymax * 0.1)
        ax.set_ylim(0, ymax + span * strip / (1 - strip))
    return handles


def _best_strip(ax, table: pd.DataFrame, sizes) -> None:
    """BEST of each size: its point ringed, its name in the strip at the top (rotated when the
    sizes are many), in its colour."""
    trans = matplotlib.transforms.blended_transform_factory(ax.transData, ax.transAxes)
    rotate = len(sizes) > 9
    for r in table.itertuples(index=False):
        if not r.best_algorithm:
            continue
        ax.plot([r.size], [r.best_mibs], linestyle="none", marker="o", ms=8 if rotate else 10,
                markerfacecolor="none", markeredgecolor="black", markeredgewidth=0.9, zorder=9)
        ax.text(r.size, 0.985, style.short(r.best_algorithm), transform=trans, ha="center",
                va="top", fontsize=6.5 if rotate else 7, fontweight="bold",
                rotation=90 if rotate else 0, color=style.text_color(r.best_algorithm),
                zorder=10, clip_on=False,
                bbox=None if rotate else dict(boxstyle="round,pad=0.15", fc="white", ec="none"))


def _gain_bar(axg, r, hw: float, annotate: bool) -> tuple[float, float]:
    """One size's gain bar from 1.0 with its whiskers; (lowest, highest) value drawn."""
    verdict = getattr(r, "verdict", "")
    tie = verdict in ("tie", "oversubscribed")
    # a tie is drawn as an empty bar, an oversubscribed cell hatched: neither is a win
    c = style.color(r.best_algorithm)
    left, right = r.size * 2 ** -hw, r.size * 2 ** hw
    axg.bar(left, r.gain - 1.0, width=right - left, bottom=1.0, align="edge",
            color="white" if tie else c, edgecolor=c if tie else "black", linewidth=0.8,
            hatch="////" if verdict == "oversubscribed" else None, zorder=3)
    lo, hi = r.gain_low, r.gain_high
    whiskers = math.isfinite(lo) and math.isfinite(hi)
    if whiskers:
        axg.errorbar([r.size], [r.gain], yerr=[[max(r.gain - lo, 0)], [max(hi - r.gain, 0)]],
                     color="0.25", elinewidth=0.7, capsize=2, capthick=0.7, zorder=4)
    if annotate:
        label = {"tie": "tie", "oversubscribed": "oversub."}.get(verdict, f"{r.gain:.2f}×")
        axg.annotate(label, (r.size, max(r.gain, hi) if whiskers else r.gain), xytext=(0, 2),
                     textcoords="offset points", ha="center", va="bottom", fontsize=6.5, zorder=5)
    return (min(lo, r.gain), max(hi, r.gain)) if whiskers else (r.gain, r.gain)


def _gain_panel(axg, table: pd.DataFrame, sizes, annotate: bool) -> None:
    """Gain = AUTO time / BEST time per size: bars from the 1.0 line in the winner's colour."""
    hw = _bar_halfwidth(sizes)
    gmin, gmax = 1.0, 1.0
    for r in table.itertuples(index=False):
        if not math.isfinite(r.gain):
            axg.text(r.size, 1.0, "n/a", ha="center", va="bottom", fontsize=6.5, color="0.4")
            continue
        lo, hi = _gain_bar(axg, r, hw, annotate)
        gmin, gmax = min(gmin, lo), max(gmax, hi)
    axg.axhline(1.0, color="black", lw=0.8, zorder=2)
    facets.size_axis(axg, sizes)
    if gmax > 4:  # large gains: log scale, so 1.1x and 50x both stay readable
        axg.set_yscale("log")
        axg.set_ylim(min(gmin, 1.0) / 1.25, gmax * 3.5 if annotate else gmax * 1.3)
        axg.yaxis.set_major_formatter(style.PLAIN_TICKS)
        axg.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        spread = max(gmax - gmin, 0.1)
        axg.set_ylim(max(0.0, gmin - 0.08 * spread), gmax + (0.35 if annotate else 0.12) * spread)


def _bound_line(ax, bound_doc, library: str, p, n, sizes) -> None:
    """The lower bound's throughput: no algorithm can sit above this line."""
    lk = link(bound_doc, library, int(n)) if bound_doc else None
    if not lk:
        return
    xs = np.array(sorted(s for s in sizes if s > 0), dtype=float)
    ys = tables.mibs(xs, np.array([chan(p, x, lk["alpha"], lk["beta"], lk["gamma"]) for x in xs]))
    ax.plot(xs, ys, ls=":", lw=1.4, color="0.4", marker="_", ms=12, zorder=1)
    finite = ys[np.isfinite(ys) & (ys > 0)]
    if finite.size:  # the bound inside the axis, however far above the times
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, finite.min() / 1.3), max(hi, finite.max() * 1.3))


def _keys(d: pd.DataFrame, library: str, bound_doc) -> dict:
    """The legend's entries besides the lines: the BEST ring, the bound, what was not drawn."""
    keys = {"BEST at that size (name on top)": Line2D(
        [], [], linestyle="none", marker="o", ms=9, markerfacecolor="none", markeredgecolor="black")}
    if bound_doc and link(bound_doc, library, 1):
        keys["lower bound (Chan et al.), campaign's ping-pong fit"] = Line2D(
            [], [], color="0.4", lw=1.4, ls=":", marker="_", ms=12)
    statuses = untimed(d)
    if statuses:
        keys["not plotted, no valid time: " + ", ".join(
            f"{style.short(a)} ({statuses[a]})" for a in style.algorithm_order(statuses))] = Line2D(
            [], [], linestyle="none")
    return keys


def _title(d: pd.DataFrame, library: str, ctx: dict, alone: list) -> str:
    ctx_text = context_label(ctx)
    skipped = ("\n" + f"not drawn: P = {', '.join(str(int(c[0])) for c in alone)} "
               f"(a time for one algorithm only, nothing to compare)") if alone else ""
    return (f"{style.library_label(library, d['library_version'].iloc[-1])}: AUTO vs forced "
            "allreduce algorithms" + (f" ({ctx_text})" if ctx_text else "") + skipped)


def auto_vs_best_figure(df: pd.DataFrame, library: str, path_without_ext, *,
                        yscale: str = "log", bound_doc: dict | None = None) -> list[Path]:
    """AUTO vs the forced native algorithms of ``library`` (see the module doc); one column per
    (P, nodes). ``df``: summary rows (any libraries; ``native:*`` rows of ``library`` are used),
    all with the same dtype/op/delay/max_delay/late_rank/metric (else ValueError). Rows of
    harness algorithms under ``library`` in the same conditions add the fastest of them per
    size as a dashed line ("harness best"). Writes ``<path>.png`` and ``<path>.pdf``; returns
    the two paths."""
    d, ctx, hbest = figure_rows(df, library)
    table = tables.auto_vs_best(d)
    cols, alone = figure_columns(d)
    n_sizes = d["size"].nunique()
    grid = facets.Spec(x="size", cols="column", panel_size=(3.3 if len(cols) > 1 else 5.4,
                                                             1.85 if n_sizes <= 9 else 2.05))
    fig, axes, _, _ = facets.layout(grid, pd.DataFrame({"column": range(len(cols))}),
                                    extra_rows=1, sharex="col",
                                    gridspec_kw={"height_ratios": [3, 1.15]})
    many_nodes = d["nodes"].nunique() > 1 or (d["nodes"] > 1).any()
    handles: dict[str, object] = {}
    for j, (p, n) in enumerate(cols):
        ax, axg = axes[0, j], axes[1, j]
        sub = d[(d["procs"] == p) & (d["nodes"] == n)]
        sizes = sorted(sub["size"].unique())
        tsub = table[(table["procs"] == p) & ((table["nodes"] == n) if "nodes" in table else True)]
        hb = hbest[(hbest["procs"] == p) & (hbest["nodes"] == n)] if not hbest.empty else None
        handles.update(_throughput_panel(ax, sub, hb, yscale, 0.25 if n_sizes > 9 else 0.13))
        _best_strip(ax, tsub, sizes)
        _gain_panel(axg, tsub, sizes, annotate=n_sizes <= 10)
        _bound_line(ax, bound_doc, library, p, n, sizes)
        ax.set_title(f"P = {int(p)}" + (f", {int(n)} node{'s' if n != 1 else ''}"
                                        if many_nodes else ""), pad=4)
        ax.set_ylabel(THROUGHPUT.ylabel if j == 0 else "")
    axes[1, 0].set_ylabel("Gain\n" r"$t_\mathrm{AUTO}/t_\mathrm{BEST}$")
    fig.align_ylabels(axes[:, 0])
    handles.update(_keys(d, library, bound_doc))
    return facets.finish(fig, facets.Spec(x="size", title=_title(d, library, ctx, alone)),
                         handles, path_without_ext, ncols=len(cols))


def _slug(ctx: dict, cols) -> str:
    """File-name suffix naming the conditions ``cols`` (those that vary): ``float64_sum_none``
    style for dtype/op/delay, ``max_delay-1.00ms`` style for the others."""
    parts = []
    for c in FIGURE_CONTEXT:
        if c in ctx and c in cols:
            v = tables.context_value_label(c, ctx[c])  # a max delay as 1.00ms
            v = v.replace(" ", "").replace("µ", "u") if c == "max_delay" else v
            parts.append(f"{c}-{v}" if c in ("max_delay", "late_rank", "metric") else str(v))
    return "_".join(parts).replace("/", "-")


def make(inputs) -> list[Path]:
    """Per library: ``figures/auto_vs_best_<library>.{png,pdf}``; when the library's rows
    hold several sets of conditions, that file draws the set with the most timed cells and
    every set also gets a file suffixed with the varying conditions (e.g. ``_none`` /
    ``_one-late_max_delay-1.00ms``). ``inputs.libraries``: those whose figure must exist (the
    plan's); one without a native row gets a figure saying so. Also ``tables/auto_vs_best.*``
    for all libraries. Returns the paths. Failed, wrong and timeout cells never stop it: they
    are listed, not drawn. With ``inputs.params`` (``model_params.json``) the table gives the
    fraction of the lower bound AUTO and BEST reach, and each figure draws the bound
    (``harness.analysis.bound``)."""
    everything = tables.prepare(inputs.summary)
    d = everything[everything["kind"] != "harness"]
    written: list[Path] = []
    bound_doc, tables_dir, figures_dir = inputs.params, inputs.tables, inputs.figures
    table = tables.auto_vs_best(d)
    if bound_doc:
        table = of_bound(table, bound_doc)
    ctx = context_label(table.attrs.get("context", {}))
    caption = ("AUTO (the library's own choice) vs BEST (fastest native allreduce algorithm, "
               "AUTO included) per library, process count P and message size"
               + (f"; {ctx}." if ctx else "."))
    written += tables.write_table(table, Path(tables_dir) / "auto_vs_best", caption)
    libs = set(d["library"]) | set(inputs.libraries)
    for lib in sorted(libs, key=style.library_sort_key):
        main = Path(figures_dir) / f"auto_vs_best_{lib}"
        vary, sets, richest = figure_sets(everything, lib)
        if richest.empty:
            written += style.placeholder(main, f"{style.library_title(lib)}: AUTO vs forced "
                                         "allreduce algorithms", "no native cell of this library "
                                         "in the summary")
            continue
        for ctx, rows in sets if vary else ():  # one file per set of conditions
            written += auto_vs_best_figure(rows, lib, Path(figures_dir)
                                           / f"auto_vs_best_{lib}_{_slug(ctx, vary)}",
                                           bound_doc=bound_doc)
        # the main file: the richest set (its bound only when it is the only set)
        written += auto_vs_best_figure(richest, lib, main, bound_doc=None if vary else bound_doc)
    return written
