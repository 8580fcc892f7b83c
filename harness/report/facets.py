"""The faceted line figure, declared once and drawn in one place.

Most figures of the reports are the same figure: panels in rows and columns by some columns
of a frame, in each panel one line per value of a column (an algorithm, a library, a size),
a value against ``x`` with its 95 % CI, log axes, hollow markers where a point claims
nothing. A report says *what* to draw with a ``Spec``; this module decides *how*: the axes,
their ticks and labels, the colours and markers (``style``), the hollow points, the legend.

- ``Spec(x, series, y, rows, cols, ...)``: the declaration (see its fields).
- ``figure(spec, data, path)``: the whole figure, written as PNG and PDF (``style.save``).
- ``panel(ax, spec, rows)``: the lines of one panel into axes a report laid out itself (a
  figure with other panels, such as the AUTO-vs-BEST gain bars); ``finish`` adds the legend
  and the title and saves.
- ``x_axis(ax, column, values)``, ``size_axis(ax, sizes)``: the one way each axis is drawn:
  sizes on a log2 axis labelled by ``harness.units.format_size`` ("message size per rank"),
  P as plain integers, max delays in ms.
- the points drawn hollow: status ``not-converged`` or ``oversubscribed`` (the typed
  summary's categorical and boolean; ``harness.analysis.vocabulary.claims_nothing_mask``).

Kinds of ``y``: ``"time"`` (``mean``, ``ci_low``, ``ci_high`` in seconds, drawn in the unit
that suits the figure's largest time), ``"throughput"`` (MiB/s = size / time, the CI turned
over), or the name of a column of plain values (CI from ``<y>_low``/``<y>_high`` when present).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import matplotlib.colors
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..analysis.vocabulary import claims_nothing_mask
from ..units import format_size
from . import style
from .tables import time_unit

# x columns with a fixed meaning: (label, factor to the unit drawn)
X_AXES = {"size": ("message size per rank", 1.0), "procs": ("processes P", 1.0),
          "max_delay": ("max delay (ms)", 1e3)}
HOLLOW_NOTE = "hollow: not converged, or more ranks than cores (no claim)"


@dataclass(frozen=True)
class Look:
    """How one series is drawn."""
    color: str
    marker: str | None = "o"
    ls: str = "-"
    lw: float = 1.2
    ms: float = 3.5
    hollow: bool = False  # every marker hollow (a series that claims nothing beside the others)
    zorder: float = 3.0


def algorithm_look(name) -> Look:
    """An algorithm's colour and marker (``style``); AUTO a thick black line."""
    if name == style.AUTO:
        return Look(style.AUTO_COLOR, "o", lw=2.6, ms=4.5, zorder=6)
    return Look(style.color(name), style.marker(name))


def library_look(name) -> Look:
    """A library's colour and marker (``style.library_color``)."""
    return Look(style.library_color(name), style.library_marker(name))


def sequential_look(values, **kw) -> Callable[[object], Look]:
    """Series that are ordered numbers (sizes): viridis from the smallest to the largest."""
    order = sorted(set(values))
    cmap = matplotlib.colormaps["viridis"]
    return lambda v: Look(matplotlib.colors.to_hex(cmap(order.index(v) / max(1, len(order) - 1)
                                                        * 0.85)), **kw)


@dataclass(frozen=True)
class Spec:
    """A faceted line figure. Columns of the frame handed to ``figure``/``panel``:

    ``x`` the horizontal axis (``size``, ``procs``, ``max_delay`` or any number); ``series``
    one line per value; ``y`` the kind of value (module doc); ``rows``/``cols`` one row or
    column of panels per value (``wrap``: panels by ``cols`` alone, that many to a row)."""
    x: str
    series: str = "algorithm"
    y: str = "time"
    rows: str | None = None
    cols: str | None = None
    wrap: int | None = None
    ci: str = "bars"  # "bars", "band" or "none"
    xlog: bool | None = None  # None: size log2, P log2 over a range of more than 8
    ylog: bool = True
    look: Callable[[object], Look] = algorithm_look
    label: Callable[[object], str] = str
    order: Callable[[list], list] = sorted  # the series in legend order
    panel_title: Callable[[dict], str] | None = None  # {rows column: v, cols column: v} -> text
    title: str = ""
    xlabel: str | None = None
    ylabel: str | None = None  # a time axis gets its unit appended
    reference: float | None = None  # a horizontal line (a speedup of 1)
    hollow: str | None = None  # a boolean column; None: claims_nothing_mask
    hollow_note: str = HOLLOW_NOTE  # the legend's entry for the hollow points
    panel_size: tuple[float, float] = (3.4, 2.8)
    notes: tuple[str, ...] = ()  # lines under the legend
    # after(ax, key, rows, factor): what a report draws over a panel (factor: time_unit's);
    # it may return {label: handle} for the legend
    after: Callable | None = field(default=None, repr=False)


def points(spec: Spec, rows: pd.DataFrame, factor: float = 1.0):
    """x, y, and the CI as (2 x n) distances below and above y, for ``rows`` (any order)."""
    x = rows[spec.x].to_numpy(float) * X_AXES.get(spec.x, ("", 1.0))[1]
    if spec.y in ("time", "throughput"):
        mean, lo, hi = (rows[c if c in rows else "mean"].to_numpy(float)
                        for c in ("mean", "ci_low", "ci_high"))
        if spec.y == "throughput":
            size = rows["size"].to_numpy(float)
            with np.errstate(divide="ignore", invalid="ignore"):
                mean, lo, hi = (size / t / 2**20 for t in (mean, hi, lo))
        y, lo, hi = mean * factor, lo * factor, hi * factor
    else:
        y = rows[spec.y].to_numpy(float)
        lo = rows[f"{spec.y}_low"].to_numpy(float) if f"{spec.y}_low" in rows else y
        hi = rows[f"{spec.y}_high"].to_numpy(float) if f"{spec.y}_high" in rows else y
    err = np.clip(np.nan_to_num(np.vstack([y - lo, hi - y]), nan=0.0), 0, None)
    return x, y, err


def _line(ax, spec: Spec, look: Look, label: str, x, y, err, hollow):
    face = "white" if look.hollow else look.color
    kw = dict(color=look.color, marker=look.marker, ls=look.ls, lw=look.lw, ms=look.ms,
              mfc=face, mec=look.color, zorder=look.zorder, label=label)
    if spec.ci == "bars" and err.any():
        h = ax.errorbar(x, y, yerr=err, elinewidth=0.8, capthick=0.8, **kw)
    else:
        h, = ax.plot(x, y, **kw)
        if spec.ci == "band" and err.any():
            ax.fill_between(x, y - err[0], y + err[1], color=look.color, alpha=0.15, lw=0)
    if hollow.any() and look.marker and not look.hollow:
        ax.plot(x[hollow], y[hollow], ls="none", marker=look.marker, ms=look.ms + 1, mfc="white",
                mec=look.color, mew=0.9, zorder=look.zorder + 0.5)
    return h


def panel(ax, spec: Spec, rows: pd.DataFrame, factor: float = 1.0) -> dict[str, object]:
    """Draw one panel's lines into ``ax`` (``factor``: the time unit's, ``time_unit``); set its
    x axis; returns {label: handle}. A hollow point adds ``HOLLOW_NOTE`` to the handles."""
    handles: dict[str, object] = {}
    rows = rows[np.isfinite(rows[spec.y if spec.y not in ("time", "throughput") else "mean"]
                            .to_numpy(float))]
    hollow_any = False
    for name in spec.order(list(rows[spec.series].dropna().unique())):
        s = rows[rows[spec.series] == name].sort_values(spec.x)
        x, y, err = points(spec, s, factor)
        hollow = s[spec.hollow].eq(True).to_numpy(bool) if spec.hollow else claims_nothing_mask(s)
        hollow_any |= bool(hollow.any())
        label = spec.label(name)
        handles[label] = _line(ax, spec, spec.look(name), label, x, y, err, hollow)
    if hollow_any:
        handles[spec.hollow_note] = Line2D([], [], ls="none", marker="o", mfc="white", mec="0.3")
    if spec.reference is not None:
        ax.axhline(spec.reference, color="0.3", lw=0.8, zorder=1)
    if len(rows):
        x_axis(ax, spec.x, rows[spec.x].to_numpy(float), log=spec.xlog, label=spec.xlabel)
    if spec.ylog:
        ax.set_yscale("log")
        plain_log(ax)
    return handles


def curves(ax, spec: Spec, values, ys: dict, title: str = "") -> dict[str, object]:
    """Lines without a CI (a model's): {series: y values (seconds on a time axis)} against
    ``values`` of ``spec.x``, the legend in the panel."""
    col = "mean" if spec.y == "time" else spec.y
    rows = pd.concat([pd.DataFrame({spec.x: values, col: y, spec.series: k})
                      for k, y in ys.items()])
    factor, unit = time_unit(rows[col]) if spec.y == "time" else (1.0, "")
    handles = panel(ax, spec, rows, factor)
    ax.legend(list(handles.values()), list(handles))
    ax.set_ylabel(y_label(spec, unit))
    ax.set_title(title, fontsize=8.5)
    return handles


def plain_log(ax, axis: str = "y") -> None:
    """A log axis labelled 20, 50, 100 rather than 2×10¹ (minor labels over a short range)."""
    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_formatter(style.PLAIN_TICKS)
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    few = lo > 0 and hi / lo < 30
    a.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))
    a.set_minor_formatter(style.PLAIN_TICKS if few else matplotlib.ticker.NullFormatter())


def size_axis(ax, sizes, axis: str = "x", label: str | None = None, limits=None) -> None:
    """The one size axis: log2, a tick per size (at most 12), ``format_size`` labels, the
    label "message size per rank" unless ``label``; ``limits`` (lo, hi) fixes the range."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    sizes = sorted({float(s) for s in sizes if s > 0})
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    a.set_minor_locator(matplotlib.ticker.NullLocator())
    if not sizes and not limits:
        return
    if len(sizes) > 12 or limits:
        lo, hi = limits or (sizes[0], sizes[-1])
        k = np.arange(math.floor(math.log2(max(lo, 1))), math.ceil(math.log2(hi)) + 1)
        sizes = [2.0 ** v for v in k]
    shown = sizes[::max(1, math.ceil(len(sizes) / 12))]
    a.set_major_locator(matplotlib.ticker.FixedLocator(shown))
    a.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: format_size(v)))
    if axis == "x" and len(shown) > 7:
        ax.tick_params(axis="x", labelrotation=45)
        for t in ax.get_xticklabels():
            t.set_ha("right")
    lo, hi = limits or (sizes[0] / 2**0.6, sizes[-1] * 2**0.6)
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo, hi)
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label or X_AXES["size"][0])


def x_axis(ax, column: str, values, log: bool | None = None, label: str | None = None) -> None:
    """The x axis of ``column`` over ``values`` (as the frame holds them)."""
    if column == "size":
        size_axis(ax, values, label=label)
        return
    factor = X_AXES.get(column, ("", 1.0))[1]
    xs = sorted({float(v) * factor for v in values if np.isfinite(v)})
    if log is None:  # P over more than 8x; max delays (from 0) over more than 20x
        log = len(xs) > 2 and ((column == "procs" and xs[0] > 0 and xs[-1] / xs[0] > 8)
                               or (column == "max_delay" and xs[-1] / max(xs[1], 1e-9) > 20))
    if log and column == "max_delay":
        ax.set_xscale("symlog", linthresh=min(v for v in xs if v > 0))
    elif log:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if xs and (column in X_AXES or log):
        shown = xs[::max(1, math.ceil(len(xs) / 12))]
        ax.set_xticks(shown)
        ax.xaxis.set_major_formatter(style.PLAIN_TICKS)
        if len(shown) > 7:
            ax.tick_params(axis="x", labelrotation=45)
        if len(xs) == 1:
            ax.set_xlim(*((xs[0] * 0.5, xs[0] * 1.5) if xs[0] else (-1, 1)))
    ax.set_xlabel(label or X_AXES.get(column, (column, 1.0))[0])


def y_label(spec: Spec, unit: str) -> str:
    if spec.y == "time":
        return f"{spec.ylabel or 'time per call'} ({unit})"
    if spec.y == "throughput":
        return spec.ylabel or "throughput (MiB/s)"
    return spec.ylabel or spec.y


def _keys(data: pd.DataFrame, column: str | None) -> list:
    return sorted(data[column].dropna().unique()) if column and len(data) else [None]


def layout(spec: Spec, data: pd.DataFrame, extra_rows: int = 0, **kw):
    """(figure, axes grid, row keys, column keys) for ``data``; ``extra_rows`` rows of axes
    under each row of panels (``kw``: ``subplots`` keywords)."""
    style.setup()
    rows, cols = _keys(data, spec.rows), _keys(data, spec.cols)
    if spec.wrap and spec.rows is None and len(cols) > spec.wrap:
        rows, cols = list(range(math.ceil(len(cols) / spec.wrap))), cols
    ncols = min(len(cols), spec.wrap) if spec.wrap and spec.rows is None else len(cols)
    nrows = len(rows) * (1 + extra_rows)
    w, h = spec.panel_size
    fig = Figure(figsize=(max(4.0, w * ncols + 0.6), h * nrows + 0.9), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes, rows, cols


def _panels(spec: Spec, data: pd.DataFrame, axes, rows, cols):
    """(ax, key, rows of the panel) of every panel, in reading order."""
    if spec.wrap and spec.rows is None:
        flat = axes.flatten()
        for ax in flat[len(cols):]:
            ax.set_visible(False)
        for ax, c in zip(flat, cols):
            yield ax, {spec.cols: c} if spec.cols else {}, (
                data[data[spec.cols] == c] if spec.cols else data)
        return
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            d = data
            if spec.rows:
                d = d[d[spec.rows] == r]
            if spec.cols:
                d = d[d[spec.cols] == c]
            key = {k: v for k, v in ((spec.rows, r), (spec.cols, c)) if k}
            yield axes[i, j], key, d


def blank(ax, text: str) -> None:
    """A panel that says why it is empty."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4",
            wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def figure(spec: Spec, data: pd.DataFrame, path, empty: str = "no data") -> list[Path]:
    """The whole figure of ``data`` (one row per point), saved to ``path`` (.png, .pdf); a
    panel without rows says ``empty``; no rows at all give ``style.placeholder``."""
    if not len(data):
        return style.placeholder(path, spec.title, empty)
    factor, unit = time_unit(data["mean"]) if spec.y == "time" else (1.0, "")
    fig, axes, rows, cols = layout(spec, data)
    handles: dict[str, object] = {}
    for ax, key, d in _panels(spec, data, axes, rows, cols):
        if not len(d):
            blank(ax, empty)
            continue
        handles.update(panel(ax, spec, d, factor))
        if spec.after:  # it may return legend entries of its own, and widen the axes
            extra = spec.after(ax, key, d, factor)
            handles.update(extra if isinstance(extra, dict) else {})
            if spec.ylog:
                plain_log(ax)
        if spec.panel_title:
            ax.set_title(spec.panel_title(key))
        if ax.get_subplotspec().is_first_col():
            ax.set_ylabel(y_label(spec, unit))
    return finish(fig, spec, handles, path, ncols=axes.shape[1])


def finish(fig, spec: Spec, handles: dict, path, ncols: int = 1) -> list[Path]:
    """The legend under the panels (each label once, the notes as its title), the figure's
    title; saved to ``path``."""
    if spec.hollow_note in handles:  # the note last
        handles = {**{k: v for k, v in handles.items() if k != spec.hollow_note},
                   spec.hollow_note: handles[spec.hollow_note]}
    if handles:
        notes = "\n".join(textwrap.fill(n, 50 + 45 * ncols) for n in spec.notes) or None
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncol=max(1, min(len(handles), 2 + ncols)), title=notes, title_fontsize=7.5)
    if spec.title:
        fig.suptitle(spec.title)
    return style.save(fig, path)

