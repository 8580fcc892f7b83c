"""Simulated cells against the measured cells they copy: how far a simulated platform is off.

A campaign may hold both measured rows and simulated ones (``simulated`` True; ``platform`` the
simulated platform's 12-hex digest, ``simulator`` and ``copies`` what simulated them and what
their number copies). ``pairs(summary)`` pairs each simulated row with the measured row of the
same cell: the same ``KEYS`` (library, algorithm, P, nodes, size, dtype, op, delay, max delay,
buffers, timing and the algorithm's parameters). A simulated installation ``<library>@<platform>``
pairs with its ``library`` (``family``); ``installation`` keeps its own name. A row of the result per simulated row, and one
per measured row left without a simulated partner (of a library and algorithm that were
simulated; the other measured rows are only counted, ``attrs["measured_elsewhere"]``):

- ``measured_mean``, ``measured_ci_low``, ``measured_ci_high`` (s), ``measured_status``;
- ``simulated_time`` (s, the simulated row's ``mean``), ``simulated_status``;
- ``error`` = (simulated - measured) / measured (a fraction; ``error_pct`` the same in %),
  ``within_ci``: the simulated time inside the measured 95 % CI;
- ``partner``: ``paired``, ``no measured row``, ``measured row not timed`` (its status),
  ``simulation not timed``, ``no simulated row``; nothing is dropped silently;
- ``claims_nothing``: the measured row is oversubscribed (more ranks than cores) or not
  converged (``vocabulary.claims_nothing_mask``): its error is shown but claims nothing, and
  the aggregates leave it out.

``aggregate(pairs, by)`` summarises the paired rows that claim something per group (e.g.
``BY_ALGORITHM``: platform, library, algorithm; ``BY_SIZE``: platform, size): how many, the
mean signed error, the mean and largest absolute error, how many inside the measured CI.

``platforms(summary)`` lists each simulated platform: its simulator, what it copies, its rows,
algorithms and, when the rows' ``record`` JSON carries them (key ``platform``), the
platform's parameters.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..results.store import row_json
from ..libraries import split_name
from ..results.summary import allreduce_rows, typed
from .vocabulary import claims_nothing_mask, simulated_mask, timed_mask

KEYS = ("library", "algorithm", "procs", "nodes", "size", "dtype", "op", "delay", "max_delay",
        "buffers", "timing", "params")
BY_ALGORITHM = ("platform", "library", "algorithm")
BY_SIZE = ("platform", "size")
# keys of a simulated row's params that name the platform, not the cell (left out of the key)
PLATFORM_PARAMS = ("platform",)
PAIRED = "paired"
NO_MEASURED = "no measured row"
MEASURED_UNTIMED = "measured row not timed"
SIM_UNTIMED = "simulation not timed"
NO_SIMULATED = "no simulated row"
PAIR_COLUMNS = [
    "platform", "simulator", "copies", *KEYS, "installation", "library_version", "measured_mean",
    "measured_ci_low", "measured_ci_high", "measured_status", "measured_oversubscribed",
    "measured_rows", "simulated_time", "simulated_status", "error", "error_pct", "within_ci",
    "claims_nothing", "partner"]


def _text(d: pd.DataFrame, column: str) -> pd.Series:
    if column not in d.columns:
        return pd.Series("", index=d.index, dtype=object)
    return d[column].astype("object").where(d[column].notna(), "").astype(str)


def family(library) -> str:
    """The library a (possibly simulated) installation's name copies: ``openmpi@small`` ->
    ``openmpi``."""
    return split_name(library)[0]


def _params_key(text) -> str:
    p = {k: v for k, v in row_json(text).items() if k not in PLATFORM_PARAMS}
    return json.dumps(p, sort_keys=True)


def _keyed(d: pd.DataFrame) -> pd.DataFrame:
    d = d.copy()
    d["_params"] = d["params"].map(_params_key)
    d["_family"] = d["library"].map(family)
    d["_key"] = list(zip(*[d["_params"] if k == "params" else d["_family"] if k == "library"
                           else d[k] for k in KEYS]))
    return d


def split(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured, simulated) allreduce rows of a summary (probes and workloads left out)."""
    d = allreduce_rows(typed(summary))
    sim = simulated_mask(d)
    return d[~sim], d[sim]


def has_pairs(summary: pd.DataFrame) -> bool:
    """Does the summary hold a simulated row and a measured row of the same cell?"""
    measured, simulated = split(summary)
    if not len(measured) or not len(simulated):
        return False
    return bool(set(_keyed(simulated)["_key"]) & set(_keyed(measured)["_key"]))


def _pick(rows: pd.DataFrame) -> pd.Series:
    """The measured row a simulated one is compared with: the latest timed one (a cell
    measured again), else the latest."""
    timed = rows[timed_mask(rows)]
    pool = timed if len(timed) else rows
    return pool.sort_values("finished", kind="stable").iloc[-1] if "finished" in pool else pool.iloc[-1]


def _row(sim, meas, n_measured: int) -> dict:
    src = sim if sim is not None else meas
    out = {k: src[k] for k in KEYS}
    out["library"] = family(src["library"])
    out["installation"] = str(sim["library"]) if sim is not None else ""
    out["platform"] = str(sim["platform"]) if sim is not None else ""
    out["simulator"] = str(sim["simulator"]) if sim is not None else ""
    out["copies"] = str(sim["copies"]) if sim is not None else ""
    out["library_version"] = str(meas["library_version"]) if meas is not None else ""
    for c in ("mean", "ci_low", "ci_high"):
        out[f"measured_{c}"] = float(meas[c]) if meas is not None else np.nan
    out["measured_status"] = str(meas["status"]) if meas is not None else ""
    out["measured_oversubscribed"] = bool(meas["oversubscribed"]) if meas is not None else False
    out["measured_rows"] = n_measured
    out["simulated_time"] = float(sim["mean"]) if sim is not None else np.nan
    out["simulated_status"] = str(sim["status"]) if sim is not None else ""
    m_ok = meas is not None and bool(timed_mask(meas.to_frame().T).iloc[0])
    s_ok = sim is not None and bool(timed_mask(sim.to_frame().T).iloc[0])
    if sim is None:
        partner = NO_SIMULATED
    elif meas is None:
        partner = NO_MEASURED
    elif not m_ok:
        partner = MEASURED_UNTIMED
    elif not s_ok:
        partner = SIM_UNTIMED
    else:
        partner = PAIRED
    out["partner"] = partner
    if partner == PAIRED:
        m, s = out["measured_mean"], out["simulated_time"]
        out["error"] = (s - m) / m
        lo, hi = out["measured_ci_low"], out["measured_ci_high"]
        out["within_ci"] = bool(np.isfinite(lo) and np.isfinite(hi) and lo <= s <= hi)
    else:
        out["error"], out["within_ci"] = np.nan, False
    out["error_pct"] = out["error"] * 100.0
    return out


def pairs(summary: pd.DataFrame) -> pd.DataFrame:
    """Each simulated row with its measured partner (module doc), ``PAIR_COLUMNS``, sorted by
    platform (the measured rows without a simulated one last), library, algorithm, P, size."""
    measured, simulated = split(summary)
    rows = []
    elsewhere = 0
    if len(simulated):
        measured, simulated = _keyed(measured), _keyed(simulated)
        for c in ("platform", "simulator", "copies"):
            simulated[c] = _text(simulated, c)
        by_key = {k: g for k, g in measured.groupby("_key", sort=False)} if len(measured) else {}
        for _, sim in simulated.iterrows():
            group = by_key.get(sim["_key"])
            meas = _pick(group) if group is not None else None
            rows.append(_row(sim, meas, 0 if group is None else len(group)))
        simulated_keys = set(simulated["_key"])
        simulated_algs = set(zip(simulated["_family"], simulated["algorithm"]))
        for key, group in by_key.items():
            if key in simulated_keys:
                continue
            if (key[0], key[1]) in simulated_algs:
                rows.append(_row(None, _pick(group), len(group)))
            else:
                elsewhere += len(group)
    else:
        elsewhere = len(measured)
    out = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    if len(out):
        out["claims_nothing"] = claims_nothing_mask(pd.DataFrame({
            "status": out["measured_status"].where(out["partner"] != NO_MEASURED, ""),
            "oversubscribed": out["measured_oversubscribed"].astype(bool)}))
        out = out.assign(_last=out["platform"] == "").sort_values(
            ["_last", "platform", "library", "algorithm", "procs", "size"],
            kind="stable").drop(columns="_last").reset_index(drop=True)
    out.attrs["measured_elsewhere"] = int(elsewhere)
    return out


def claiming(p: pd.DataFrame) -> pd.DataFrame:
    """The paired rows whose measured side claims something (the aggregates' rows)."""
    return p[(p["partner"] == PAIRED) & ~p["claims_nothing"].astype(bool)]


def aggregate(p: pd.DataFrame, by=BY_ALGORITHM) -> pd.DataFrame:
    """Per group of ``by``: ``n`` (paired rows that claim something), ``mean_error_pct``
    (signed), ``mean_abs_error_pct``, ``max_abs_error_pct`` (and ``worst_error_pct``, its sign
    kept), ``within_ci`` (how many inside the measured CI), ``left_out`` (paired rows whose
    measured side claims nothing, and rows without a partner)."""
    by = list(by)
    cols = [*by, "n", "mean_error_pct", "mean_abs_error_pct", "max_abs_error_pct",
            "worst_error_pct", "within_ci", "left_out"]
    if not len(p):
        return pd.DataFrame(columns=cols)
    good = claiming(p)
    out = []
    for key, g in p.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        c = good.loc[good.index.intersection(g.index)]
        e = c["error_pct"].to_numpy(float)
        worst = float(e[np.argmax(np.abs(e))]) if len(e) else np.nan
        out.append({**dict(zip(by, key)), "n": int(len(c)),
                    "mean_error_pct": float(e.mean()) if len(e) else np.nan,
                    "mean_abs_error_pct": float(np.abs(e).mean()) if len(e) else np.nan,
                    "max_abs_error_pct": float(np.abs(e).max()) if len(e) else np.nan,
                    "worst_error_pct": worst, "within_ci": int(c["within_ci"].sum()),
                    "left_out": int(len(g) - len(c))})
    out = pd.DataFrame(out, columns=cols)
    if "platform" in by:  # the measured rows without a simulated one (no platform) last
        out = out.assign(_last=out["platform"] == "").sort_values("_last", kind="stable") \
            .drop(columns="_last").reset_index(drop=True)
    return out


def platforms(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per simulated platform digest: ``simulator``, ``copies`` (every value, joined),
    ``rows``, ``algorithms``, ``libraries``, ``procs`` and ``parameters`` (the ``platform``
    object of the rows' ``record`` JSON when one carries it, else {})."""
    d = typed(summary)
    sim = d[simulated_mask(d)]
    cols = ["platform", "simulator", "copies", "rows", "algorithms", "libraries", "procs",
            "parameters"]
    if not len(sim):
        return pd.DataFrame(columns=cols)
    sim = sim.assign(platform=_text(sim, "platform"), simulator=_text(sim, "simulator"),
                     copies=_text(sim, "copies"))
    out = []
    for digest, g in sim.groupby("platform", sort=True):
        params = {}
        for rec in g["record"] if "record" in g else ():
            value = row_json(rec).get("platform")
            if isinstance(value, dict):
                params = value
                break
        join = lambda col: ", ".join(sorted({str(v) for v in g[col] if str(v)}))  # noqa: E731
        out.append({"platform": digest, "simulator": join("simulator"), "copies": join("copies"),
                    "rows": int(len(g)), "algorithms": join("algorithm"),
                    "libraries": join("library"),
                    "procs": ", ".join(str(int(v)) for v in sorted(set(g["procs"].dropna()))),
                    "parameters": params})
    return pd.DataFrame(out, columns=cols)
