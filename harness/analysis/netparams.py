"""Network parameters fitted from a campaign's ping-pong and local-reduction cells.

Two kinds of summary row feed the fits (``results/<c>/summary.csv``):

- ``algorithm == "pingpong"``: ``size`` bytes per message, ``mean`` the one-way time (round
  trip / 2) in seconds; ``params`` JSON carries ``"pairs": k`` (k pairs ping-ponging at once)
  and ``record`` JSON ``"level"`` (``socket``, ``node``, ``network`` or ``mixed``) and
  ``"pairs"``;
- ``algorithm == "reduce_local"``: ``mean`` the seconds of one local reduction of ``size``
  bytes.

Only rows with a time (status ``ok`` or ``not-converged``, positive finite mean) are used.

**Hockney fit** (``fit_hockney``): ``mean = alpha + beta * size`` over the one-pair rows of
one library and level, by non-negative least squares *weighted by 1/mean* (each row's
relative error counts, as in ``harness.models.fit``): one-way times span five orders of
magnitude between 8 B and 64 MiB, and an unweighted fit lets the largest messages decide
alpha (it comes out negative or zero). With relative weights the small sizes fix alpha and
the large ones beta. ``r2`` is the plain (unweighted) coefficient of determination of the
fitted line, ``n`` the rows used, ``sizes`` the smallest and largest size.

**gamma** (``fit_gamma_rows``): the least-squares slope of reduce_local time against bytes
(``harness.models.fit_gamma``; the large sizes dominate a slope, which is what a per-byte
cost needs), op ``sum``, the most frequent dtype, per library when that library has rows.

**Max-rate parameters** (Bienz et al., eq. 3; ``harness.models.maxrate.MaxRateParams``), one set for
the campaign (the library ``openmpi`` when it has ping-pong rows, else the first):

- ``alpha_l``, ``beta_l``: Hockney fit of the one-pair rows at level ``node`` (two sockets:
  the dearer intra-node path), else ``socket``;
- ``alpha``, ``R_b = 1/beta``: Hockney fit of the one-pair rows at level ``network``;
- ``R_N``: the largest aggregate bandwidth ``k * size / mean`` over the rows of the network
  level (every k, every size);
- ``gamma``: as above.

A level that was not measured falls back explicitly: network := node := socket (and back the
other way for the intra-node pair), and ``provenance["fallbacks"]`` says which parameter came
from which level and why. With only one pair measured, R_N is the one-pair bandwidth.

``fit_file(summary_csv, ...)`` assembles ``model_params.json``: the keys of
``harness.models.Params.to_dict()`` (the Table 1 fit of Open MPI's native algorithms when the
campaign has such cells, else every algorithm gets the ping-pong pair), plus ``"pingpong"``
(per library) and ``"maxrate"`` (the ``MaxRateParams`` fields and their provenance). Both
``Params.from_dict`` and ``MaxRateParams.from_dict`` read that file.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from .. import models
from ..errors import FitError
from ..fileio import write_json
from ..models import maxrate
from ..results.summary import load, typed
from .fit import fit_campaign
from .vocabulary import timed_mask

LEVELS = ("socket", "node", "network")
PREFERRED_LIBRARY = "openmpi"


# --------------------------------------------------------------------------- rows


def _json(text) -> dict:
    if isinstance(text, Mapping):
        return dict(text)
    if isinstance(text, str) and text.strip():
        try:
            v = json.loads(text)
        except ValueError:
            return {}
        return v if isinstance(v, dict) else {}
    return {}


def _probe_rows(df: pd.DataFrame, algorithm: str) -> pd.DataFrame:
    """The rows of ``algorithm`` that carry a time (``timed_mask``), their mean a number."""
    d = df[df["algorithm"] == algorithm]
    return d[timed_mask(d)].assign(mean=lambda x: pd.to_numeric(x["mean"], errors="coerce"))


def pingpong_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The timed ping-pong rows with ``level`` and ``pairs`` columns (from ``record``, else
    ``params``; pairs default 1)."""
    if "algorithm" not in df.columns:
        return df.iloc[0:0]
    d = _probe_rows(df, "pingpong")
    rec = d["record"].map(_json) if "record" in d.columns else pd.Series([{}] * len(d), index=d.index)
    par = d["params"].map(_json) if "params" in d.columns else pd.Series([{}] * len(d), index=d.index)
    level = [str(r.get("level", "")) or None for r in rec]
    pairs = [int(r.get("pairs", p.get("pairs", 1)) or 1) for r, p in zip(rec, par)]
    d = d.assign(level=level, pairs=pairs, size=pd.to_numeric(d["size"], errors="coerce"))
    return d[d["level"].isin(LEVELS + ("mixed",))]


def reduce_local_rows(df: pd.DataFrame) -> pd.DataFrame:
    if "algorithm" not in df.columns:
        return df.iloc[0:0]
    d = _probe_rows(df, "reduce_local")
    return d.assign(size=pd.to_numeric(d["size"], errors="coerce"))


def kinds(df: pd.DataFrame) -> dict:
    """Which cell kinds a summary frame has: ``pingpong``, ``reduce_local``, ``native``
    (native allreduce cells, workloads left out)."""

    if "algorithm" not in df.columns or not len(df):
        return {"pingpong": False, "reduce_local": False, "native": False}
    d = typed(df)
    return {"pingpong": bool((d["algorithm"] == "pingpong").any()),
            "reduce_local": bool((d["algorithm"] == "reduce_local").any()),
            "native": bool((d["kind"] == "native").any())}


# --------------------------------------------------------------------------- fits


def fit_hockney(sizes, times, weighting: str = "relative") -> dict:
    """``times ~= alpha + beta * sizes`` by non-negative least squares; ``weighting``
    ``relative`` (rows divided by their time, the default) or ``none``. Returns ``alpha``
    (s), ``beta`` (s/B), ``r2`` (unweighted), ``n`` and ``sizes`` ([min, max])."""
    from scipy.optimize import nnls

    x = np.asarray(sizes, dtype=float)
    y = np.asarray(times, dtype=float)
    if len(x) < 2 or np.unique(x).size < 2:
        raise FitError(f"need at least two distinct sizes to fit alpha and beta, got "
                       f"{sorted(set(x.tolist()))}")
    if weighting == "relative":
        w = 1.0 / y
    elif weighting == "none":
        w = np.ones_like(y)
    else:
        raise ValueError(f"weighting: expected 'relative' or 'none', got {weighting!r}")
    X = np.column_stack([np.ones_like(x), x]) * w[:, None]
    scale = np.linalg.norm(X, axis=0)
    sol, _ = nnls(X / scale, y * w)
    alpha, beta = (sol / scale).tolist()
    r2 = models.r_squared(y, alpha + beta * x)
    return {"alpha": float(alpha), "beta": float(beta), "r2": float(r2), "n": int(len(x)),
            "sizes": [int(x.min()), int(x.max())]}


def fit_gamma_rows(df: pd.DataFrame, library: str | None = None) -> tuple[float, dict]:
    """gamma (s/B) from the reduce_local rows (op sum, the most frequent dtype; those of
    ``library`` when it has some, else all libraries pooled). Raises FitError without rows."""
    d = reduce_local_rows(df)
    if "op" in d.columns and (d["op"].astype(str) == "sum").any():
        d = d[d["op"].astype(str) == "sum"]
    if not len(d):
        raise FitError("no timed reduce_local rows")
    pooled = True
    if library is not None and "library" in d.columns and (d["library"] == library).any():
        d, pooled = d[d["library"] == library], False
    dtype = None
    if "dtype" in d.columns:
        dtype = str(d["dtype"].astype(str).mode().iloc[0])
        d = d[d["dtype"].astype(str) == dtype]
    if d["size"].nunique() < 2:
        raise FitError(f"reduce_local: need at least two distinct sizes, got {sorted(d['size'].unique())}")
    gamma = models.fit_gamma(d["size"], d["mean"])
    if not gamma > 0:
        raise FitError(f"reduce_local: the fitted slope is {gamma:.3g} s/B, not positive")
    pred = np.polyval(np.polyfit(d["size"].astype(float), d["mean"].astype(float), 1),
                      d["size"].astype(float))
    info = {"from": "reduce_local rows: least-squares slope of time against bytes",
            "library": None if pooled else library, "dtype": dtype, "n": int(len(d)),
            "sizes": [int(d["size"].min()), int(d["size"].max())],
            "r2": models.r_squared(d["mean"].to_numpy(float), pred)}
    return float(gamma), info


def _libraries(d: pd.DataFrame) -> list[str]:
    libs = sorted({str(v) for v in d["library"]}) if "library" in d.columns else []
    return sorted(libs, key=lambda l: (l != PREFERRED_LIBRARY, l))


def fit_levels(pp: pd.DataFrame, library: str) -> dict:
    """Per level: the Hockney fit of the one-pair rows of ``library``, ``{"error": ...}`` when
    it fails; levels without one-pair rows are absent."""
    d = pp[(pp["library"] == library) & (pp["pairs"] == 1)] if "library" in pp.columns else pp[pp["pairs"] == 1]
    out = {}
    for level in LEVELS:
        rows = d[d["level"] == level]
        if not len(rows):
            continue
        try:
            out[level] = fit_hockney(rows["size"], rows["mean"])
        except FitError as e:
            out[level] = {"error": str(e)}
    return out


def fit_pingpong(df: pd.DataFrame, gamma: float | None = None,
                 gamma_by_library: Mapping[str, float] | None = None) -> dict:
    """``{library: {"alpha", "beta", "gamma", "r2", "n", "sizes", "level"}}`` from the one-pair
    ping-pong rows, at the farthest level measured (network, else node, else socket: the
    papers' ping-pong runs between nodes). A library whose fit fails is left out; FitError
    (naming every library's reason) only when none can be fitted."""
    pp = pingpong_rows(df)
    out, errors = {}, {}
    for lib in _libraries(pp):
        levels = fit_levels(pp, lib)
        good = [lv for lv in reversed(LEVELS) if lv in levels and "error" not in levels[lv]]
        if not good:
            errors[lib] = "; ".join(f"{k}: {v['error']}" for k, v in levels.items()) or \
                "no one-pair rows at level socket, node or network"
            continue
        fit = dict(levels[good[0]])
        # every level's pair, for what needs the link the ranks really share (analysis/bound.py)
        fit["levels"] = {lv: {"alpha": levels[lv]["alpha"], "beta": levels[lv]["beta"]}
                         for lv in LEVELS if lv in levels and "error" not in levels[lv]}
        g = (gamma_by_library or {}).get(lib, gamma)
        fit["gamma"] = None if g is None else float(g)
        fit["level"] = good[0]
        out[lib] = fit
    if not out:
        raise FitError("no library's ping-pong could be fitted: "
                       + ("; ".join(f"{k}: {v}" for k, v in errors.items()) or "no ping-pong rows"))
    return out


def fit_maxrate(df: pd.DataFrame, gamma: float, library: str | None = None) -> tuple[maxrate.MaxRateParams, dict]:
    """``MaxRateParams`` and their provenance from the ping-pong rows of ``library`` (default:
    openmpi when present, else the first library with ping-pong rows); see the module doc."""
    pp = pingpong_rows(df)
    libs = _libraries(pp)
    if not libs:
        raise FitError("no timed ping-pong rows at level socket, node or network")
    if library is None:
        library = libs[0]
    elif library not in libs:
        raise FitError(f"library {library!r} has no ping-pong rows; have {', '.join(libs)}")
    levels = fit_levels(pp, library)
    ok = {k: v for k, v in levels.items() if "error" not in v}
    if not ok:
        raise FitError(f"{library}: no level could be fitted: "
                       + "; ".join(f"{k}: {v['error']}" for k, v in levels.items()))
    fallbacks = {}

    def pick(order, role):
        for lv in order:
            if lv in ok:
                if lv != order[0]:
                    why = "not measured" if order[0] not in levels else f"fit failed: {levels[order[0]]['error']}"
                    fallbacks[role] = f"{order[0]} {why}: {role} := {lv} level"
                return lv
        raise AssertionError("unreachable")

    local = pick(("node", "socket", "network"), "alpha_l, beta_l")
    net = pick(("network", "node", "socket"), "alpha, R_b")
    if ok[net]["beta"] <= 0:
        raise FitError(f"{library}: the fitted beta at level {net} is 0; R_b = 1/beta is undefined "
                       f"(sizes {ok[net]['sizes']}: measure larger messages)")
    rows = pp[(pp["library"] == library) & (pp["level"] == net)]
    agg = rows["pairs"].astype(float) * rows["size"].astype(float) / rows["mean"].astype(float)
    best = rows.loc[agg.idxmax()]
    R_N = float(agg.max())
    pairs_seen = sorted({int(k) for k in rows["pairs"]})
    if pairs_seen == [1]:
        fallbacks["R_N"] = (f"only one pair measured at level {net}: R_N := the one-pair "
                            "bandwidth max(size/time)")
    params = maxrate.MaxRateParams(alpha_l=ok[local]["alpha"], beta_l=ok[local]["beta"],
                                   alpha=ok[net]["alpha"], R_b=1.0 / ok[net]["beta"], R_N=R_N,
                                   gamma=float(gamma))
    prov = {"library": library, "levels": levels,
            "alpha_l, beta_l": f"Hockney fit of one-pair ping-pong at level {local}",
            "alpha, R_b": f"Hockney fit of one-pair ping-pong at level {net} (R_b = 1/beta)",
            "R_N": (f"largest aggregate bandwidth k*size/time at level {net}: "
                    f"k={int(best['pairs'])}, size={int(best['size'])} B"),
            "pairs": pairs_seen, "fallbacks": fallbacks}
    return params, prov


# --------------------------------------------------------------------------- the file


def fit_file(summary_csv, campaign: str | None = None, library: str = "openmpi",
             source: str = "native", gamma: float | None = None) -> dict:
    """The combined ``model_params.json`` document of a campaign's summary (module doc).
    ``gamma`` given overrides the reduce_local fit. Raises FitError when the summary has
    neither native allreduce cells nor ping-pong cells."""

    summary_csv = Path(summary_csv)
    df = load(summary_csv)
    have = kinds(df)
    if not (have["native"] or have["pingpong"]):
        algs = sorted({str(a) for a in df.get("algorithm", [])})
        raise FitError(f"{summary_csv} has neither native allreduce cells nor ping-pong cells "
                       f"(algorithms: {', '.join(algs) or 'none'}); nothing to fit")
    gamma_info: dict
    gamma_by_lib: dict[str, float] = {}
    if gamma is not None:
        gamma_info = {"from": "given"}
    elif have["reduce_local"]:
        try:
            gamma, gamma_info = fit_gamma_rows(df, library=library)
        except FitError as e:
            gamma, gamma_info = models.measure_gamma(), {
                "from": f"measure_gamma (np.add on this machine): the reduce_local fit failed: {e}"}
        for lib in sorted({str(v) for v in reduce_local_rows(df).get("library", [])}):
            try:
                gamma_by_lib[lib] = fit_gamma_rows(df, library=lib)[0]
            except FitError:
                pass
    else:
        gamma, gamma_info = models.measure_gamma(), {
            "from": "measure_gamma (np.add on this machine): the campaign has no reduce_local cells"}
    digest = hashlib.sha256(summary_csv.read_bytes()).hexdigest()
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    pingpong = fit_pingpong(df, gamma=gamma, gamma_by_library=gamma_by_lib) if have["pingpong"] else {}
    params = None
    native_error = None
    if have["native"]:
        try:
            params = fit_campaign(summary_csv, library=library, source=source,
                                         gamma=gamma, campaign=campaign)
        except ValueError as e:
            native_error = str(e)
            if not pingpong:
                raise FitError(native_error) from None
    if params is None:
        lib = PREFERRED_LIBRARY if PREFERRED_LIBRARY in pingpong else sorted(pingpong)[0]
        pp = pingpong[lib]
        ab = {a: (pp["alpha"], pp["beta"]) for a in models.ALL6}
        params = models.Params(ab=ab, gamma=gamma, provenance={
            "source": f"ping-pong of {lib} (one pair, level {pp['level']}) in {summary_csv}",
            "summary_sha256": digest, "campaign": campaign, "date": date,
            "assumed": "every Table 1 algorithm gets the ping-pong (alpha, beta) pair: "
                       + ("the campaign has no native allreduce cells" if native_error is None
                          else f"the native fit failed: {native_error}"),
            "pingpong_library": lib})
    doc = params.to_dict()
    doc["provenance"]["gamma_from"] = gamma_info
    if pingpong:
        doc["pingpong"] = pingpong
        try:
            mr, prov = fit_maxrate(df, gamma, library=None if library not in pingpong else library)
        except FitError as e:  # e.g. beta 0 at every level: the Hockney pairs still stand
            doc["provenance"]["maxrate_error"] = str(e)
        else:
            prov.update({"gamma": gamma_info, "summary_sha256": digest, "campaign": campaign,
                         "date": date})
            doc["maxrate"] = {**asdict(mr), "provenance": models.plain_json(prov)}
    return models.plain_json(doc)


def write(summary_csv, out, **kw) -> dict:
    doc = fit_file(summary_csv, **kw)
    write_json(Path(out), doc)
    return doc


def maxrate_params(doc: Mapping) -> maxrate.MaxRateParams | None:
    """The fitted max-rate parameters of a ``model_params.json`` document (None without the
    ``maxrate`` section)."""
    if "maxrate" not in doc:
        return None
    return maxrate.MaxRateParams.from_dict(doc)


def load_maxrate(path) -> maxrate.MaxRateParams | None:
    """``maxrate_params`` of the file at ``path``; None when it does not exist or has no
    ``maxrate`` section."""
    p = Path(path)
    if not p.is_file():
        return None
    return maxrate_params(json.loads(p.read_text()))
