"""What a summary says about SUARA (Nuriyev et al. 2023), before it is written: the timed,
undelayed rows with their parameters and records (``load``), the Hockney parameters fitted to
the campaign's Open MPI cells or the paper's (``fitted_params``), each (library, P, size)'s
AUTO and BEST native allreduce (``native_refs``: the comparable native cells,
``harness.analysis.best.fastest``), SUARA2's own-choice cells beside them (``suara_auto``), the
3-step baseline (``three_step``), SUARA2's choices with the model's time (``choices``), the
grid sweeps (``sweeps``), the models the agreement check uses (``agreement_models``) and the
check itself (``agreement``). Written and drawn by ``harness/report/suara.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import models
from ..libraries import split_name
from ..results.store import row_json
from .auto_vs_best import load_summary
from .best import fastest
from .fit import fit_campaign
from .vocabulary import AUTO, comparable_mask, is_oversubscribed, timed_mask

TO_MODEL = {**models.NATIVE_OPENMPI, **models.HARNESS}
KEYS = ["library", "procs", "size", "dtype", "op"]


def model_name(name: str) -> str | None:
    """The Table 1 model of a summary algorithm name (``native:ring`` -> ``rnos``), else None."""
    return TO_MODEL.get(name)


def load(summary_csv) -> pd.DataFrame:
    """The summary's timed, undelayed allreduce rows with ``p`` (parameters) and ``r`` (the
    cell's record) as dicts."""
    d = load_summary(summary_csv)
    d = d[timed_mask(d) & (d["delay"] == "none")].copy()
    d["p"] = d["params"].map(row_json)
    d["r"] = d["record"].map(row_json)
    return d


def is_openmpi(library: pd.Series) -> pd.Series:
    """Rows of Open MPI's family: ``openmpi`` measured or ``openmpi@<platform>`` simulated."""
    return library.map(lambda lib: split_name(lib)[0] == "openmpi")


def openmpi_library(summary_csv) -> str:
    """The summary's Open MPI installation to fit: ``openmpi`` when it has rows, else its only
    simulated one (``openmpi@<platform>``), else ``openmpi``."""
    try:
        libs = set(load_summary(summary_csv)["library"].astype(str))
    except (OSError, KeyError, ValueError):
        return "openmpi"
    simulated = sorted(lib for lib in libs if split_name(lib)[0] == "openmpi" and split_name(lib)[1])
    return "openmpi" if "openmpi" in libs or len(simulated) != 1 else simulated[0]


def fitted_params(summary_csv, gamma: float | None = None) -> tuple[models.Params, str]:
    """Parameters fitted to the summary's Open MPI native cells (gamma measured here unless
    given), or the paper's. A campaign with no measured Open MPI but one simulated
    installation (``openmpi@<platform>``) is fitted to that one's cells."""
    library = openmpi_library(summary_csv)
    try:
        p = fit_campaign(summary_csv, library=library, source="native", gamma=gamma)
        missing = [a for a in models.ALL6 if a not in p.ab]
        if missing:  # the rest from the paper, said so
            ab = dict(p.ab)
            ab.update({a: models.Params.paper().ab[a] for a in missing})
            p = models.Params(ab=ab, gamma=p.gamma, m_s=p.m_s,
                              provenance={**p.provenance, "from_paper": missing})
        return p, ("fitted to this campaign's Open MPI cells" if library == "openmpi" else
                   f"fitted to this campaign's {library} cells (simulated)")
    except (ValueError, KeyError, OSError):
        return models.Params.paper(), "paper Table 4"


def native_refs(d: pd.DataFrame) -> pd.DataFrame:
    """Per (library, procs, size, dtype, op): AUTO's time and BEST's time and name among the
    comparable native cells of ``d`` (``load``'s rows)."""
    nat = d[comparable_mask(d)]
    rows = []
    for key, g in nat.groupby(KEYS):
        auto = g[g["algorithm"] == AUTO]
        best = fastest(g)
        rows.append({"library": key[0], "procs": key[1], "size": key[2], "dtype": key[3],
                     "op": key[4], "auto": float(auto["mean"].iloc[0]) if len(auto) else math.nan,
                     "auto_lo": float(auto["ci_low"].iloc[0]) if len(auto) else math.nan,
                     "auto_hi": float(auto["ci_high"].iloc[0]) if len(auto) else math.nan,
                     "best": float(best["mean"]), "best_algorithm": best["algorithm"],
                     "best_lo": float(best["ci_low"]), "best_hi": float(best["ci_high"])})
    return pd.DataFrame(rows, columns=["library", "procs", "size", "dtype", "op", "auto", "best",
                                       "best_algorithm", "auto_lo", "auto_hi", "best_lo",
                                       "best_hi"])


def suara_auto(d: pd.DataFrame) -> pd.DataFrame:
    """SUARA2's cells that chose their own grid (``grid`` auto or best-grid), with AUTO and
    BEST of the same (library, P, size, dtype, op) as columns (``native_refs``)."""
    s = d[(d["algorithm"] == "suara2")
          & d["p"].map(lambda p: p.get("grid", "auto") in ("auto", "best-grid"))]
    return s.merge(native_refs(d), on=KEYS, how="left")


def speedups(d: pd.DataFrame) -> pd.DataFrame:
    """SUARA2's speedup (the reference's time / its own) over AUTO and over BEST at each cell
    of ``suara_auto``: one row per cell and reference, ``line`` ``<size>|AUTO`` or
    ``<size>|BEST``."""
    s = suara_auto(d)
    return pd.concat([s.assign(line=[f"{int(z)}|{who}" for z in s["size"]],
                               speedup=s[who.lower()] / s["mean"]) for who in ("AUTO", "BEST")],
                     ignore_index=True)


def three_step(d: pd.DataFrame) -> pd.DataFrame:
    """The 3-step baseline's cells (``three_step``) keyed like SUARA2's, as reference columns
    ``three`` (mean), ``three_lo``, ``three_hi`` and ``three_grid``."""
    t = d[d["algorithm"] == "three_step"]
    out = pd.DataFrame({k: t[k] for k in KEYS})
    out["three"], out["three_lo"], out["three_hi"] = t["mean"], t["ci_low"], t["ci_high"]
    out["three_grid"] = t["r"].map(lambda r: f"{r.get('P_r')} x {r.get('P_c')}" if r.get("P_r") else "–")
    return out.drop_duplicates(KEYS)


def sweeps(d: pd.DataFrame) -> pd.DataFrame:
    """SUARA2's cells with the grid set per cell (a sweep over grids and combinations), with
    ``P_c``, ``row`` and ``col`` as columns."""
    s = d[(d["algorithm"] == "suara2")
          & d["p"].map(lambda p: p.get("grid", "auto") not in ("auto", "best-grid"))].copy()
    s["P_c"] = s["p"].map(lambda p: int(str(p["grid"]).lower().split("x")[1]))
    s["row"] = s["p"].map(lambda p: p.get("row", "ring"))
    s["col"] = s["p"].map(lambda p: p.get("col", "ring"))
    return s


def grid_sweeps(d: pd.DataFrame) -> tuple[pd.DataFrame, list]:
    """Fig. 7's sweeps: ``sweeps`` of one algorithm in rows and columns (the 36-combination
    check's mixed pairs are the agreement check's), each with ``panel``, the index of its
    (library, P, row, col) in the sorted keys also returned."""
    s = sweeps(d)
    s = s[s["row"] == s["col"]]
    keys = sorted(set(zip(s["library"], s["procs"], s["row"], s["col"])))
    return s.assign(panel=[keys.index(k) for k in zip(s["library"], s["procs"], s["row"],
                                                       s["col"])]), keys


def agreement_models(summary_csv, fitted: models.Params | None = None, how: str = "") -> list:
    """The models the agreement table checks: the paper's Table 4 always, the campaign's
    ``model_params.json`` (``harness fit <campaign>``) when it exists beside the summary, and
    the parameters fitted to this summary when a fit succeeded."""
    used = [("paper Table 4", models.Params.paper())]
    path = Path(summary_csv).parent / "model_params.json"
    if path.is_file():
        try:
            used.append((f"fitted ({path.name})", models.Params.from_dict(json.loads(path.read_text()))))
        except (ValueError, KeyError, TypeError):
            pass  # a damaged file checks nothing; `harness fit` writes it anew
    if fitted is not None and how.startswith("fitted"):
        used.append(("fitted to this summary", fitted))
    return used


def has_ci(r) -> bool:
    """A row with a finite 95% CI (one repetition, an oversubscribed cell's budget, has none)."""
    return bool(math.isfinite(float(r["ci_low"])) and math.isfinite(float(r["ci_high"])))


def choices(d: pd.DataFrame, params: models.Params) -> pd.DataFrame:
    """SUARA2's own-choice cells (``suara_auto``) with the 3-step baseline beside them, sorted
    by library, P and size, and ``predicted``: the model's time of the grid and combination
    the cell's record says it chose (NaN without one)."""
    s = suara_auto(d).merge(three_step(d), on=KEYS, how="left")
    s = s.sort_values(["library", "procs", "size"])

    def predicted(r) -> float:
        rec = r["r"]
        ar, ac, pc = model_name(rec.get("row", "")), model_name(rec.get("col", "")), rec.get("P_c")
        return (models.suara2_cost(ar, ac, int(r["procs"]), int(pc), float(r["size"]), params)
                if ar and ac and pc else math.nan)
    return s.assign(predicted=s.apply(predicted, axis=1).astype(float) if len(s) else [])


def _grid_label(r, P: int) -> str:
    """``6x2 (rs, rnos)``; a degenerate grid runs one dimension's algorithm alone."""
    def short(name) -> str:
        return model_name(str(name)) or str(name)
    pc = int(r["P_c"])
    what = (f"{short(r['row'])} alone" if pc == P else f"{short(r['col'])} alone" if pc == 1
            else f"{short(r['row'])}, {short(r['col'])}")
    return f"{P // pc}x{pc} ({what})"


def _predict(g: pd.DataFrame, P: int, m: float, params: models.Params) -> pd.Series:
    def pred(r):
        ar, ac = model_name(r["row"]), model_name(r["col"])
        try:
            return models.suara2_cost(ar, ac, P, int(r["P_c"]), m, params) if ar and ac else math.nan
        except KeyError:  # the model has no (alpha, beta) of that algorithm
            return math.nan
    return g.apply(pred, axis=1).astype(float)


def agreement(d: pd.DataFrame, params) -> list[dict]:
    """Sect. 5's check, per (library, P, size, dtype, op) whose grids and combinations were
    swept (``sweeps``) and per model (``params``: one ``Params`` or a list of ``(label,
    Params)``): the model's pick among the configurations measured (every configuration it
    predicts within 1e-9 of its minimum counts as its pick: 1 x P and P x 1 with the same
    algorithm are the same single algorithm; the fastest measured of them is ``pick``), the
    measured best, whether they agree, the rank of the pick among the measured (1 = fastest),
    its loss ``pick time / best time - 1`` and the verdict: a tie when the two CIs overlap,
    undecided when either has no CI. ``crowded``: some cell oversubscribed (no claim)."""
    used = [("model", params)] if isinstance(params, models.Params) else list(params)
    rows = []
    for key, g in sweeps(d).groupby(KEYS):
        if len(g) < 2:
            continue
        P, m = int(key[1]), float(key[2])
        g = g.sort_values("mean", kind="stable")
        g = g.assign(rank=np.arange(1, len(g) + 1))
        mb = g.iloc[0]
        crowded = bool(g.apply(is_oversubscribed, axis=1).any())
        for name, mp in used:
            pr = _predict(g, P, m, mp)
            if not np.isfinite(pr).any():
                continue
            picks = g[pr <= np.nanmin(pr) * (1 + 1e-9)]
            pk = picks.iloc[0]
            agree = pk.name == mb.name
            overlap = pk["ci_low"] <= mb["ci_high"] and mb["ci_low"] <= pk["ci_high"]
            verdict = ("agree" if agree else "tie (CIs overlap)" if overlap
                       else "loss" if has_ci(pk) and has_ci(mb) else "undecided (no CI)")
            rows.append({"library": key[0], "procs": P, "size": m, "model": name,
                         "configurations": len(g), "pick": pk, "pick_label": _grid_label(pk, P),
                         "tied": len(picks) - 1, "predicted": float(np.nanmin(pr)), "best": mb,
                         "best_label": _grid_label(mb, P), "agree": agree, "rank": int(pk["rank"]),
                         "loss": pk["mean"] / mb["mean"] - 1, "verdict": verdict,
                         "crowded": crowded})
    return rows


def modelled(d: pd.DataFrame, params: models.Params) -> pd.DataFrame:
    """The classic algorithms' rows (Open MPI's native ones and the harness's, P > 1) sorted by
    library, algorithm, P and size, with ``model`` (its Table 1 name) and ``predicted`` (the
    model's time)."""
    c = d[d["algorithm"].isin(list(TO_MODEL)) & (d["procs"] > 1)]
    if "library" in c.columns:
        c = c[(c["kind"] != "native") | is_openmpi(c["library"])]
    c = c.sort_values(["library", "algorithm", "procs", "size"])
    m = c["algorithm"].map(model_name)
    return c.assign(model=m, predicted=[models.cost(a, int(p), float(s), params) for a, p, s
                                        in zip(m, c["procs"], c["size"])])
