"""Model projections past the cluster: what the cost models predict up to P = 16,384.

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
without such cells the panel's title says so.

Parameters (``load_params``): a JSON file (``--params``), else the campaign's
``model_params.json`` when present (written by ``harness fit``; its top-level keys are
``models.Params.to_dict()``, and a ``maxrate`` key may hold ``MaxRateParams`` fields), else
the paper's Table 4 (``Params.paper()``) and ``MaxRateParams.defaults()`` (illustrative).
Hockney algorithms missing from a fit take the paper's values; every figure and table
names the parameters used (path and provenance source).

A SUARA2 grid whose predicted speedup is below ``TIE`` (1 %) is counted as a tie and the
map shows the single algorithm: the Table 1 models give e.g. (rd, rs) on a 2 x P/2 grid a
0.01 % edge over rd at 8 bytes, which no measurement could see.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, fields
from pathlib import Path

import matplotlib
import matplotlib.colors
import matplotlib.patheffects
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .. import models, paths
from ..fileio import atomic_write_text
from ..models import maxrate
from . import style, tables
from .node_aware import load

MAX_PROCS = 16384
PPN = 16
# highly composite numbers: many divisors, so SUARA2 has many grids to choose from
HIGHLY_COMPOSITE = (12, 24, 36, 48, 60, 120, 180, 240, 360, 720, 840, 1260, 1680, 2520, 5040,
                    7560, 10080, 15120)
SIZES = tuple(2 ** k for k in range(3, 29))  # 8B .. 256MiB
TABLE_PROCS = (16, 64, 256, 1024, 4096, 16384)
TABLE_SIZES = (8, 2048, 65536, 1 << 20, 16 << 20)
CURVE_SIZES = (8192, 65536, 1 << 20, 16 << 20)
TIE = 0.01
FIT_FROM = 256  # the speedup exponent is fitted over P >= this (the asymptotic regime)

# Table 1 model name -> the Open MPI algorithm, for colours and legends
NATIVE = {"linear": "native:basic_linear", "nono": "native:nonoverlapping",
          "rd": "native:recursive_doubling", "rnos": "native:ring",
          "rs": "native:segmented_ring", "rab": "native:rabenseifner"}
NAMES = {"linear": "linear", "nono": "nonoverlapping (reduce + bcast)",
         "rd": "recursive doubling", "rnos": "ring", "rs": "segmented ring",
         "rab": "Rabenseifner"}
SUARA = "suara2"
# on the map SUARA2 is orange (style's "suara"): its usual magenta is close to rs's pink
SUARA_COLOR = style.color("suara")
NA_LABELS = {"rd": "RD", "smp": "SMP", "nap": "NAP"}
NA_COLORS = {"rd": style.color("recursive_doubling"), "smp": style.color("native:smp"),
             "nap": "#e6550d"}
NA_SUMMARY = {"recursive_doubling": "rd", "smp": "smp", "nap": "nap"}
MAXRATE_FIELDS = tuple(f.name for f in fields(maxrate.MaxRateParams))


# ----------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class ProjectionParams:
    """The two models' parameters and where each came from (``*_source``: for titles)."""

    hockney: models.Params
    maxrate: maxrate.MaxRateParams
    hockney_source: str
    maxrate_source: str


def _display_path(path) -> str:
    p = Path(path).resolve()
    for root in (paths.results_root().parent, paths.REPO_ROOT):
        try:
            return str(p.relative_to(root))
        except ValueError:
            pass
    return str(path)


def _prov_source(prov) -> str:
    """The provenance's ``source``; for the max-rate section of ``harness fit`` (no source
    key): the library fitted and the parameters that fell back."""
    if not isinstance(prov, dict):
        return "no provenance"
    if prov.get("source"):
        return str(prov["source"])
    if prov.get("library") or prov.get("levels"):
        text = f"ping-pong fit, library {prov.get('library') or 'any'}"
        if prov.get("fallbacks"):
            text += "; fallbacks for " + ", ".join(map(str, prov["fallbacks"]))
        return text
    return "no provenance source"


def parse_params(doc, where: str) -> ProjectionParams:
    """Both models' parameters from one JSON document (see the module docstring); ``where``
    names the document in errors and titles. Raises ValueError naming the key."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    hockney = hsrc = mr = msrc = None
    if "ab" in doc:
        try:
            hockney = models.Params.from_dict(doc)
        except KeyError as exc:
            raise ValueError(f"{where}: missing key {exc} (expected the keys of "
                             "harness.models.Params.to_dict(): ab, gamma, m_s, rs_segments)") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{where}: Hockney parameters (keys ab, gamma, m_s): {exc}") from None
        bad = [a for a in hockney.ab if a not in models.ALL6]
        if bad:
            raise ValueError(f"{where}: key ab: unknown algorithm(s) {', '.join(map(repr, bad))}; "
                             f"expected some of {', '.join(models.ALL6)}")
        for key, v in [("gamma", hockney.gamma), ("m_s", hockney.m_s)] + [
                (f"ab.{a}", x) for a, pair in hockney.ab.items() for x in pair]:
            if not (math.isfinite(v) and v >= 0) or (key == "m_s" and v == 0):
                raise ValueError(f"{where}: key {key}: expected a non-negative finite number, got {v!r}")
        missing = [a for a in models.ALL6 if a not in hockney.ab]
        hsrc = f"{where} ({_prov_source(hockney.provenance)})"
        if missing:
            ab = dict(hockney.ab)
            ab.update({a: models.Params.paper().ab[a] for a in missing})
            hockney = models.Params(ab=ab, gamma=hockney.gamma, m_s=hockney.m_s,
                                    rs_segments=hockney.rs_segments,
                                    provenance={**hockney.provenance, "from_paper": missing})
            hsrc += f"; {', '.join(missing)} from the paper"
    block, block_key = None, None
    if isinstance(doc.get("maxrate"), dict):
        block, block_key = doc["maxrate"], "maxrate"
    elif "ab" not in doc and any(k in doc for k in MAXRATE_FIELDS):
        block, block_key = doc, None
    if block is not None:
        values = {k: block[k] for k in MAXRATE_FIELDS if k in block}
        try:
            mr = maxrate.MaxRateParams.from_dict(values)
        except ValueError as exc:
            raise ValueError(f"{where}: {'key maxrate: ' if block_key else ''}{exc}") from None
        given = sorted(values)
        msrc = f"{where} ({_prov_source(block.get('provenance'))}"
        if len(given) < len(MAXRATE_FIELDS):
            msrc += "; " + ", ".join(k for k in MAXRATE_FIELDS if k not in values) + " illustrative"
        msrc += ")"
    elif "maxrate" in doc:
        raise ValueError(f"{where}: key maxrate: expected an object of {', '.join(MAXRATE_FIELDS)}, "
                         f"got {doc['maxrate']!r}")
    if hockney is None and mr is None:
        raise ValueError(f"{where}: no model parameters: expected the keys of "
                         "harness.models.Params.to_dict() (ab, gamma, m_s) and/or a 'maxrate' "
                         f"object of {', '.join(MAXRATE_FIELDS)}; got keys {sorted(doc)}")
    if hockney is None:
        hockney, hsrc = models.Params.paper(), f"paper Table 4 (none in {where})"
    if mr is None:
        mr, msrc = maxrate.MaxRateParams.defaults(), f"illustrative defaults (none in {where})"
    return ProjectionParams(hockney, mr, hsrc, msrc)


def load_params(params_file=None, campaign_dir=None) -> ProjectionParams:
    """``params_file`` if given (errors name it; ``paper``: the paper's, as ``harness model
    suara2 --params paper``), else ``<campaign_dir>/model_params.json`` when it exists, else
    the paper's and the illustrative defaults."""
    if params_file == "paper":
        params_file, campaign_dir = None, None
    path = Path(params_file) if params_file else None
    if path is None and campaign_dir is not None:
        cand = Path(campaign_dir) / "model_params.json"
        if cand.is_file():
            path = cand
    if path is None:
        return ProjectionParams(models.Params.paper(), maxrate.MaxRateParams.defaults(),
                                "paper Table 4 (Nuriyev et al.)",
                                "illustrative defaults (MaxRateParams.defaults())")
    where = _display_path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where}: not valid JSON: {exc}") from None
    return parse_params(doc, where)


# ----------------------------------------------------------------------------- model grids


def procs_grid(max_procs: int = MAX_PROCS, multiple_of: int = 1, low: int = 4) -> list[int]:
    """Powers of two and highly composite numbers from ``low`` to ``max_procs`` (included),
    multiples of ``multiple_of`` only."""
    cand = {2 ** k for k in range(1, 40) if 2 ** k <= max_procs} | set(HIGHLY_COMPOSITE)
    cand.add(int(max_procs))
    return sorted(p for p in cand if low <= p <= max_procs and p % multiple_of == 0)


def suara_map(params: models.Params, procs, sizes, tie: float = TIE) -> dict:
    """SUARA2 (Algorithm 2) against the best single algorithm at every (size, P): arrays of
    shape (len(sizes), len(procs)) — ``winner`` ("suara2" or a Table 1 name), ``time`` (the
    winner's), ``single``/``single_time`` (best single algorithm on all P), ``speedup``
    (single_time / time, 1 where a single algorithm wins), ``grid_speedup`` (best proper grid
    over the best single, whatever wins; NaN without a grid), ``rs_speedup`` (best grid over
    rs alone), ``a_r``, ``a_c``, ``P_r``, ``P_c`` (the best grid's). A grid wins only with a
    speedup above ``1 + tie``. ``models.decide_suara2`` costs some tens of microseconds, so
    the whole map takes well under a second."""
    procs, sizes = [int(p) for p in procs], [float(s) for s in sizes]
    shape = (len(sizes), len(procs))
    out = {k: np.full(shape, np.nan) for k in ("time", "single_time", "speedup", "grid_speedup",
                                               "rs_speedup", "grid_time")}
    for k in ("winner", "single", "a_r", "a_c"):
        out[k] = np.full(shape, "", dtype=object)
    out["P_r"] = np.zeros(shape, dtype=int)
    out["P_c"] = np.zeros(shape, dtype=int)
    for i, m in enumerate(sizes):
        for j, P in enumerate(procs):
            single, t_single = models.best_single(P, m, params)
            ar, ac, pr, pc, t_grid, fallback = models.decide_suara2(P, m, params, grids_only=True)
            out["single"][i, j], out["single_time"][i, j] = single, t_single
            if fallback != "no-grid":
                out["a_r"][i, j], out["a_c"][i, j] = ar, ac
                out["P_r"][i, j], out["P_c"][i, j] = pr, pc
                out["grid_time"][i, j] = t_grid
                out["grid_speedup"][i, j] = t_single / t_grid
                out["rs_speedup"][i, j] = models.cost("rs", P, m, params) / t_grid
            if fallback != "no-grid" and t_grid * (1 + tie) < t_single:
                out["winner"][i, j], out["time"][i, j] = SUARA, t_grid
                out["speedup"][i, j] = t_single / t_grid
            else:
                out["winner"][i, j], out["time"][i, j] = single, t_single
                out["speedup"][i, j] = 1.0
    out["procs"], out["sizes"] = np.array(procs), np.array(sizes)
    return out


def node_aware_map(params: maxrate.MaxRateParams, ppn: int, procs, sizes) -> dict:
    """The max-rate model of RD, SMP and NAP at every (size, P) with P = nodes x ppn (every P
    must be a multiple of ppn): arrays (len(sizes), len(procs)) ``winner`` ("rd", "smp",
    "nap"), ``time`` (the winner's), ``rd``/``smp``/``nap`` (each one's time) and
    ``speedup`` (RD time / winner time). Ties go to RD, then SMP."""
    procs, sizes = [int(p) for p in procs], [float(s) for s in sizes]
    shape = (len(sizes), len(procs))
    out = {a: np.full(shape, np.nan) for a in maxrate.ALGORITHMS}
    for j, P in enumerate(procs):
        if P % ppn:
            raise ValueError(f"P={P} is not a multiple of ppn={ppn}")
        for i, s in enumerate(sizes):
            for a in maxrate.ALGORITHMS:
                out[a][i, j] = maxrate.cost(a, P // ppn, ppn, s, params).total
    stack = np.stack([out[a] for a in maxrate.ALGORITHMS])
    idx = np.argmin(stack, axis=0)
    out["winner"] = np.array(maxrate.ALGORITHMS, dtype=object)[idx]
    out["time"] = np.take_along_axis(stack, idx[None], axis=0)[0]
    out["speedup"] = out["rd"] / out["time"]
    out["procs"], out["sizes"], out["ppn"] = np.array(procs), np.array(sizes), int(ppn)
    return out


# ----------------------------------------------------------------------------- measured region


@dataclass(frozen=True)
class Region:
    """Min..max P and size of the measured cells concerned, and how many there are."""

    p_min: int
    p_max: int
    s_min: int
    s_max: int
    cells: int


def _region(d: pd.DataFrame) -> Region | None:
    if d.empty:
        return None
    return Region(int(d["procs"].min()), int(d["procs"].max()), int(d["size"].min()),
                  int(d["size"].max()), len(d))


def _timed_undelayed(summary_csv) -> pd.DataFrame:
    d = tables.load_summary(summary_csv)  # workload rows left out
    d = d[tables.timed_mask(d)]
    return d[d["delay"].astype(str).isin(["none", "", "nan"])]


def measured_suara(summary_csv) -> Region | None:
    """The SUARA cells of a summary: ``suara2`` and Open MPI's native algorithms, timed
    (ok / not-converged) and undelayed. None without a summary or such cells."""
    if summary_csv is None or not Path(summary_csv).is_file():
        return None
    d = _timed_undelayed(summary_csv)
    keep = (d["algorithm"] == SUARA) | ((d["library"] == "openmpi")
                                        & d["algorithm"].str.startswith("native:"))
    return _region(d[keep])


def measured_node_aware(summary_csv) -> dict[int, Region]:
    """Per ppn, the region of the summary's timed, undelayed RD/SMP/NAP cells (algorithms
    ``recursive_doubling``, ``smp``, ``nap``; ppn from the record or the ``ppn`` parameter)."""
    if summary_csv is None or not Path(summary_csv).is_file():
        return {}

    d = load(summary_csv)
    if d.empty:
        return {}
    d = d[d["status"].isin(tables.TIMED) & (pd.to_numeric(d["mean"], errors="coerce") > 0)]
    if "delay" in d:
        d = d[d["delay"].astype(str).isin(["none", "", "nan"])]
    return {int(ppn): _region(g) for ppn, g in d.groupby("ppn")}


# ----------------------------------------------------------------------------- table


def _grid_text(r) -> str:
    return f"SUARA2 {r['P_r']}×{r['P_c']} ({r['a_r']}, {r['a_c']})"


def projection_frame(pp: ProjectionParams, max_procs: int = MAX_PROCS, ppn: int = PPN,
                     procs=TABLE_PROCS, sizes=TABLE_SIZES) -> pd.DataFrame:
    """One row per (P, size) of the table grid (P up to ``max_procs``): SUARA2's decision and
    the best single algorithm; RD/SMP/NAP at ``ppn`` (empty when ppn does not divide P)."""
    procs = [p for p in procs if p <= max_procs] or [int(max_procs)]
    sm = suara_map(pp.hockney, procs, sizes)
    rows = []
    for j, P in enumerate(procs):
        na = node_aware_map(pp.maxrate, ppn, [P], sizes) if P % ppn == 0 else None
        for i, s in enumerate(sizes):
            r = {"procs": P, "size": int(s), "suara_winner": sm["winner"][i, j],
                 "a_r": sm["a_r"][i, j], "a_c": sm["a_c"][i, j], "P_r": int(sm["P_r"][i, j]),
                 "P_c": int(sm["P_c"][i, j]), "suara_time": sm["time"][i, j],
                 "best_single": sm["single"][i, j], "best_single_time": sm["single_time"][i, j],
                 "speedup": sm["speedup"][i, j], "grid_speedup": sm["grid_speedup"][i, j],
                 "rs_speedup": sm["rs_speedup"][i, j], "ppn": ppn}
            for k in ("na_winner", "rd_time", "smp_time", "nap_time", "na_time", "na_speedup_over_rd"):
                r[k] = "" if k == "na_winner" else math.nan
            if na is not None:
                r.update(na_winner=na["winner"][i, 0], rd_time=na["rd"][i, 0],
                         smp_time=na["smp"][i, 0], nap_time=na["nap"][i, 0],
                         na_time=na["time"][i, 0], na_speedup_over_rd=na["speedup"][i, 0])
            rows.append(r)
    return pd.DataFrame(rows)


HEADER = ["P", "size", "SUARA2 model: winner", "time", "best single", "time", "speedup",
          "best grid / best single", "node-aware winner", "time", "speedup over RD"]


def _t(seconds) -> str:
    return tables.format_time(float(seconds))[0] if np.isfinite(seconds) else "–"


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


def write_tables(df: pd.DataFrame, path_without_ext, cap: str) -> list[Path]:
    """``<path>.md``, ``.tex`` and ``.csv`` (the numbers, times in seconds), each atomically."""
    base = Path(path_without_ext)
    base.parent.mkdir(parents=True, exist_ok=True)
    rows = table_rows(df)
    md, tex, csv = (base.parent / f"{base.name}.{ext}" for ext in ("md", "tex", "csv"))
    atomic_write_text(md, tables.plain_markdown(HEADER, rows, f"**{cap}**"))
    atomic_write_text(tex, tables.plain_latex(HEADER, rows, cap, label="tab:projection"))
    atomic_write_text(csv, df.to_csv(index=False))
    return [md, tex, csv]


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


def _size_axis(ax, lo, hi, axis="y") -> None:
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log", base=2)
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
    ticks = [2 ** k for k in (3, 6, 10, 13, 16, 20, 23, 26, 30) if lo <= 2 ** k <= hi]
    a.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    a.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: tables.format_size(int(round(v)))))
    a.set_minor_locator(matplotlib.ticker.FixedLocator([2 ** k for k in range(0, 40) if lo <= 2 ** k <= hi]))
    a.set_minor_formatter(matplotlib.ticker.NullFormatter())
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)("message size per process")


def _time_axis(ax) -> None:
    """Log axis of times given in µs, labelled 2 µs, 10 µs, 1 ms, 1 s."""
    def label(v, _):
        return tables.format_time(v * 1e-6)[0].replace(".00", "").replace(".0 ", " ")
    lo, hi = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-300) < 100 else (1.0,)
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(label))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("modelled time")


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


def _paint(ax, procs, sizes, winner, speedup, colours, shaded, top):
    """The map: one rectangle per (size, P) in the winner's colour, shaded winners by speedup."""
    rgb = np.ones(winner.shape + (3,))
    for i in range(winner.shape[0]):
        for j in range(winner.shape[1]):
            w = winner[i, j]
            rgb[i, j] = _mix(colours[w], _shade(speedup[i, j], top) if w in shaded else FLAT)
    xe, ye = _edges(procs), _edges(sizes)
    ax.pcolormesh(xe, ye, rgb, shading="flat", rasterized=True)
    ax.grid(False)
    return xe, ye


def _outline(ax, region: Region | None, xe, ye, colour="black") -> None:
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


def _fit_exponent(P, s):
    ok = np.isfinite(s) & (s > 0) & (P >= FIT_FROM)
    if ok.sum() < 2:
        return math.nan, math.nan
    k, a = np.polyfit(np.log(P[ok]), np.log(s[ok]), 1)
    c = math.exp(float(np.mean(np.log(s[ok]) - 0.5 * np.log(P[ok]))))
    return float(k), c


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
    xe, ye = _paint(ax, procs, sizes, sm["winner"], sup, colours, {SUARA}, top)
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
    _p_axis(ax, xe[0], xe[-1])
    _size_axis(ax, ye[0], ye[-1])
    _outline(ax, region, xe, ye)
    present = [w for w in [SUARA, *models.ALL6] if (sm["winner"] == w).any()]
    handles = [Patch(color=_mix(colours[w], 0.85 if w == SUARA else FLAT),
                     label="SUARA2, grid P_r×P_c (text)" if w == SUARA else f"{w}: {NAMES[w]}")
               for w in present]
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
    fits = {}
    curves = {}
    for m in curve_sizes:
        i = int(np.argmin(np.abs(np.log2(np.array(sizes, float)) - math.log2(m))))
        src = sm if sizes[i] == m else suara_map(pp.hockney, procs, [m])
        row = i if sizes[i] == m else 0
        curves[int(m)] = (src["grid_speedup"][row], src["rs_speedup"][row])
    for panel, (axp, which, ref) in enumerate(((ax2, 0, "the best single algorithm"),
                                               (ax3, 1, "rs alone (eq. 17's comparison)"))):
        best_c, best_k, best_m = math.nan, -math.inf, None
        for n, (m, cur) in enumerate(curves.items()):
            y = cur[which]
            c = cmap(n / max(1, len(curves) - 1) * 0.85)
            k, cf = _fit_exponent(P, y)
            fits.setdefault(m, {})["exponent_" + ("best_single" if which == 0 else "rs")] = k
            axp.plot(P, y, "-o", color=c, ms=2.5, lw=1.1,
                     label=f"{tables.format_size(m)}: ~P^{k:.2f}")
            if np.isfinite(k) and np.nanmax(y) > 1 and (best_m is None or np.nanmax(y) > best_k):
                best_c, best_k, best_m = cf, float(np.nanmax(y)), m
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


def _ordered_legend(ax) -> None:
    """Legend in the order RD, SMP, NAP whatever the drawing order."""
    lines = {h.get_label(): h for h in ax.get_lines()}
    ax.legend(handles=[lines[NA_LABELS[a]] for a in maxrate.ALGORITHMS if NA_LABELS[a] in lines])


def node_aware_figure(pp: ProjectionParams, regions: dict[int, Region], path, ppns,
                      max_procs=MAX_PROCS, sizes=SIZES) -> list[Path]:
    ppns = list(dict.fromkeys(int(p) for p in ppns))
    style.setup()
    fig = Figure(figsize=(4.6 * max(2, len(ppns)), 8.4), layout="constrained")
    top_row, bottom = fig.subfigures(2, 1, height_ratios=[1.25, 1])
    axes = top_row.subplots(1, len(ppns), squeeze=False)[0]
    maps = {}
    for ppn in ppns:
        procs = procs_grid(max_procs, multiple_of=ppn, low=max(ppn, 2))
        maps[ppn] = (procs, node_aware_map(pp.maxrate, ppn, procs, sizes))
    top = max(float(np.nanmax(na["speedup"])) for _, na in maps.values())
    for ax, ppn in zip(axes, ppns):
        procs, na = maps[ppn]
        xe, ye = _paint(ax, procs, sizes, na["winner"], na["speedup"], NA_COLORS,
                        {"smp", "nap"}, top)
        _p_axis(ax, xe[0], xe[-1])
        _size_axis(ax, ye[0], ye[-1])
        region = regions.get(ppn)
        _outline(ax, region, xe, ye)
        ax.set_title(f"ppn {ppn} (P = nodes × {ppn})\n"
                     + (_measured_note(region, "RD/SMP/NAP") if region else
                        f"no RD/SMP/NAP cells measured at ppn {ppn}"), fontsize=8.5)
    for name in ("nap", "smp"):
        if any((na["winner"] == name).any() for _, na in maps.values()):
            _colourbar(top_row, list(axes), NA_COLORS[name], top, f"{NA_LABELS[name]} over RD")
    handles = [Patch(color=_mix(NA_COLORS[a], 0.85 if a != "rd" else FLAT),
                     label={"rd": "RD: recursive doubling", "smp": "SMP: master per node",
                            "nap": "NAP: node-aware parallel"}[a]) for a in maxrate.ALGORITHMS]
    top_row.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False,
                   title="fastest predicted; shade = its speedup over RD (RD: flat)")
    # Figs. 10-11 of the paper at the first ppn
    ppn = ppns[0]
    b1, b2 = bottom.subplots(1, 2)
    procs = procs_grid(max_procs, multiple_of=ppn, low=max(ppn, 2))
    line = node_aware_map(pp.maxrate, ppn, procs, [8])
    dashes = {"rd": (0, (4, 2)), "smp": "-", "nap": "-"}
    marks = {"rd": "o", "smp": "s", "nap": "^"}
    for a in ("smp", "nap", "rd"):  # RD last and dashed: at 8 B it lies on SMP
        b1.plot(procs, line[a][0] * 1e6, ls=dashes[a], marker=marks[a], ms=3.5,
                mfc="none" if a == "rd" else NA_COLORS[a], color=NA_COLORS[a], label=NA_LABELS[a])
    _p_axis(b1, procs[0] / 1.2, procs[-1] * 1.2)
    b1.set_yscale("log")
    _time_axis(b1)
    b1.set_title(f"Fig. 10: one 8-byte value against P (ppn {ppn})", fontsize=8.5)
    _ordered_legend(b1)
    Pmax = procs[-1]
    col = node_aware_map(pp.maxrate, ppn, [Pmax], sizes)
    for a in ("smp", "nap", "rd"):
        b2.plot(sizes, col[a][:, 0] * 1e6, ls=dashes[a], marker=marks[a], ms=3,
                mfc="none" if a == "rd" else NA_COLORS[a], color=NA_COLORS[a], label=NA_LABELS[a])
    _size_axis(b2, sizes[0] / 1.3, sizes[-1] * 1.3, axis="x")
    b2.set_yscale("log")
    _time_axis(b2)
    b2.set_title(f"Fig. 11: against size at P = {Pmax:,} ({Pmax // ppn:,} nodes × {ppn})",
                 fontsize=8.5)
    _ordered_legend(b2)
    fig.suptitle(f"RD vs SMP vs NAP projected to P = {max_procs:,} (Bienz et al., Figs. 10-11 "
                 "extended; max-rate model only, no contention)\n"
                 + textwrap.fill("max-rate parameters: " + pp.maxrate_source, 150), fontsize=9.5)
    return style.save(fig, path)


# ----------------------------------------------------------------------------- entry point


def make_projection(summary_csv, tables_dir, figures_dir, params_file=None,
                    max_procs: int = MAX_PROCS, ppn: int = PPN) -> dict:
    """Write ``projection_suara``, ``projection_node_aware`` (figures) and ``projection``
    (tables). ``summary_csv`` (may be None or missing) gives the measured regions and the
    campaign's ppn values; parameters from ``params_file`` or the summary's directory
    (``load_params``). Returns ``{"written", "table", "caption", "params", "fits"}``."""
    if int(max_procs) < 4:
        raise ValueError(f"max_procs: expected an integer >= 4, got {max_procs}")
    if int(ppn) < 2:
        raise ValueError(f"ppn: expected an integer >= 2 (NAP needs ppn >= 2), got {ppn}")
    if int(ppn) > int(max_procs):
        raise ValueError(f"ppn: expected at most max_procs={max_procs}, got {ppn}")
    campaign_dir = Path(summary_csv).parent if summary_csv is not None else None
    pp = load_params(params_file, campaign_dir)
    region = measured_suara(summary_csv)
    na_regions = measured_node_aware(summary_csv)
    ppns = [int(ppn)] + sorted(p for p in na_regions if p != int(ppn) and 2 <= p <= max_procs)
    figures_dir, tables_dir = Path(figures_dir), Path(tables_dir)
    written, fits = suara_figure(pp, region, figures_dir / "projection_suara", max_procs)
    written += node_aware_figure(pp, na_regions, figures_dir / "projection_node_aware", ppns,
                                 max_procs)
    df = projection_frame(pp, max_procs, int(ppn))
    cap = caption(pp, int(ppn))
    written += write_tables(df, tables_dir / "projection", cap)
    return {"written": written, "table": df, "caption": cap, "params": pp, "fits": fits,
            "suara_region": region, "node_aware_regions": na_regions}


__all__ = ["make_projection", "load_params", "parse_params", "suara_map", "node_aware_map",
           "measured_suara", "measured_node_aware", "projection_frame", "procs_grid", "Region"]
