"""What the cost models predict past the cluster, up to P = 16,384 (the numbers behind
``harness/report/projection.py``'s figures and table; docs there): the parameters (``load_params``: a file,
the campaign's ``model_params.json``, or the papers'), SUARA2 against the best single
algorithm over a grid of P and sizes (``suara_map``), RD, SMP and NAP by the max-rate model
(``node_aware_map``), the region the campaign measured (``measured_suara``,
``measured_node_aware``), the table's rows (``projection_frame``) and the speedup curves
against P (``speedup_curves``).

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
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from .. import models, paths
from ..libraries import split_name
from ..models import maxrate
from .auto_vs_best import load_summary
from .node_aware import load
from .vocabulary import timed_mask

SUARA = "suara2"
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


def node_aware_maps(params: maxrate.MaxRateParams, ppns, max_procs: int = MAX_PROCS,
                    sizes=SIZES) -> dict:
    """Per ppn its P (``procs_grid``: multiples of ppn from max(ppn, 2)) and ``node_aware_map``
    over them: ``{ppn: (procs, map)}``."""
    return {ppn: (procs, node_aware_map(params, ppn, procs, sizes)) for ppn in ppns
            for procs in [procs_grid(max_procs, multiple_of=ppn, low=max(ppn, 2))]}


def map_ppns(max_procs, ppn, measured: dict) -> list[int]:
    """The ppn values of the projection's maps: ``ppn``, then those of the ``measured``
    regions (``measured_node_aware``) up to ``max_procs``; ValueError unless max_procs >= 4 and
    2 <= ppn <= max_procs (NAP needs ppn >= 2)."""
    if int(max_procs) < 4:
        raise ValueError(f"max_procs: expected an integer >= 4, got {max_procs}")
    if int(ppn) < 2:
        raise ValueError(f"ppn: expected an integer >= 2 (NAP needs ppn >= 2), got {ppn}")
    if int(ppn) > int(max_procs):
        raise ValueError(f"ppn: expected at most max_procs={max_procs}, got {ppn}")
    return [int(ppn)] + sorted(p for p in measured if p != int(ppn) and 2 <= p <= max_procs)


def speedup_curves(params: models.Params, procs, sizes, sm: dict, curve_sizes) -> dict:
    """{size: (best grid over the best single, best grid over rs)} against ``procs`` for each
    of ``curve_sizes``: the row of ``sm`` (``suara_map`` over ``sizes``) when it has the size,
    else a map of that size alone."""
    curves = {}
    for m in curve_sizes:
        i = int(np.argmin(np.abs(np.log2(np.array(sizes, float)) - math.log2(m))))
        src, row = (sm, i) if sizes[i] == m else (suara_map(params, procs, [m]), 0)
        curves[int(m)] = (src["grid_speedup"][row], src["rs_speedup"][row])
    return curves


def fit_exponent(P, s) -> tuple[float, float]:
    """(k, c) of a speedup ``s`` against ``P`` over P >= ``FIT_FROM``: k the exponent of the
    least-squares power law s ~ P^k, c the factor of the sqrt(P) law s ~ c sqrt(P) (geometric
    mean); NaN with fewer than two usable points."""
    ok = np.isfinite(s) & (s > 0) & (P >= FIT_FROM)
    if ok.sum() < 2:
        return math.nan, math.nan
    k, a = np.polyfit(np.log(P[ok]), np.log(s[ok]), 1)
    c = math.exp(float(np.mean(np.log(s[ok]) - 0.5 * np.log(P[ok]))))
    return float(k), c


def curve_fits(P, curves: dict) -> tuple[dict, list]:
    """The fits of ``speedup_curves``: ``{size: {"exponent_best_single": k, "exponent_rs": k}}``
    (``fit_exponent``), and per speedup (over the best single, over rs) the ``(c, size)`` of the
    sqrt(P) law of the curve that peaks highest above 1 among those with an exponent
    (``(nan, None)`` without one)."""
    fits, sqrt_fits = {}, []
    for which, name in enumerate(("best_single", "rs")):
        top, best = -math.inf, (math.nan, None)
        for m, cur in curves.items():
            k, c = fit_exponent(P, cur[which])
            fits.setdefault(m, {})["exponent_" + name] = k
            if np.isfinite(k) and np.nanmax(cur[which]) > max(1, top):
                top, best = float(np.nanmax(cur[which])), (c, m)
        sqrt_fits.append(best)
    return fits, sqrt_fits


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


def _given(summary) -> bool:
    """A summary to read: a frame, or the path of a file that exists."""
    return isinstance(summary, pd.DataFrame) or (summary is not None and Path(summary).is_file())


def _measured_rows(summary_csv) -> pd.DataFrame:
    """The summary's timed, undelayed allreduce rows (workload rows left out)."""
    d = load_summary(summary_csv)
    return d[timed_mask(d) & (d["delay"] == "none")]


def measured_suara(summary_csv) -> Region | None:
    """The SUARA cells of a summary: ``suara2`` and Open MPI's native algorithms, timed
    (ok / not-converged) and undelayed. None without a summary or such cells."""
    if not _given(summary_csv):
        return None
    d = _measured_rows(summary_csv)
    openmpi = d["library"].map(lambda lib: split_name(lib)[0] == "openmpi")
    keep = (d["algorithm"] == SUARA) | (openmpi & (d["kind"] == "native"))
    return _region(d[keep])


def measured_node_aware(summary_csv) -> dict[int, Region]:
    """Per ppn, the region of the summary's timed, undelayed RD/SMP/NAP cells (algorithms
    ``recursive_doubling``, ``smp``, ``nap``; ppn from the record or the ``ppn`` parameter)."""
    if not _given(summary_csv):
        return {}
    d = load(summary_csv)
    if d.empty:
        return {}
    d = d[timed_mask(d) & (d["delay"] == "none")]
    return {int(ppn): _region(g) for ppn, g in d.groupby("ppn")}


# ----------------------------------------------------------------------------- table


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
