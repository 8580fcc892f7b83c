"""The lower bound of an allreduce and how close a time comes to it (``docs/models.md``,
"The lower bound").

Chan et al. (2007) bound any allreduce of n bytes over P processes on a fully connected
network, each process sending and receiving one message at a time, by

    T >= ceil(log2 P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma

(latency: the result depends on every input, and a message at most doubles what a process
knows; bandwidth: each process must send and receive (P-1)/P n bytes of reduce-scatter and
as many of allgather; computation: (P-1)/P n bytes of reduction each, spread evenly). Here
alpha and beta are the campaign's own ping-pong fit of the installation (``model_params.json``
``pingpong.<library>.levels``) at the level its ranks talk over: ``network`` when the cell
spans nodes; for ranks sharing one node the copy through shared memory is the link, so the
intra-node pair (``node``, else ``socket``): a measured copy bandwidth, a bound as long as no
rank copies faster than one pair alone did (memory contention only lengthens real times).
gamma is the library's reduce_local fit, else the campaign's. ``bound_ratio`` = time / bound:
1 would be optimal; the fraction of the bound a time reaches is its inverse.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..results.summary import allreduce_rows
from .auto_vs_best import prepare
from .vocabulary import timed_mask

INTRA = ("node", "socket")  # the levels ranks of one node talk over, nearest last tried


def chan(procs: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """The bound in seconds (0 for one process or an empty message's bandwidth terms)."""
    p = int(procs)
    if p <= 1:
        return 0.0
    share = (p - 1) / p * float(nbytes)
    return math.ceil(math.log2(p)) * alpha + 2 * share * beta + share * gamma


def link(doc: dict, library: str, nodes: int) -> dict | None:
    """``{alpha, beta, gamma, level}`` of ``library`` for a cell on ``nodes`` nodes, from a
    ``model_params.json`` document; None when the campaign fitted no ping-pong of it."""
    pp = (doc.get("pingpong") or {}).get(library)
    if not pp:
        return None
    levels = pp.get("levels") or {pp.get("level", "network"): pp}
    order = ("network",) if int(nodes) > 1 else INTRA
    level = next((lv for lv in order if lv in levels), None)
    if level is None:  # not measured at that level: the farthest one, said so
        level = pp.get("level", "network")
        levels = {level: pp}
    gamma = pp.get("gamma") if pp.get("gamma") is not None else doc.get("gamma")
    if gamma is None:
        return None
    return {"alpha": float(levels[level]["alpha"]), "beta": float(levels[level]["beta"]),
            "gamma": float(gamma), "level": level}


def add_bounds(df: pd.DataFrame, doc: dict, time: str = "mean") -> pd.DataFrame:
    """``df`` (rows with library, procs, nodes, size and ``time``) with ``bound`` (seconds),
    ``bound_ratio`` (time / bound) and ``bound_level``; NaN where the library has no fit."""
    out = df.copy()
    bounds, levels = [], []
    for r in out.itertuples(index=False):
        r = r._asdict()
        lk = link(doc, str(r["library"]), int(r.get("nodes") or 1) if r.get("nodes") == r.get("nodes") else 1)
        bounds.append(chan(r["procs"], r["size"], lk["alpha"], lk["beta"], lk["gamma"]) if lk else np.nan)
        levels.append(lk["level"] if lk else "")
    out["bound"] = bounds
    with np.errstate(divide="ignore", invalid="ignore"):
        t = pd.to_numeric(out[time], errors="coerce")
        out["bound_ratio"] = np.where(out["bound"] > 0, t / out["bound"], np.nan)
    out["bound_level"] = levels
    return out


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


CELL_COLUMNS = ["library", "library_version", "algorithm", "procs", "nodes", "size", "dtype",
                "op", "delay", "mean", "oversubscribed"]
GROUP = ["library", "library_version", "procs", "nodes", "algorithm"]


def cells(summary: pd.DataFrame, doc: dict) -> pd.DataFrame:
    """Every timed allreduce cell of ``summary`` with a message (``CELL_COLUMNS``) and its
    bound (``add_bounds`` with the ``model_params.json`` document ``doc``)."""
    d = prepare(allreduce_rows(summary))
    d = d[timed_mask(d)]
    t = (add_bounds(d[CELL_COLUMNS], doc) if len(d) else
         pd.DataFrame(columns=CELL_COLUMNS + ["bound", "bound_ratio", "bound_level"]))
    return t[t["size"] > 0]


def by_algorithm(t: pd.DataFrame) -> pd.DataFrame:
    """Per installation, P, node count and algorithm of ``cells``' rows that have a bound: the
    sizes, the median, smallest and largest time/bound, how many sizes fall below the bound,
    the link's level and whether any cell was oversubscribed."""
    rows = []
    keyed = t.dropna(subset=["bound_ratio"])
    for key, g in keyed.groupby(GROUP, sort=False):
        r = g["bound_ratio"]
        rows.append({**dict(zip(GROUP, key)), "sizes": len(g), "median": float(r.median()),
                     "smallest": float(r.min()), "largest": float(r.max()),
                     "below": int((r < 1).sum()), "level": g["bound_level"].iloc[0],
                     "oversubscribed": bool(g["oversubscribed"].any())})
    return pd.DataFrame(rows, columns=[*GROUP, "sizes", "median", "smallest", "largest",
                                       "below", "level", "oversubscribed"])
