"""The node-aware rows of a summary as tables (Bienz et al.): RD, SMP and NAP per layout, P
and size (``load``, ``times_table``, ``counts_table``), the libraries' own allreduce beside them
(``load_native``), each library's AUTO on one double (``fig1_table``, Fig. 1), and the max-rate
parameters ``harness fit`` wrote (``fitted_params``). Drawn and written by
``harness/report/node_aware.py``. Every entry reads the typed summary
(``harness.results.summary``): its defaults, flags and kinds are not decided again here.

Rows used: the harness algorithms ``recursive_doubling`` (RD), ``smp`` and ``nap`` whose record
carries a node layout (``harness.layout``, ``harness.measure.counting``); one library (the first in
the usual order when several are present) and one dtype/op/delay (the most frequent). Cells
are told apart by processes per node (``ppn``, from the record), P and size.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..libraries import library_sort_key
from ..results.store import row_json
from ..results.summary import load as typed_summary
from ..results.summary import typed
from .netparams import load_maxrate
from .vocabulary import AUTO, is_timed, timed_mask

ALGORITHMS = ("recursive_doubling", "smp", "nap")

# The libraries' own MPI_Allreduce beside them (Bienz et al., Figs. 16-17): MPICH's forced SMP
# and each library's AUTO, on the REAL node layout; series key "<algorithm>@<library>", in
# drawing order
NATIVE = ("native:smp", "native:auto")
NATIVE_SERIES = ("native:smp@mpich", "native:auto@mpich", "native:auto@openmpi", "native:auto@impi")

def _from_params(params: dict, procs) -> dict:
    try:
        ppn = int(params["ppn"])
        return {"layout": params.get("layout", "emulated"), "ppn": ppn,
                "n_nodes": -(-int(procs) // ppn)}
    except (KeyError, TypeError, ValueError):
        return {}


def _simulated(record: dict, procs, nodes) -> dict:
    """A simulated cell of an algorithm that records no layout (RD): its ranks sit on the
    platform's hosts in blocks, ``nodes`` of them (the real layout of the simulation)."""
    try:
        if record.get("simulated") and int(nodes) > 0:
            return {"layout": "real", "ppn": -(-int(procs) // int(nodes)), "n_nodes": int(nodes)}
    except (TypeError, ValueError):
        pass
    return {}


def read_summary(summary) -> pd.DataFrame:
    """The typed summary of ``summary`` (a path or a frame), a copy the caller may change."""
    return typed(summary).copy() if isinstance(summary, pd.DataFrame) else typed_summary(summary)


def load(summary_csv) -> pd.DataFrame:
    """The node-aware rows of a summary, with ``ppn``, ``n_nodes`` and the counts as columns."""
    d = read_summary(summary_csv)
    d = d[d["algorithm"].isin(ALGORITHMS)].copy()
    rec = d["record"].map(row_json)
    # a cell that never finished has no record: its layout and ppn come from its parameters
    params = d["params"].map(row_json)
    rec = pd.Series([r if "layout" in r else (_from_params(p, procs) or _simulated(r, procs, n))
                     for r, p, procs, n in zip(rec, params, d["procs"], d["nodes"])],
                    index=d.index, dtype=object)
    d = d.loc[rec.map(lambda r: "layout" in r).astype(bool)].copy()
    rec = rec[d.index]
    for key in ("ppn", "n_nodes", "inter_msgs", "intra_msgs", "inter_bytes", "intra_bytes",
                "inter_msgs_total", "intra_msgs_total", "inter_steps"):
        d[key] = rec.map(lambda r, k=key: r.get(k) if not isinstance(r.get(k), list) else None)
    d["layout"] = rec.map(lambda r: r.get("layout"))
    d = d[pd.to_numeric(d["ppn"], errors="coerce").notna()].copy()
    for col in ("ppn", "n_nodes"):
        d[col] = pd.to_numeric(d[col], errors="coerce")
    if d.empty:
        return d
    libs = sorted(d["library"].unique(), key=library_sort_key)
    d = d[d["library"] == libs[0]]
    for col in ("dtype", "op", "delay"):
        d = d[d[col] == d[col].mode().iloc[0]]
    d = d.sort_values("finished")
    return d.drop_duplicates(["algorithm", "ppn", "procs", "size"], keep="last").reset_index(drop=True)


def without_workloads(d: pd.DataFrame) -> pd.DataFrame:
    """The rows of a typed summary that are not a training iteration (kind ``workload``)."""
    return d[d["kind"] != "workload"]


def load_native(summary_csv, like: pd.DataFrame | None = None) -> pd.DataFrame:
    """The libraries' own allreduce beside RD/SMP/NAP: ``native:smp`` (MPICH's SMP) and every
    library's ``native:auto``, at the dtype, op and delay of the harness rows ``like`` (their
    most frequent ones when ``like`` is empty) and within its sizes, single calls timed per
    call. Columns as in ``load`` plus ``series`` (``<algorithm>@<library>``); ``n_nodes`` is
    the run's node count (1 on one machine) and ``ppn`` P / nodes: the REAL layout the library
    sees."""
    d = without_workloads(read_summary(summary_csv))
    d = d[d["algorithm"].isin(NATIVE) & (d["timing"] == "percall")].copy()
    if d.empty:
        return d.assign(series=pd.Series(dtype=object), ppn=pd.Series(dtype=float),
                        n_nodes=pd.Series(dtype=float), layout=pd.Series(dtype=object))
    for col in ("dtype", "op", "delay"):
        ref = like[col] if like is not None and len(like) and col in like else d[col]
        d = d[d[col] == ref.mode().iloc[0]]
    if like is not None and len(like) and "size" in like:
        # only the sizes the harness rows span: AUTO cells of other experiments (1 MiB, ...)
        # would stretch the size axis past the comparison
        sizes = pd.to_numeric(like["size"], errors="coerce")
        d = d[d["size"].between(sizes.min(), sizes.max())]
    d["n_nodes"] = d["nodes"]
    d["ppn"] = d["procs"] / d["n_nodes"]
    d["layout"] = "real"
    d["series"] = d["algorithm"] + "@" + d["library"]
    d = d.sort_values("finished")
    d = d.drop_duplicates(["series", "procs", "n_nodes", "size"], keep="last")
    order = {k: i for i, k in enumerate(NATIVE_SERIES)}
    d["_order"] = d["series"].map(lambda k: order.get(k, len(order)))
    return d.sort_values(["_order", "procs", "size"]).drop(columns="_order").reset_index(drop=True)


def pivot(d: pd.DataFrame, keys) -> pd.DataFrame:
    """One row per ``keys`` with mean / CI per algorithm and NAP's speedups (NaN if missing)."""
    t = d[timed_mask(d)]
    out = t.pivot_table(index=keys, columns="algorithm", values=["mean", "ci_low", "ci_high"],
                        aggfunc="first")
    out.columns = [f"{a}_{v}" for v, a in out.columns]
    out = out.reset_index()
    for a in ALGORITHMS:
        for v in ("mean", "ci_low", "ci_high"):
            if f"{a}_{v}" not in out:
                out[f"{a}_{v}"] = np.nan
    # cells without a time (failed, wrong, timeout) show their status instead
    status = d.pivot_table(index=keys, columns="algorithm", values="status", aggfunc="last")
    status.columns = [f"{a}_status" for a in status.columns]
    out = out.merge(status.reset_index(), on=keys, how="outer") if len(out) else status.reset_index()
    for a in ALGORITHMS:
        for v in ("mean", "ci_low", "ci_high", "status"):
            if f"{a}_{v}" not in out:
                out[f"{a}_{v}"] = np.nan
    out["speedup_vs_rd"] = out["recursive_doubling_mean"] / out["nap_mean"]
    out["speedup_vs_smp"] = out["smp_mean"] / out["nap_mean"]
    return out


def counts_table(d: pd.DataFrame) -> pd.DataFrame:
    """Per ppn, node count, P and algorithm: the most messages and bytes one rank sends per
    call, at the smallest size of each (ppn, P), with the paper's step counts alongside."""
    if d.empty:
        return pd.DataFrame(columns=["ppn", "n_nodes", "procs", "size", "algorithm"])
    smallest = d.groupby(["ppn", "procs"])["size"].transform("min")
    t = d[d["size"] == smallest].copy()
    t["log_ppn_n"] = [_ceil_log(n, p) for n, p in zip(t["n_nodes"], t["ppn"])]
    t["log2_n"] = [_ceil_log(n, 2) for n in t["n_nodes"]]
    t["order"] = t["algorithm"].map(ALGORITHMS.index)
    t = t.sort_values(["ppn", "n_nodes", "order"])
    cols = ["ppn", "n_nodes", "procs", "size", "algorithm", "inter_msgs", "intra_msgs",
            "inter_bytes", "intra_bytes", "inter_msgs_total", "log_ppn_n", "log2_n"]
    return t[cols].reset_index(drop=True)


def _ceil_log(n, base) -> float:
    n, base = int(n), int(base)
    if n <= 1:
        return 0
    if base < 2:
        return math.nan
    k, span = 0, 1
    while span < n:
        span *= base
        k += 1
    return k


def times_table(d: pd.DataFrame, nat: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per ppn, P, node count and size: RD, SMP and NAP (mean, CI, status) and NAP's speedups;
    with native rows ``nat`` (``load_native``) also ``<series>_mean`` / ``_ci_low`` /
    ``_ci_high`` / ``_status`` per native series, ``native_nodes`` (the node count the
    library saw) and ``speedup_vs_native_smp`` (MPICH's SMP / NAP) where the two ran on the
    same real layout (``comparable``), else empty."""
    if d.empty:
        return pd.DataFrame(columns=["ppn", "procs", "n_nodes", "size"])
    keys = ["ppn", "procs", "n_nodes", "size"]
    out = pivot(d, keys)
    layouts = d.groupby(["ppn", "procs"])["layout"].agg(lambda v: "/".join(sorted(set(map(str, v)))))
    out["layout"] = [layouts.get((p, n), "") for p, n in zip(out["ppn"], out["procs"])]
    if nat is not None and len(nat):
        out["native_nodes"] = np.nan
        out["comparable"] = False
        for series, g in nat.groupby("series", sort=False):
            cols = {f"{series}_{v}": [] for v in ("mean", "ci_low", "ci_high", "status")}
            nodes_seen = []
            for r in out.itertuples(index=False):
                m = g[(g["procs"] == r.procs) & (g["size"] == r.size)]
                if r.layout == "real":
                    m = m[np.isclose(m["n_nodes"], float(r.n_nodes))]
                row = m.iloc[-1] if len(m) else None
                timed = row is not None and is_timed(row)
                for v in ("mean", "ci_low", "ci_high"):
                    cols[f"{series}_{v}"].append(float(row[v]) if timed else np.nan)
                cols[f"{series}_status"].append(row["status"] if row is not None else np.nan)
                nodes_seen.append(float(row["n_nodes"]) if row is not None else np.nan)
            for k, v in cols.items():
                out[k] = v
            out["native_nodes"] = out["native_nodes"].fillna(pd.Series(nodes_seen, index=out.index))
        out["comparable"] = (out["layout"] == "real") & np.isclose(
            out["native_nodes"].astype(float), out["n_nodes"].astype(float))
        smp = "native:smp@mpich_mean"
        out["speedup_vs_native_smp"] = (out[smp] / out["nap_mean"]).where(out["comparable"]) \
            if smp in out else np.nan
    return out.sort_values(["ppn", "procs", "size"]).reset_index(drop=True)


def native_series(table: pd.DataFrame) -> list[str]:
    """The native series present in a ``times_table``, in drawing order."""
    found = [c[:-len("_mean")] for c in table.columns if c.endswith("_mean") and "@" in c]
    order = list(NATIVE_SERIES)
    return sorted(found, key=lambda k: order.index(k) if k in order else len(order))


FIG1_SIZE = 8  # one double


def fig1_table(summary_csv) -> pd.DataFrame:
    """Bienz et al., Fig. 1: each library's AUTO (``native:auto``) reducing one double (8 B,
    float64, sum, no delay, timed per call) against P. One row per library, node count and P:
    mean, CI, repetitions, status, oversubscribed."""
    cols = ["library", "nodes", "procs", "mean", "ci_low", "ci_high", "n", "status",
            "oversubscribed"]
    d = without_workloads(read_summary(summary_csv))
    d = d[(d["algorithm"] == AUTO) & (d["size"] == FIG1_SIZE)].copy()
    for col, want in (("dtype", "float64"), ("op", "sum"), ("delay", "none"),
                      ("timing", "percall")):
        d = d[d[col] == want]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d["nodes"] = d["nodes"].astype(int)
    d = d.sort_values("finished")
    d = d.drop_duplicates(["library", "nodes", "procs"], keep="last")
    d["_lib"] = d["library"].map(library_sort_key)
    return d.sort_values(["_lib", "nodes", "procs"])[cols].reset_index(drop=True)


def fitted_params(summary_csv):
    """The max-rate parameters ``harness fit`` wrote beside the summary
    (``model_params.json``, its ``maxrate`` section), else None (the defaults)."""
    return load_maxrate(Path(summary_csv).parent / "model_params.json")


def native_beside(nat: pd.DataFrame, harness_layout: str | None, ppn) -> pd.DataFrame:
    """The native rows drawn beside one ppn column: on a real layout those whose real
    processes per node are that ppn (comparable); on an emulated one all of them (one node
    here: not comparable, said on the figure)."""
    if nat is None or nat.empty:
        return nat if nat is not None else pd.DataFrame()
    if harness_layout == "real" and ppn is not None:
        return nat[np.isclose(nat["ppn"], float(ppn))]
    return nat


def figure_column(t: pd.DataFrame, tn: pd.DataFrame, ppn, x: str):
    """One ppn column of a figure: (RD/SMP/NAP rows, the native rows beside them, the layout
    of the harness rows, the size (``x`` = procs: the smallest) or P (``x`` = size: the
    largest) the column holds)."""
    g = t[t["ppn"] == ppn] if ppn is not None else t
    lay = "/".join(sorted(set(map(str, g["layout"].dropna())))) if len(g) else None
    n = native_beside(tn, lay, ppn) if len(tn) else tn
    fixed = "size" if x == "procs" else "procs"
    at = (g if len(g) else n)[fixed].agg("min" if x == "procs" else "max") if len(g) or len(n) else 0
    g, n = g[g[fixed] == at], (n[n[fixed] == at] if len(n) else n)
    if x == "procs" and len(g) and len(n):
        n = n[n["procs"].isin(g["procs"])]
    return g, n, lay, at


def speedups(g: pd.DataFrame, n: pd.DataFrame, x: str, lay) -> pd.DataFrame:
    """NAP's speedups of one figure column as rows (``x``, ``speedup``, ``series``); over
    MPICH's own SMP only where both saw the same real nodes (Bienz et al., Figs. 16-17)."""
    p = pivot(g, [x]) if len(g) else pd.DataFrame(
        columns=[x, "nap_mean", "speedup_vs_rd", "speedup_vs_smp"])
    parts = [p[[x]].assign(speedup=p["speedup_vs_rd"], series="NAP vs RD"),
             p[[x]].assign(speedup=p["speedup_vs_smp"], series="NAP vs SMP")]
    ms = n[n["series"] == "native:smp@mpich"] if len(n) else n
    if lay == "real" and len(p) and len(ms):
        v = p.merge(ms[[x, "mean"]].rename(columns={"mean": "native_smp"}), on=x)
        parts.append(v[[x]].assign(speedup=v["native_smp"] / v["nap_mean"],
                                   series="NAP vs MPICH SMP (native)"))
    return pd.concat(parts, ignore_index=True).astype({x: float, "speedup": float})
