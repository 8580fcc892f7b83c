"""Model projections past the cluster: what the cost models predict up to P = 16,384, drawn and
tabled (the numbers: ``harness/analysis/projection.py``).

Two questions the measured campaign cannot answer on a few cores, answered from the models
alone (no contention, no noise, no measurement):

- **SUARA2 against the best single algorithm** (Nuriyev et al., Sect. 4-5 and Fig. 8):
  ``suara_map`` evaluates Algorithm 2 (``models.decide_suara2``) and the best of the six Open
  MPI algorithms (``models.best_single``) over a grid of P (powers of two and highly
  composite numbers: SUARA2 only considers grids P_r x P_c whose sides divide P) and message
  sizes. ``figures/<c>/projection_suara.{png,pdf}``: left, the map of the winner (SUARA2 or
  the single algorithm) with the shade giving SUARA2's predicted speedup; right, the speedup
  of SUARA2's best grid against P for a few sizes, over the best single algorithm (solid)
  and over the segmented ring rs alone (dashed; eq. 17 compares with rs), with a fitted
  ``c sqrt(P)`` trend line and each curve's fitted exponent (speedup ~ P^k for P >= 256).
- **RD, SMP and NAP** (Bienz et al., Sect. IV, Figs. 10-11): ``node_aware_map`` evaluates
  the max-rate model (``harness.models.maxrate.cost``) over P = nodes x ppn and sizes, per ppn.
  ``figures/<c>/projection_node_aware.{png,pdf}``: one map per ppn (the ``--ppn`` value and
  the campaign's), colour = the fastest of the three, shade = its speedup over RD; below,
  Fig. 10 (one 8-byte value against P) and Fig. 11 (cost against size at the largest P).
- ``tables/projection.{md,tex,csv}``: for P in {16, 64, ..., 16384} x a few sizes, both
  winners, their predicted times and speedups.

On every map a box outlines the region the campaign measured (``measured_suara``,
``measured_node_aware``: min..max P and size of the timed, undelayed cells concerned);
without such cells the panel's title says so. Where the parameters come from and what counts
as a tie: ``harness/analysis/projection.py``.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import matplotlib
import matplotlib.colors
import matplotlib.patheffects
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .. import models
from ..analysis.projection import (
    CURVE_SIZES,
    FIT_FROM,
    MAX_PROCS,
    NA_SUMMARY,
    PPN,
    SIZES,
    SUARA,
    TIE,
    ProjectionParams,
    Region,
    curve_fits,
    load_params,
    map_ppns,
    measured_node_aware,
    measured_suara,
    node_aware_map,
    node_aware_maps,
    procs_grid,
    projection_frame,
    speedup_curves,
    suara_map,
)
from ..models import maxrate
from . import facets, style, tables

# Table 1 model name -> the Open MPI algorithm, for colours and legends
NATIVE = {"linear": "native:basic_linear", "nono": "native:nonoverlapping",
          "rd": "native:recursive_doubling", "rnos": "native:ring",
          "rs": "native:segmented_ring", "rab": "native:rabenseifner"}
NAMES = {"linear": "linear", "nono": "nonoverlapping (reduce + bcast)",
         "rd": "recursive doubling", "rnos": "ring", "rs": "segmented ring",
         "rab": "Rabenseifner"}
# on the map SUARA2 is orange (style's "suara"): its usual magenta is close to rs's pink
SUARA_COLOR = style.color("suara")
# the max-rate model's names of RD, SMP and NAP -> the algorithms, their labels and colours
NA_ALGORITHMS = {m: a for a, m in NA_SUMMARY.items()}
NA_LABELS = {m: style.NODE_AWARE[a] for m, a in NA_ALGORITHMS.items()}
NA_COLORS = {m: style.color(a) for m, a in NA_ALGORITHMS.items()}


def _grid_text(r) -> str:
    return f"SUARA2 {r['P_r']}×{r['P_c']} ({r['a_r']}, {r['a_c']})"


HEADER = ["P", "size", "SUARA2 model: winner", "time", "best single", "time", "speedup",
          "best grid / best single", "node-aware winner", "time", "speedup over RD"]


def _t(seconds) -> str:
    return tables.format_time(float(seconds))[0] or "–"


def table_rows(df: pd.DataFrame) -> list[list[str]]:
    rows = []
    for r in df.to_dict("records"):
        win = _grid_text(r) if r["suara_winner"] == SUARA else r["suara_winner"]
        gs = f"{r['grid_speedup']:.2f}×" if np.isfinite(r["grid_speedup"]) else "no grid"
        rows.append([str(r["procs"]), tables.format_size(r["size"]), win, _t(r["suara_time"]),
                     r["best_single"], _t(r["best_single_time"]), f"{r['speedup']:.2f}×", gs,
                     NA_LABELS.get(r["na_winner"], "–"), _t(r["na_time"]),
                     f"{r['na_speedup_over_rd']:.2f}×" if np.isfinite(r["na_speedup_over_rd"]) else "–"])
    return rows


def caption(pp: ProjectionParams, ppn: int) -> str:
    return (f"Model projection (no measurement): SUARA2 (Algorithm 2) against the best of the "
            f"six Open MPI algorithms (Hockney models, Nuriyev et al. Table 1; a grid counts as "
            f"a win above {TIE:.0%}), and RD/SMP/NAP (max-rate model, Bienz et al. eqs. 4-6) "
            f"at ppn {ppn}. Hockney parameters: {pp.hockney_source}. Max-rate parameters: "
            f"{pp.maxrate_source}.")


# ----------------------------------------------------------------------------- figures


def _p_label(p: float) -> str:
    p = int(round(p))
    for unit, f in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if p >= f and p % f == 0:
            return f"{p // f}{unit}"
    return str(p)


def _edges(values) -> np.ndarray:
    """Cell edges in log2 space: geometric midpoints, half a step beyond the ends."""
    x = np.log2(np.asarray(values, dtype=float))
    if len(x) == 1:
        return 2.0 ** np.array([x[0] - 0.5, x[0] + 0.5])
    mid = (x[1:] + x[:-1]) / 2
    return 2.0 ** np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])


def _p_axis(ax, lo, hi) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ticks = [2 ** k for k in range(0, 40, 2) if lo <= 2 ** k <= hi]
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _p_label(v)))
    ax.xaxis.set_minor_locator(matplotlib.ticker.FixedLocator(
        [2 ** k for k in range(0, 40) if lo <= 2 ** k <= hi]))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("processes P")


def _mix(colour, w: float):
    """``colour`` blended with white: w = 1 the colour itself, w = 0 white."""
    r, g, b = matplotlib.colors.to_rgb(colour)
    return (1 - w + w * r, 1 - w + w * g, 1 - w + w * b)


FLAT = 0.5  # shade of a winner without speedup (a single algorithm, RD)
LOW = 0.22  # shade of the smallest speedup


def _shade(speedup: float, top: float) -> float:
    if not np.isfinite(speedup) or speedup <= 1.0 or top <= 1.0:
        return FLAT
    return LOW + (1 - LOW) * min(1.0, math.log(speedup) / math.log(top))


def _paint(ax, procs, sizes, winner, speedup, colours, shaded, top, region: Region | None):
    """The map: one rectangle per (size, P) in the winner's colour, shaded winners by speedup;
    its axes, the measured ``region`` outlined."""
    rgb = np.ones(winner.shape + (3,))
    for i in range(winner.shape[0]):
        for j in range(winner.shape[1]):
            w = winner[i, j]
            rgb[i, j] = _mix(colours[w], _shade(speedup[i, j], top) if w in shaded else FLAT)
    xe, ye = _edges(procs), _edges(sizes)
    ax.pcolormesh(xe, ye, rgb, shading="flat", rasterized=True)
    ax.grid(False)
    _p_axis(ax, xe[0], xe[-1])
    facets.size_axis(ax, [], axis="y", limits=(ye[0], ye[-1]))
    _outline(ax, region, xe)


def _key(colour, shaded: bool, label: str) -> Patch:
    """A legend entry of the map: the winner's colour, as strong as a large speedup if shaded."""
    return Patch(color=_mix(colour, 0.85 if shaded else FLAT), label=label)


def _outline(ax, region: Region | None, xe, colour="black") -> None:
    if region is None:
        return
    x0, x1 = region.p_min / 2 ** 0.3, region.p_max * 2 ** 0.3
    y0, y1 = region.s_min / 2 ** 0.45, region.s_max * 2 ** 0.45
    halo = [matplotlib.patheffects.withStroke(linewidth=4, foreground="white")]
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=1.8, ec=colour,
                           zorder=5, path_effects=halo))
    right = x1 < xe[-1] / 8
    ax.annotate("measured", (x1 if right else x0, y1), xytext=(3 if right else -3, 2),
                textcoords="offset points", ha="left" if right else "right", va="bottom",
                fontsize=8, fontweight="bold", zorder=6, path_effects=halo)


def _colourbar(fig, ax, colour, top, label):
    ws = np.linspace(LOW, 1, 64)
    cmap = matplotlib.colors.ListedColormap([_mix(colour, w) for w in ws])
    norm = matplotlib.colors.LogNorm(vmin=1.0, vmax=max(top, 1.0001))
    sm = matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=ax, shrink=0.8, aspect=25, pad=0.01)
    cb.set_label(label, fontsize=7.5)
    cb.ax.tick_params(labelsize=7)
    ticks = [t for t in (1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64) if t <= top]
    cb.set_ticks(ticks)
    cb.set_ticklabels([f"{t:g}×" for t in ticks])
    cb.ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    return cb


def _measured_note(region: Region | None, what: str) -> str:
    if region is None:
        return f"no {what} cells measured"
    return f"box: the {region.cells} measured {what} cells"


def suara_figure(pp: ProjectionParams, region: Region | None, path, max_procs=MAX_PROCS,
                 sizes=SIZES, curve_sizes=CURVE_SIZES) -> tuple[list[Path], dict]:
    procs = procs_grid(max_procs)
    sm = suara_map(pp.hockney, procs, sizes)
    style.setup()
    fig = Figure(figsize=(12.5, 6.2), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=[1.25, 1])
    ax = fig.add_subplot(grid[:, 0])
    ax2, ax3 = fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 1])
    colours = {SUARA: SUARA_COLOR, **{a: style.color(NATIVE[a]) for a in models.ALL6}}
    sup = sm["speedup"]
    top = float(np.nanmax(sup)) if np.isfinite(sup).any() else 1.0
    _paint(ax, procs, sizes, sm["winner"], sup, colours, {SUARA}, top, region)
    # the grid P_r x P_c of SUARA2 wins, at a few points
    for i, m in enumerate(sizes):
        if int(np.log2(m)) % 4:
            continue
        for j, P in enumerate(procs):
            if (sm["winner"][i, j] == SUARA and P & (P - 1) == 0 and int(np.log2(P)) % 2 == 0
                    and P < procs[-1]):
                ax.text(P, m, f"{sm['P_r'][i, j]}×{sm['P_c'][i, j]}", ha="center",
                        va="center", fontsize=5.5, color="white" if
                        _shade(sup[i, j], top) > 0.6 else "black", zorder=4)
    present = [w for w in [SUARA, *models.ALL6] if (sm["winner"] == w).any()]
    handles = [_key(colours[w], w == SUARA, "SUARA2, grid P_r×P_c (text)" if w == SUARA
                    else f"{w}: {NAMES[w]}") for w in present]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.11), ncol=3,
              frameon=False, title="fastest predicted (the six Open MPI algorithms, SUARA2)",
              fontsize=7.5)
    ax.set_title("which wins; shade = SUARA2's predicted speedup over the best single\n"
                 + _measured_note(region, "SUARA2 / Open MPI native"), fontsize=8.5)
    if SUARA in present:
        _colourbar(fig, ax, colours[SUARA], top, "SUARA2 speedup")
    # speedup of the best grid against P: over the best single (top), over rs alone (bottom)
    P = np.array(procs, float)
    cmap = matplotlib.colormaps["viridis"]
    curves = speedup_curves(pp.hockney, procs, sizes, sm, curve_sizes)
    fits, sqrt_fits = curve_fits(P, curves)
    for panel, (axp, which, ref) in enumerate(((ax2, 0, "the best single algorithm"),
                                               (ax3, 1, "rs alone (eq. 17's comparison)"))):
        for n, (m, cur) in enumerate(curves.items()):
            k = fits[m]["exponent_" + ("best_single" if which == 0 else "rs")]
            axp.plot(P, cur[which], "-o", color=cmap(n / max(1, len(curves) - 1) * 0.85),
                     ms=2.5, lw=1.1, label=f"{tables.format_size(m)}: ~P^{k:.2f}")
        best_c, best_m = sqrt_fits[which]
        if best_m is not None and np.isfinite(best_c):
            Pf = P[P >= FIT_FROM]
            axp.plot(Pf, best_c * np.sqrt(Pf), color="#888888", lw=3.5, alpha=0.45, zorder=1,
                     label=rf"$c\sqrt{{P}}$ fitted to {tables.format_size(best_m)}")
        axp.axhline(1.0, color="black", lw=0.6)
        _p_axis(axp, P[0] / 1.2, P[-1] * 1.2)
        axp.set_yscale("log", base=2)
        axp.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
        axp.set_ylabel("speedup")
        axp.set_title(f"SUARA2's best grid over {ref}", fontsize=8.5)
        axp.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=7,
                   title=f"size: exponent k\n(fit over P ≥ {FIT_FROM})", title_fontsize=7)
        if panel == 0:
            axp.set_xlabel("")
    fig.suptitle("SUARA2 projected to P = " + f"{max_procs:,}" + " (Nuriyev et al., Fig. 8 "
                 "extended; model only, no contention)\n"
                 + textwrap.fill("Hockney parameters: " + pp.hockney_source, 150), fontsize=9.5)
    return style.save(fig, path), fits


def _model_look(a: str) -> facets.Look:
    """RD dashed and hollow (at 8 B it lies on SMP), SMP and NAP solid."""
    look = facets.algorithm_look(NA_ALGORITHMS[a])
    return facets.Look(look.color, look.marker, (0, (4, 2)) if a == "rd" else "-", ms=3.5,
                       hollow=a == "rd")


MODEL_LINES = facets.Spec(x="procs", series="model", ci="none", look=_model_look,
                          label=NA_LABELS.get, order=lambda m: [a for a in NA_LABELS if a in m],
                          ylabel="modelled time")


def node_aware_figure(pp: ProjectionParams, regions: dict[int, Region], path, ppns,
                      max_procs=MAX_PROCS, sizes=SIZES) -> list[Path]:
    ppns = list(dict.fromkeys(int(p) for p in ppns))
    style.setup()
    fig = Figure(figsize=(4.6 * max(2, len(ppns)), 8.4), layout="constrained")
    top_row, bottom = fig.subfigures(2, 1, height_ratios=[1.25, 1])
    axes = top_row.subplots(1, len(ppns), squeeze=False)[0]
    maps = node_aware_maps(pp.maxrate, ppns, max_procs, sizes)
    top = max(float(np.nanmax(na["speedup"])) for _, na in maps.values())
    for ax, ppn in zip(axes, ppns):
        procs, na = maps[ppn]
        region = regions.get(ppn)
        _paint(ax, procs, sizes, na["winner"], na["speedup"], NA_COLORS, {"smp", "nap"}, top,
               region)
        ax.set_title(f"ppn {ppn} (P = nodes × {ppn})\n"
                     + (_measured_note(region, "RD/SMP/NAP") if region else
                        f"no RD/SMP/NAP cells measured at ppn {ppn}"), fontsize=8.5)
    for name in ("nap", "smp"):
        if any((na["winner"] == name).any() for _, na in maps.values()):
            _colourbar(top_row, list(axes), NA_COLORS[name], top, f"{NA_LABELS[name]} over RD")
    handles = [_key(NA_COLORS[a], a != "rd", {"rd": "RD: recursive doubling", "smp": "SMP: "
                    "master per node", "nap": "NAP: node-aware parallel"}[a])
               for a in maxrate.ALGORITHMS]
    top_row.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False,
                   title="fastest predicted; shade = its speedup over RD (RD: flat)")
    # Figs. 10-11 of the paper at the first ppn
    ppn = ppns[0]
    b1, b2 = bottom.subplots(1, 2)
    procs = maps[ppn][0]
    line = node_aware_map(pp.maxrate, ppn, procs, [8])
    facets.curves(b1, MODEL_LINES, procs, {a: line[a][0] for a in NA_LABELS},
                  f"Fig. 10: one 8-byte value against P (ppn {ppn})")
    _p_axis(b1, procs[0] / 1.2, procs[-1] * 1.2)
    Pmax = procs[-1]
    col = node_aware_map(pp.maxrate, ppn, [Pmax], sizes)
    facets.curves(b2, dataclasses.replace(MODEL_LINES, x="size"), sizes,
                  {a: col[a][:, 0] for a in NA_LABELS},
                  f"Fig. 11: against size at P = {Pmax:,} ({Pmax // ppn:,} nodes × {ppn})")
    fig.suptitle(f"RD vs SMP vs NAP projected to P = {max_procs:,} (Bienz et al., Figs. 10-11 "
                 "extended; max-rate model only, no contention)\n"
                 + textwrap.fill("max-rate parameters: " + pp.maxrate_source, 150), fontsize=9.5)
    return style.save(fig, path)


# ----------------------------------------------------------------------------- entry point


def make(inputs) -> list[Path]:
    """``projection_suara``, ``projection_node_aware`` (figures) and ``projection`` (table)
    up to ``MAX_PROCS`` at ``PPN`` (``project``)."""
    return project(inputs)["written"]


def project(inputs, params_file=None, max_procs: int = MAX_PROCS, ppn: int = PPN) -> dict:
    """Write ``projection_suara``, ``projection_node_aware`` (figures) and ``projection``
    (tables). ``inputs.summary`` (maybe without rows) gives the measured regions and the
    campaign's ppn values; parameters from ``params_file`` (``paper``: the paper's), else
    ``inputs.params_path``, else ``model_params.json`` in the store (``load_params``). Returns
    ``{"written", "table", "caption", "params", "fits"}``."""
    na_regions = measured_node_aware(inputs.summary)
    ppns = map_ppns(max_procs, ppn, na_regions)
    pp = load_params(params_file or inputs.params_path, inputs.store)
    region = measured_suara(inputs.summary)
    figures_dir, tables_dir = inputs.figures, inputs.tables
    written, fits = suara_figure(pp, region, figures_dir / "projection_suara", max_procs)
    written += node_aware_figure(pp, na_regions, figures_dir / "projection_node_aware", ppns,
                                 max_procs)
    df = projection_frame(pp, max_procs, int(ppn))
    cap = caption(pp, int(ppn))
    written += tables.write_table(df, tables_dir / "projection", cap, header=HEADER,
                                  rows=table_rows(df), layout=tables.Layout(bold_caption=True))
    return {"written": written, "table": df, "caption": cap, "params": pp, "fits": fits,
            "suara_region": region, "node_aware_regions": na_regions}


__all__ = ["make", "project", "suara_figure", "node_aware_figure", "HEADER", "table_rows"]
