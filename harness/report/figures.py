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

import math
from pathlib import Path

import matplotlib
import matplotlib.ticker
import matplotlib.transforms
import numpy as np
import pandas as pd
from matplotlib.figure import Figure  # no pyplot: works under any backend, nothing to close
from matplotlib.lines import Line2D

from ..analysis.bound import add_bounds, chan, link
from . import style, tables
from .tables import AUTO, CONTEXT

# conditions a figure cannot mix (nodes is shown per column with P)
FIGURE_CONTEXT = [c for c in CONTEXT if c != "nodes"]


def _algo_order(names) -> list[str]:
    def key(n):
        try:
            return (0, style.KNOWN_ALGORITHMS.index(n), n)
        except ValueError:
            return (1, 0, n)
    return sorted(set(names), key=key)


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


def size_ticks(ax, sizes):
    sizes = sorted(sizes)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    step = max(1, math.ceil(len(sizes) / 12))
    shown = sizes[::step]
    ax.set_xticks(shown)
    ax.set_xticklabels([tables.format_size(s) for s in shown],
                       rotation=45 if len(shown) > 7 else 0,
                       ha="right" if len(shown) > 7 else "center")
    lo, hi = sizes[0], sizes[-1]
    ax.set_xlim(lo / 2**0.6, hi * 2**0.6)


def _bar_halfwidth(sizes) -> float:
    """Half-width of gain bars in log2 units: 30 % of the closest spacing of sizes, <= 0.45."""
    logs = np.log2(sorted(sizes))
    gaps = np.diff(logs)
    gap = float(gaps.min()) if len(gaps) else 1.0
    return min(0.45, 0.3 * gap)


def throughput_points(sub: pd.DataFrame):
    """x, y, yerr (2 x n) of timed rows: MiB/s with the time CI converted to throughput."""
    x = sub["size"].to_numpy(float)
    y = tables.mibs(x, sub["mean"].to_numpy(float))
    hi = tables.mibs(x, sub["ci_low"].to_numpy(float))    # fastest time -> highest throughput
    lo = tables.mibs(x, sub["ci_high"].to_numpy(float))
    err = np.vstack([np.nan_to_num(y - lo, nan=0.0), np.nan_to_num(hi - y, nan=0.0)])
    err = np.clip(err, 0, None)
    return x, y, err


HARNESS_BEST_COLOR = "#7a0019"


def harness_best(h: pd.DataFrame) -> pd.DataFrame:
    """Per (P, nodes, size) the fastest timed harness-algorithm row (``algorithm`` names it)."""
    timed = h[tables.timed_mask(h)] if not h.empty else h
    if timed.empty:
        return timed
    idx = timed.groupby(["procs", "nodes", "size"])["mean"].idxmin()
    return timed.loc[idx].sort_values("size")


def _draw_harness_best(ax, hb: pd.DataFrame) -> tuple[float, float]:
    """The fastest harness algorithm per size as a dashed line; its (min, max) throughput."""
    x, y, err = throughput_points(hb)
    ax.errorbar(x, y, yerr=err, color=HARNESS_BEST_COLOR, lw=2.0, ls="--", marker="D", ms=4,
                elinewidth=0.8, capsize=2, capthick=0.8, zorder=8)
    nc = (hb["status"] == "not-converged").to_numpy()
    if nc.any():
        ax.plot(x[nc], y[nc], linestyle="none", marker="D", ms=4, markerfacecolor="white",
                markeredgecolor=HARNESS_BEST_COLOR, zorder=9)
    return float(np.nanmin(y - err[0])), float(np.nanmax(y + err[1]))


def _draw_column(ax, axg, d: pd.DataFrame, table: pd.DataFrame, yscale: str, annotate_gain: bool,
                 strip: float, hb: pd.DataFrame | None = None):
    ok = tables.timed_mask(d)
    timed = d[ok]
    sizes = sorted(d["size"].unique())
    plotted = []
    ymin, ymax = math.inf, 0.0
    if hb is not None and not hb.empty:
        ymin, ymax = _draw_harness_best(ax, hb)
    for alg in _algo_order(timed["algorithm"]):
        sub = timed[timed["algorithm"] == alg].drop_duplicates("size", keep="last").sort_values("size")
        x, y, err = throughput_points(sub)
        is_auto = alg == AUTO
        c = style.color(alg)
        kw = dict(color=c, lw=2.6 if is_auto else 1.1, zorder=6 if is_auto else 3,
                  marker=None if is_auto else style.marker(alg), ms=3.5, alpha=1.0 if is_auto else 0.9)
        ax.errorbar(x, y, yerr=err, elinewidth=0.8 if not is_auto else 1.2, capsize=2,
                    capthick=0.8, ecolor=c, markerfacecolor=c, markeredgecolor=c, **kw)
        if is_auto:
            ax.plot(x, y, "o", color=c, ms=4.5, zorder=7)
        nc = (sub["status"] == "not-converged").to_numpy()
        if nc.any():
            ax.plot(x[nc], y[nc], linestyle="none", marker="o" if is_auto else style.marker(alg),
                    ms=4.5 if is_auto else 3.5, markerfacecolor="white", markeredgecolor=c,
                    markeredgewidth=0.9, zorder=kw["zorder"] + 1)
        plotted.append(alg)
        finite = np.isfinite(y)
        if finite.any():
            ymin = min(ymin, float(np.nanmin((y - err[0])[finite])), float(np.nanmin(y[finite])))
            ymax = max(ymax, float(np.nanmax((y + err[1])[finite])))

    size_ticks(ax, sizes)
    size_ticks(axg, sizes)
    ax.tick_params(labelbottom=False)

    if not plotted:
        ax.text(0.5, 0.5, "no valid measurement", transform=ax.transAxes, ha="center",
                va="center", color="0.4")
        ax.set_yscale(yscale)
        ax.set_yticks([])
        ax.set_yticks([], minor=True)
    else:
        # headroom: the top of the panel is the strip of BEST labels, free of data
        ax.set_yscale(yscale)
        f = strip  # fraction of the panel height kept free
        if yscale == "log":
            ymin = ymin if ymin > 0 and math.isfinite(ymin) else ymax / 10
            span = max(math.log10(ymax / ymin), 0.3)
            lo = ymin / 10 ** (0.04 * span)
            hi = ymax * 10 ** ((span * 1.04) * f / (1 - f))
        else:
            span = max(ymax - min(ymin, 0), ymax * 0.1)
            lo, hi = 0, ymax + span * f / (1 - f)
        ax.set_ylim(lo, hi)
        if yscale == "log":
            plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            few = math.log10(hi / lo) < 1.5  # less than ~1.5 decades: label minor ticks too
            ax.yaxis.set_minor_formatter(plain if few else matplotlib.ticker.NullFormatter())

    # BEST: ring + label strip (rotated when the sizes are many)
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

    # gain panel
    hw = _bar_halfwidth(sizes)
    gmax = 1.0
    gmin = 1.0
    for r in table.itertuples(index=False):
        left, right = r.size * 2 ** -hw, r.size * 2 ** hw
        if not math.isfinite(r.gain):
            axg.text(r.size, 1.0, "n/a", ha="center", va="bottom", fontsize=6.5, color="0.4")
            continue
        verdict = getattr(r, "verdict", "")
        tie = verdict in ("tie", "oversubscribed")
        # a tie is drawn as an empty bar, an oversubscribed cell hatched: neither is a win
        c = style.color(r.best_algorithm)
        axg.bar(left, r.gain - 1.0, width=right - left, bottom=1.0, align="edge",
                color="white" if tie else c, edgecolor=c if tie else "black", linewidth=0.8,
                hatch="////" if verdict == "oversubscribed" else None, zorder=3)
        lo_, hi_ = r.gain_low, r.gain_high
        if math.isfinite(lo_) and math.isfinite(hi_):
            axg.errorbar([r.size], [r.gain], yerr=[[max(r.gain - lo_, 0)], [max(hi_ - r.gain, 0)]],
                         color="0.25", elinewidth=0.7, capsize=2, capthick=0.7, zorder=4)
            gmax = max(gmax, hi_)
            gmin = min(gmin, lo_)
        gmax = max(gmax, r.gain)
        if annotate_gain:
            ytext = max(r.gain, hi_ if math.isfinite(hi_) else r.gain)
            label = {"tie": "tie", "oversubscribed": "oversub."}.get(verdict, f"{r.gain:.2f}×")
            axg.annotate(label, (r.size, ytext), xytext=(0, 2),
                         textcoords="offset points", ha="center", va="bottom", fontsize=6.5,
                         zorder=5)
    axg.axhline(1.0, color="black", lw=0.8, zorder=2)
    if gmax > 4:
        # large gains: log scale, so 1.1x and 50x both stay readable
        axg.set_yscale("log")
        axg.set_ylim(min(gmin, 1.0) / 1.25, gmax * 3.5 if annotate_gain else gmax * 1.3)
        axg.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        axg.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        spread = max(gmax - gmin, 0.1)
        axg.set_ylim(max(0.0, gmin - 0.08 * spread), gmax + (0.35 if annotate_gain else 0.12) * spread)
    return plotted


def _one_context(d: pd.DataFrame) -> dict:
    vary = tables.varying(d, FIGURE_CONTEXT)
    if vary:
        combos = d[vary].drop_duplicates().to_dict("records")
        raise ValueError(f"the rows mix conditions {vary} ({len(combos)} combinations); filter "
                         f"to one of {combos[:4]}... (make splits them)")
    return tables.constants(d, FIGURE_CONTEXT)


def auto_vs_best_figure(df: pd.DataFrame, library: str, path_without_ext, *,
                        yscale: str = "log", bound_doc: dict | None = None) -> list[Path]:
    """AUTO vs the forced native algorithms of ``library`` (see the module doc); one column per
    (P, nodes). ``df``: summary rows (any libraries; ``native:*`` rows of ``library`` are used),
    all with the same dtype/op/delay/max_delay/late_rank/metric (else ValueError). Rows of
    harness algorithms under ``library`` in the same conditions add the fastest of them per
    size as a dashed line ("harness best"). Writes ``<path>.png`` and ``<path>.pdf``; returns
    the two paths."""
    style.setup()
    full = tables.prepare(df)
    full = full[full["library"] == library]
    d = full[full["kind"] != "harness"]  # the library's own allreduce: AUTO, forced, selectors
    h = full[full["kind"] == "harness"]
    if d.empty:
        raise ValueError(f"no native:* rows of library {library!r}")
    ctx = _one_context(d)
    for col, v in ctx.items():  # harness rows in the figure's conditions only
        h = h[(h[col] == v) | (h[col].isna() & pd.isna(v))]
    hbest = harness_best(h)
    table = tables.auto_vs_best(d)
    cols = d[["procs", "nodes"]].drop_duplicates().sort_values(["procs", "nodes"]).to_records(index=False)
    # a column with a time for AUTO alone compares nothing: counted in the title, not drawn
    # (unless no column compares anything)
    timed = d[tables.timed_mask(d)]
    compared = [c for c in cols if timed[(timed["procs"] == c[0]) & (timed["nodes"] == c[1])]
                ["algorithm"].nunique() >= 2]
    alone = [c for c in cols if not any(c[0] == k[0] and c[1] == k[1] for k in compared)]
    if compared:
        cols = compared
    else:
        alone = []
    ncols = len(cols)
    n_sizes = d["size"].nunique()
    width = max(6.0, 3.3 * ncols + 1.2)
    fig = Figure(figsize=(width, 4.6 if n_sizes <= 9 else 5.0), layout="constrained")
    axes = fig.subplots(2, ncols, sharex="col", squeeze=False,
                        gridspec_kw={"height_ratios": [3, 1.15]})
    plotted = set()
    many_nodes = d["nodes"].nunique() > 1 or (d["nodes"] > 1).any()
    for j, (p, n) in enumerate(cols):
        ax, axg = axes[0, j], axes[1, j]
        sub = d[(d["procs"] == p) & (d["nodes"] == n)]
        tsub = table[(table["procs"] == p)]
        if "nodes" in tsub.columns:
            tsub = tsub[tsub["nodes"] == n]
        hb = hbest[(hbest["procs"] == p) & (hbest["nodes"] == n)] if not hbest.empty else None
        plotted |= set(_draw_column(ax, axg, sub, tsub, yscale, annotate_gain=n_sizes <= 10,
                                    strip=0.25 if n_sizes > 9 else 0.13, hb=hb))
        lk = link(bound_doc, library, int(n)) if bound_doc else None
        if lk:  # the lower bound's throughput: no algorithm can sit above this line
            xs = np.array(sorted(s for s in sub["size"].unique() if s > 0), dtype=float)
            ys = tables.mibs(xs, np.array([chan(p, x, lk["alpha"], lk["beta"], lk["gamma"])
                                           for x in xs]))
            ax.plot(xs, ys, ls=":", lw=1.4, color="0.4", marker="_", ms=12, zorder=1)
            finite = ys[np.isfinite(ys) & (ys > 0)]
            if finite.size:  # the bound inside the axis, however far above the times
                lo, hi = ax.get_ylim()
                ax.set_ylim(min(lo, finite.min() / 1.3), max(hi, finite.max() * 1.3))
        title = f"P = {int(p)}" + (f", {int(n)} node{'s' if n != 1 else ''}" if many_nodes else "")
        ax.set_title(title, pad=4)
        axg.set_xlabel("Message size per rank")
        if j == 0:
            ax.set_ylabel("Throughput (MiB/s)")
            axg.set_ylabel("Gain\n" r"$t_\mathrm{AUTO}/t_\mathrm{BEST}$")
    fig.align_ylabels(axes[:, 0])
    version = d["library_version"].iloc[-1]
    ctx_text = context_label(ctx)
    skipped = ("\n" + f"not drawn: P = {', '.join(str(int(c[0])) for c in alone)} "
               f"(a time for one algorithm only, nothing to compare)") if alone else ""
    fig.suptitle(f"{style.library_label(library, version)}: AUTO vs forced allreduce algorithms"
                 + (f" ({ctx_text})" if ctx_text else "") + skipped)

    # legend below: AUTO, each algorithm, then the BEST ring and the not-converged marker
    handles = []
    for alg in _algo_order(plotted):
        if alg == AUTO:
            h = Line2D([], [], color="black", lw=2.6, marker="o", ms=4.5)
        else:
            h = Line2D([], [], color=style.color(alg), lw=1.1, marker=style.marker(alg), ms=3.5)
        handles.append((h, style.long_label(alg)))
    handles.append((Line2D([], [], linestyle="none", marker="o", ms=9, markerfacecolor="none",
                           markeredgecolor="black"), "BEST at that size (name on top)"))
    if bound_doc and link(bound_doc, library, 1):
        handles.append((Line2D([], [], color="0.4", lw=1.4, ls=":", marker="_", ms=12),
                        "lower bound (Chan et al.), campaign's ping-pong fit"))
    if not hbest.empty:
        names = ", ".join(sorted(set(hbest["algorithm"])))
        handles.append((Line2D([], [], color=HARNESS_BEST_COLOR, lw=2.0, ls="--", marker="D", ms=4),
                        f"harness best ({names})"))
    if (d[tables.timed_mask(d)]["status"] == "not-converged").any():
        handles.append((Line2D([], [], linestyle="none", marker="o", ms=4.5, markerfacecolor="white",
                               markeredgecolor="0.3"), "hollow: CI not converged"))
    unplotted = sorted(set(d["algorithm"]) - plotted)
    if unplotted:
        statuses = d[d["algorithm"].isin(unplotted)].groupby("algorithm")["status"].agg(
            lambda s: "/".join(sorted(set(s))))
        note = "not plotted, no valid time: " + ", ".join(
            f"{style.short(a)} ({statuses[a]})" for a in _algo_order(unplotted))
        handles.append((Line2D([], [], linestyle="none"), note))
    ncol = max(2, min(len(handles), int(width // 1.75)))
    fig.legend([h for h, _ in handles], [t for _, t in handles], loc="outside lower center",
               ncol=ncol, handlelength=2.2, columnspacing=1.2, borderaxespad=0.2)
    return style.save(fig, path_without_ext)


def of_bound(table: pd.DataFrame, doc: dict) -> pd.DataFrame:
    """The AUTO-vs-BEST ``table`` with ``bound`` and the fraction of it AUTO and BEST reach
    (``auto_of_bound``, ``best_of_bound`` = bound / time, at most 1)."""
    t = table.copy()
    if "nodes" not in t:
        t["nodes"] = table.attrs.get("context", {}).get("nodes", 1)
    t = add_bounds(t, doc, time="auto_mean")
    with np.errstate(divide="ignore", invalid="ignore"):
        t["auto_of_bound"] = t["bound"] / pd.to_numeric(t["auto_mean"], errors="coerce")
        t["best_of_bound"] = t["bound"] / pd.to_numeric(t["best_mean"], errors="coerce")
    t = t.drop(columns=["bound_ratio"] + ([] if "nodes" in table else ["nodes"]))
    t.attrs = dict(table.attrs)
    return t


def _slug(ctx: dict, cols) -> str:
    """File-name suffix naming the conditions ``cols`` (those that vary): ``float64_sum_none``
    style for dtype/op/delay, ``max_delay-1.00ms`` style for the others."""
    parts = []
    for c in FIGURE_CONTEXT:
        if c in ctx and c in cols:
            v = ctx[c]
            if c == "max_delay":
                v = tables.format_time(float(v))[0].replace(" ", "").replace("µ", "u") if float(v) > 0 else "0"
            elif isinstance(v, float) and v.is_integer():
                v = int(v)
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
        dl = d[d["library"] == lib]
        main = Path(figures_dir) / f"auto_vs_best_{lib}"
        if dl.empty:
            written += style.placeholder(main, f"{style.library_title(lib)}: AUTO vs forced "
                                         "allreduce algorithms", "no native cell of this library "
                                         "in the summary")
            continue
        # the library's harness-algorithm rows ride along (same P and sizes as its natives)
        hl = everything[(everything["library"] == lib)
                        & (everything["kind"] == "harness")
                        & everything["procs"].isin(set(dl["procs"]))
                        & everything["size"].isin(set(dl["size"]))]
        vary = tables.varying(dl, FIGURE_CONTEXT)
        if not vary:
            written += auto_vs_best_figure(pd.concat([dl, hl]), lib, main, bound_doc=bound_doc)
            continue
        groups = [g for _, g in dl.groupby(vary, dropna=False, sort=True)]
        for g in groups:
            slug = _slug(tables.constants(g, FIGURE_CONTEXT), vary)
            written += auto_vs_best_figure(pd.concat([g, hl]), lib,
                                           Path(figures_dir) / f"auto_vs_best_{lib}_{slug}",
                                           bound_doc=bound_doc)
        richest = max(groups, key=lambda g: int(tables.timed_mask(g).sum()))  # first on ties
        written += auto_vs_best_figure(pd.concat([richest, hl]), lib, main)
    return written
