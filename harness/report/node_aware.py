"""RD vs SMP vs NAP (Bienz et al., Figs. 12-15) and the message-count table, from
``summary.csv`` alone.

Rows used: the harness algorithms ``recursive_doubling`` (RD), ``smp`` and ``nap`` whose record
carries a node layout (``harness.layout``, ``harness.measure.counting``); one library (the first in
the usual order when several are present) and one dtype/op/delay (the most frequent). Cells
are told apart by processes per node (``ppn``, from the record), P and size.

``make_all(summary_csv, tables_dir, figures_dir)`` writes

- ``figures_dir/node_aware_vs_procs.{png,pdf}``: one column per ppn; top, mean time (95% CI
  bars) vs P at the smallest size (one value per process, Fig. 12); bottom, NAP's speedup over
  RD and over SMP (Fig. 13);
- ``figures_dir/node_aware_vs_size.{png,pdf}``: the same vs message size at the largest P of
  each ppn (Figs. 14-15);
- ``figures_dir/node_aware_model.{png,pdf}``: the max-rate model of the three (Figs. 10-11
  shape: vs P at 16 processes per node, vs size at P = 32768) with the default parameters
  of ``harness.models.maxrate``, for comparison with the paper, or those fitted from the campaign's
  ping-pong cells when ``model_params.json`` beside the summary has them (``harness fit``);
- ``tables_dir/node_aware_counts.{md,tex,csv}``: per ppn, node count and algorithm, the most
  inter- and intra-node messages (and bytes) one rank sends per call, next to
  ``ceil(log_ppn n)`` and ``ceil(log2 n)``, at the smallest size;
- ``tables_dir/node_aware_times.{md,tex,csv}``: mean times of RD, SMP and NAP and NAP's
  speedups per ppn, P and size;
- ``figures_dir/node_aware_fig1.{png,pdf}``, ``tables_dir/node_aware_fig1.{md,tex,csv}``:
  Fig. 1, each library's AUTO reducing one double (8 B) against P (``make_fig1``).

Beside RD/SMP/NAP the figures and the time table show the libraries' own allreduce when the
summary has it (``load_native``): MPICH's forced SMP (``native:smp``, "MPI" of Figs. 16-17)
and every library's AUTO. Those run on the REAL node layout (one node on one machine), so on
emulated nodes they are drawn hollow and dashed with a note and never turned into a speedup;
with ``layout: real`` on the same nodes the table and the speedup panel add NAP over MPICH's
SMP.

Returns the written paths. CLI: ``python -m harness.report.node_aware SUMMARY TABLES FIGURES``.
"""

from __future__ import annotations

import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..fileio import atomic_write_text
from ..models import maxrate
from ..netparams import load_maxrate
from ..results import TIMED, row_json
from . import style, tables

ALGORITHMS = ("recursive_doubling", "smp", "nap")
LABELS = {"recursive_doubling": "RD", "smp": "SMP", "nap": "NAP"}
# RD keeps the harness's colour of recursive doubling; SMP takes that of the library's own SMP
# (native:smp); NAP gets an orange of its own (the hashed colours of the two were alike)
COLORS = {"recursive_doubling": style.color("recursive_doubling"),
          "smp": style.color("native:smp"), "nap": "#e6550d"}
MARKERS = {"recursive_doubling": "o", "smp": "s", "nap": "^"}

# The libraries' own MPI_Allreduce beside them (Bienz et al., Figs. 16-17: NAP against MPICH's
# SMP, "MPI"): MPICH's forced SMP and each library's AUTO. They run on the REAL node layout
# (the ranks' hosts), never on the emulated one, so they are drawn hollow and dashed; series
# key "<algorithm>@<library>"
NATIVE = ("native:smp", "native:auto")
NATIVE_STYLE = {  # (colour, marker, line style)
    "native:smp@mpich": (style.color("native:smp"), "s", "--"),
    "native:auto@mpich": ("#000000", "D", ":"),
    "native:auto@openmpi": ("#555555", "v", ":"),
    "native:auto@impi": ("#999999", "P", ":"),
}


def _from_params(params: dict, procs) -> dict:
    try:
        ppn = int(params["ppn"])
        return {"layout": params.get("layout", "emulated"), "ppn": ppn,
                "n_nodes": -(-int(procs) // ppn)}
    except (KeyError, TypeError, ValueError):
        return {}


def _read(summary) -> pd.DataFrame:
    return summary.copy() if isinstance(summary, pd.DataFrame) else pd.read_csv(summary)


def load(summary_csv) -> pd.DataFrame:
    """The node-aware rows of a summary, with ``ppn``, ``n_nodes`` and the counts as columns."""
    d = _read(summary_csv)
    d = d[d["algorithm"].isin(ALGORITHMS)].copy()
    rec = d["record"].map(row_json) if "record" in d else pd.Series([{}] * len(d), index=d.index)
    # a cell that never finished has no record: its layout and ppn come from its parameters
    params = d["params"].map(row_json) if "params" in d else pd.Series([{}] * len(d), index=d.index)
    rec = pd.Series([r if "layout" in r else _from_params(p, procs)
                     for r, p, procs in zip(rec, params, d["procs"])], index=d.index, dtype=object)
    d = d.loc[rec.map(lambda r: "layout" in r).astype(bool)].copy()
    rec = rec[d.index]
    for key in ("ppn", "n_nodes", "inter_msgs", "intra_msgs", "inter_bytes", "intra_bytes",
                "inter_msgs_total", "intra_msgs_total", "inter_steps"):
        d[key] = rec.map(lambda r, k=key: r.get(k) if not isinstance(r.get(k), list) else None)
    d["layout"] = rec.map(lambda r: r.get("layout"))
    d = d[pd.to_numeric(d["ppn"], errors="coerce").notna()].copy()
    for col in ("ppn", "n_nodes", "procs", "size", "mean", "ci_low", "ci_high"):
        d[col] = pd.to_numeric(d[col], errors="coerce")
    if d.empty:
        return d
    libs = sorted(d["library"].unique(), key=style.library_sort_key)
    d = d[d["library"] == libs[0]]
    for col in ("dtype", "op", "delay"):
        if col in d:
            d = d[d[col] == d[col].mode().iloc[0]]
    if "finished" in d:
        d = d.sort_values("finished")
    return d.drop_duplicates(["algorithm", "ppn", "procs", "size"], keep="last").reset_index(drop=True)


def _no_workload(d: pd.DataFrame) -> pd.DataFrame:
    if "params" not in d:
        return d
    workload = d["params"].map(lambda t: "workload" in row_json(t)).astype(bool)
    return d[~workload]  # (bool: an empty object mask would select columns instead of rows)


def load_native(summary_csv, like: pd.DataFrame | None = None) -> pd.DataFrame:
    """The libraries' own allreduce beside RD/SMP/NAP: ``native:smp`` (MPICH's SMP) and every
    library's ``native:auto``, at the dtype, op and delay of the harness rows ``like`` (their
    most frequent ones when ``like`` is empty) and within its sizes, single calls timed per
    call. Columns as in ``load`` plus ``series`` (``<algorithm>@<library>``); ``n_nodes`` is
    the run's node count (1 on one machine) and ``ppn`` P / nodes: the REAL layout the library
    sees."""
    d = _no_workload(_read(summary_csv))
    d = d[d["algorithm"].isin(NATIVE)].copy()
    if "timing" in d:
        d = d[d["timing"].fillna("percall") == "percall"]
    if d.empty:
        return d.assign(series=pd.Series(dtype=object), ppn=pd.Series(dtype=float),
                        n_nodes=pd.Series(dtype=float), layout=pd.Series(dtype=object))
    for col in ("procs", "size", "mean", "ci_low", "ci_high"):
        d[col] = pd.to_numeric(d[col], errors="coerce")
    for col in ("dtype", "op", "delay"):
        if col in d:
            ref = like[col] if like is not None and len(like) and col in like else d[col]
            d = d[d[col] == ref.mode().iloc[0]]
    if like is not None and len(like) and "size" in like:
        # only the sizes the harness rows span: AUTO cells of other experiments (1 MiB, ...)
        # would stretch the size axis past the comparison
        sizes = pd.to_numeric(like["size"], errors="coerce")
        d = d[d["size"].between(sizes.min(), sizes.max())]
    nodes = pd.to_numeric(d["nodes"], errors="coerce") if "nodes" in d else None
    d["n_nodes"] = nodes.fillna(1) if nodes is not None else 1
    d["ppn"] = d["procs"] / d["n_nodes"]
    d["layout"] = "real"
    d["series"] = d["algorithm"] + "@" + d["library"]
    if "finished" in d:
        d = d.sort_values("finished")
    d = d.drop_duplicates(["series", "procs", "n_nodes", "size"], keep="last")
    order = {k: i for i, k in enumerate(NATIVE_STYLE)}
    d["_order"] = d["series"].map(lambda k: order.get(k, len(order)))
    return d.sort_values(["_order", "procs", "size"]).drop(columns="_order").reset_index(drop=True)


def native_label(series: str) -> str:
    """``MPICH SMP (native)`` for ``native:smp@mpich``; ``AUTO Open MPI`` for AUTO."""
    alg, lib = series.split("@", 1)
    if alg == "native:auto":
        return f"AUTO {style.library_title(lib)}"
    return f"{style.library_title(lib)} {style.short(alg)} (native)"


def _native_style(series: str):
    if series in NATIVE_STYLE:
        return NATIVE_STYLE[series]
    alg = series.split("@", 1)[0]
    return style.color(alg), style.marker(alg), ":"


def _native_for(nat: pd.DataFrame, harness_layout: str | None, ppn) -> pd.DataFrame:
    """The native rows drawn beside one ppn column: on a real layout those whose real
    processes per node are that ppn (comparable); on an emulated one all of them (one node
    here: not comparable, said on the figure)."""
    if nat is None or nat.empty:
        return nat if nat is not None else pd.DataFrame()
    if harness_layout == "real" and ppn is not None:
        return nat[np.isclose(nat["ppn"], float(ppn))]
    return nat


def _real_note(nat: pd.DataFrame) -> str:
    n = sorted({int(v) for v in nat["n_nodes"].dropna()}) if len(nat) else []
    nodes = ", ".join(map(str, n)) or "1"
    here = "all ranks on this one host" if n == [1] else "the run's Slurm nodes"
    return (f"native = the library's MPI_Allreduce on the real layout ({nodes} node"
            f"{'s' if n != [1] else ''}: {here}); RD/SMP/NAP on emulated nodes of ppn ranks "
            f"— not comparable (use layout: real on a multi-node Slurm)")


def _timed(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["status"].isin(TIMED) & np.isfinite(d["mean"]) & (d["mean"] > 0)]


def _pivot(d: pd.DataFrame, keys) -> pd.DataFrame:
    """One row per ``keys`` with mean / CI per algorithm and NAP's speedups (NaN if missing)."""
    t = _timed(d)
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
    out = _pivot(d, keys)
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
                timed = row is not None and row["status"] in TIMED and math.isfinite(row["mean"])
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
    found = [c[:-len("_mean")] for c in table.columns
             if c.endswith("_mean") and c.startswith("native:")]
    order = list(NATIVE_STYLE)
    return sorted(found, key=lambda k: order.index(k) if k in order else len(order))


# ------------------------------------------------------------------------------------ tables

def _write(table: pd.DataFrame, header: list[str], rows: list[list[str]], base: Path,
           caption: str) -> list[Path]:
    base.parent.mkdir(parents=True, exist_ok=True)
    md = [f"**{caption}**", "", "| " + " | ".join(header) + " |",
          "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    tex = [r"\begin{table}[t]", r"\centering", r"\small",
           rf"\caption{{{tables.tex_escape(caption)}}}",
           rf"\label{{tab:{base.name.replace('_', '-')}}}",
           rf"\begin{{tabular}}{{{'l' + 'r' * (len(header) - 1)}}}", r"\toprule",
           " & ".join(rf"\textbf{{{tables.tex_escape(h)}}}" for h in header) + r" \\", r"\midrule"]
    tex += [" & ".join(tables.tex_escape(c) for c in r) + r" \\" for r in rows]
    tex += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    paths = [base.parent / f"{base.name}.{ext}" for ext in ("md", "tex", "csv")]
    atomic_write_text(paths[0], "\n".join(md) + "\n")
    atomic_write_text(paths[1], "\n".join(tex))
    atomic_write_text(paths[2], table.to_csv(index=False))
    return paths


def _int(v) -> str:
    return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else str(int(v))


def write_counts(table: pd.DataFrame, base: Path) -> list[Path]:
    header = ["ppn", "nodes n", "P", "size", "algorithm", "inter msgs", "intra msgs",
              "inter bytes", "intra bytes", "inter msgs (all ranks)", "⌈log_ppn n⌉", "⌈log2 n⌉"]
    rows = [[_int(r.ppn), _int(r.n_nodes), _int(r.procs), tables.format_size(r.size),
             LABELS[r.algorithm], _int(r.inter_msgs), _int(r.intra_msgs), _int(r.inter_bytes),
             _int(r.intra_bytes), _int(r.inter_msgs_total), _int(r.log_ppn_n), _int(r.log2_n)]
            for r in table.itertuples(index=False)]
    caption = ("Point-to-point messages per allreduce call: the most any one rank sends to "
               "other nodes (inter) and inside its node (intra), counted on an extra untimed "
               "call; NAP's inter-node count against ⌈log_ppn n⌉, RD's against ⌈log2 n⌉.")
    return _write(table, header, rows, base, caption)


def write_times(table: pd.DataFrame, base: Path) -> list[Path]:
    nats = native_series(table)
    header = (["ppn", "P", "nodes n", "size", "RD", "SMP", "NAP"]
              + [native_label(k) for k in nats]
              + (["native nodes"] if nats else [])
              + ["NAP speedup vs RD", "NAP speedup vs SMP"]
              + (["NAP speedup vs MPICH SMP"] if "native:smp@mpich" in nats else []))

    def t(v, status=None):
        if isinstance(v, float) and math.isfinite(v):
            return tables.format_time(v)[0]
        return str(status) if isinstance(status, str) else ""

    def x(v):
        return f"{v:.2f}×" if isinstance(v, float) and math.isfinite(v) else ""

    rows = []
    for r in table.to_dict("records"):
        row = [_int(r["ppn"]), _int(r["procs"]), _int(r["n_nodes"]), tables.format_size(r["size"]),
               t(r["recursive_doubling_mean"], r["recursive_doubling_status"]),
               t(r["smp_mean"], r["smp_status"]), t(r["nap_mean"], r["nap_status"])]
        row += [t(r[f"{k}_mean"], r[f"{k}_status"]) for k in nats]
        if nats:
            same = bool(r.get("comparable"))
            row.append(f"{_int(r.get('native_nodes'))} (real{'' if same else ', not comparable'})"
                       if _int(r.get("native_nodes")) else "")
        row += [x(r["speedup_vs_rd"]), x(r["speedup_vs_smp"])]
        if "native:smp@mpich" in nats:
            row.append(x(r.get("speedup_vs_native_smp")))
        rows.append(row)
    caption = ("Mean time per allreduce of RD, SMP and NAP and NAP's speedup (time of the other "
               "/ time of NAP), per processes per node, P and message size.")
    if nats:
        caption += (" Native columns: the library's own MPI_Allreduce (MPICH's SMP forced, each "
                    "library's AUTO) on the real node layout ('native nodes'); where RD/SMP/NAP "
                    "ran on emulated nodes the two are not comparable and no speedup over "
                    "MPICH's SMP is given (Bienz et al., Figs. 16-17 compare them on real nodes).")
    return _write(table, header, rows, base, caption)


# ----------------------------------------------------------------------------------- figures

def _truthy(v) -> bool:
    return str(v).strip().lower() in ("true", "1", "1.0", "yes")


def _plain_log(ax) -> None:
    """Log axis labelled 20, 50, 100 rather than 2×10¹."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_locator(LogLocator(subs=(2, 5)))
    ax.yaxis.set_minor_formatter(fmt)


def _errorbar(ax, s: pd.DataFrame, x: str, **kw):
    lo = (s["mean"] - s["ci_low"]).clip(lower=0).fillna(0).to_numpy(float)
    hi = (s["ci_high"] - s["mean"]).clip(lower=0).fillna(0).to_numpy(float)
    return ax.errorbar(s[x].to_numpy(float), s["mean"].to_numpy(float) * 1e6,
                       yerr=np.vstack([lo, hi]) * 1e6, **kw)


def _figure(d: pd.DataFrame, x: str, path, title: str,
            nat: pd.DataFrame | None = None) -> list[Path]:
    """Columns per ppn: time vs ``x`` (top) and NAP's speedups (bottom); the native rows
    ``nat`` (``load_native``) hollow and dashed beside them, with a note when they ran on
    another layout than RD/SMP/NAP."""
    style.setup()
    t = _timed(d)
    tn = _timed(nat) if nat is not None and len(nat) else pd.DataFrame(columns=["series"])
    ppns = sorted(t["ppn"].unique()) or [None]
    fig = Figure(figsize=(3.4 * len(ppns) + 0.6, 5.6), layout="constrained")
    axes = fig.subplots(2, len(ppns), squeeze=False, sharex="col")
    handles: dict[str, object] = {}
    notes: set[str] = set()
    crowded = False
    for j, ppn in enumerate(ppns):
        ax, axs = axes[0, j], axes[1, j]
        g = t[t["ppn"] == ppn] if ppn is not None else t
        lay = "/".join(sorted(set(map(str, g["layout"].dropna())))) if len(g) else None
        n = _native_for(tn, lay, ppn) if len(tn) else tn
        if x == "procs":
            size = g["size"].min() if len(g) else (n["size"].min() if len(n) else 0)
            g = g[g["size"] == size]
            n = n[n["size"] == size] if len(n) else n
            if len(g) and len(n):
                n = n[n["procs"].isin(g["procs"])]
            sub = f"ppn = {int(ppn)}, {tables.format_size(size)} per process" if ppn else ""
        else:
            procs = g["procs"].max() if len(g) else (n["procs"].max() if len(n) else 0)
            g = g[g["procs"] == procs]
            n = n[n["procs"] == procs] if len(n) else n
            sub = f"ppn = {int(ppn)}, P = {int(procs)}" if ppn else ""
        if lay and lay != "real" and ppn is not None:
            sub += f" ({lay})"
        for a in ALGORITHMS:
            s = g[g["algorithm"] == a].sort_values(x)
            if not s.empty:
                handles[LABELS[a]] = _errorbar(ax, s, x, color=COLORS[a], marker=MARKERS[a],
                                               label=LABELS[a])
        for series in [k for k in NATIVE_STYLE if k in set(n["series"])] + sorted(
                set(n["series"]) - set(NATIVE_STYLE)) if len(n) else []:
            s = n[n["series"] == series].sort_values(x)
            c, m, ls = _native_style(series)
            handles[native_label(series)] = _errorbar(
                ax, s, x, color=c, marker=m, ls=ls, mfc="white", mec=c, label=native_label(series))
            if lay != "real":
                notes.add(_real_note(n))
        crowded = crowded or any(_truthy(v) for v in g.get("oversubscribed", [])) or any(
            _truthy(v) for v in (n["oversubscribed"] if "oversubscribed" in n else []))
        p = _pivot(g, [x]).sort_values(x) if len(g) else pd.DataFrame()
        for col, ref, ls in (("speedup_vs_rd", "recursive_doubling", "-"),
                             ("speedup_vs_smp", "smp", "--")):
            if len(p) and p[col].notna().any():
                axs.plot(p[x], p[col], ls, color=COLORS[ref], marker=MARKERS[ref],
                         label=f"NAP vs {LABELS[ref]}")
        # NAP against MPICH's own SMP (Figs. 16-17) only where both saw the same real nodes
        ms = n[n["series"] == "native:smp@mpich"] if len(n) else n
        if lay == "real" and len(p) and len(ms):
            v = p.merge(ms[[x, "mean"]].rename(columns={"mean": "native_smp"}), on=x)
            v = v[v["native_smp"].notna() & v["nap_mean"].notna()]
            if len(v):
                c, m, _ = _native_style("native:smp@mpich")
                axs.plot(v[x], v["native_smp"] / v["nap_mean"], ":", color=c, marker=m,
                         mfc="white", mec=c, label="NAP vs MPICH SMP (native)")
        axs.axhline(1.0, color="#000000", lw=0.6)
        ax.set_title(sub)
        ax.set_yscale("log")
        _plain_log(ax)
        xs = sorted(set(g[x]) | (set(n[x]) if len(n) else set()))
        if x == "size":
            axs.set_xscale("log", base=2)
            axs.set_xticks(xs)
            axs.set_xticklabels([tables.format_size(v) for v in xs], rotation=45)
            axs.set_xlabel("message size per process")
        else:
            if len(xs) > 1 and xs[-1] / xs[0] > 8:
                axs.set_xscale("log", base=2)
            axs.set_xticks(xs)
            axs.set_xticklabels([str(int(v)) for v in xs], rotation=45 if len(xs) > 5 else 0)
            axs.set_xlabel("processes P")
        if j == 0:
            ax.set_ylabel("time per allreduce (µs)")
            axs.set_ylabel("speedup of NAP")
        if axs.get_legend_handles_labels()[0]:
            axs.legend(loc="best")
    if crowded:
        notes.add("P > cores of a node somewhere (oversubscribed): times carry no claim")
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncol=min(len(handles), 4),
                   title="\n".join(textwrap.fill(v, 50 + 45 * len(ppns)) for v in sorted(notes))
                   or None,
                   title_fontsize=7.5)
    fig.suptitle(title)
    return style.save(fig, path)


def model_figure(path, params=None, ppn: int = 16, procs: int = 32768) -> list[Path]:
    """The max-rate model's RD, SMP and NAP (``harness.models.maxrate``, eqs. 4-6) in the shape of
    the paper's Figs. 10-11: cost vs P for one double per process (P = ppn, 2 ppn, ... up to
    ``procs``) and cost vs size at ``procs``, ``ppn`` processes per node; default parameters
    unless ``params`` (a ``MaxRateParams``) is given."""

    style.setup()
    p = params or maxrate.MaxRateParams.defaults()
    model = {"rd": "recursive_doubling", "smp": "smp", "nap": "nap"}
    fig = Figure(figsize=(7.0, 3.4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    nodes = [2 ** k for k in range(0, int(math.log2(procs // ppn)) + 1)]
    sizes = [8 * 2 ** k for k in range(0, 18)]
    for name, alg in model.items():
        ax1.plot([n * ppn for n in nodes], [maxrate.cost(name, n, ppn, 8, p).total * 1e6 for n in nodes],
                 color=COLORS[alg], marker=MARKERS[alg], label=LABELS[alg])
        ax2.plot(sizes, [maxrate.cost(name, procs // ppn, ppn, s, p).total * 1e6 for s in sizes],
                 color=COLORS[alg], marker=MARKERS[alg], label=LABELS[alg])
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("processes P")
    ax1.set_ylabel("modelled time (µs)")
    ax1.set_title(f"one double per process, ppn = {ppn}")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("bytes per process")
    ax2.set_title(f"P = {procs}, ppn = {ppn}")
    ticks = sizes[::3]
    ax2.set_xticks(ticks)
    ax2.set_xticklabels([tables.format_size(v) for v in ticks], rotation=45)
    ax1.legend(loc="best")
    fig.suptitle("Max-rate model (Bienz et al., eqs. 4-6)\n"
                 + ", ".join(f"{k}={getattr(p, k):g}" for k in ("alpha_l", "beta_l", "alpha", "R_b",
                                                                 "R_N", "gamma")),
                 fontsize=7.5)
    return style.save(fig, path)


# ------------------------------------------------------------------------------------ Fig. 1

FIG1_SIZE = 8  # one double


def fig1_table(summary_csv) -> pd.DataFrame:
    """Bienz et al., Fig. 1: each library's AUTO (``native:auto``) reducing one double (8 B,
    float64, sum, no delay, timed per call) against P. One row per library, node count and P:
    mean, CI, repetitions, status, oversubscribed."""
    cols = ["library", "nodes", "procs", "mean", "ci_low", "ci_high", "n", "status",
            "oversubscribed"]
    d = _no_workload(_read(summary_csv))
    d = d[d["algorithm"] == "native:auto"].copy()
    for col in ("procs", "size", "mean", "ci_low", "ci_high", "n"):
        if col in d:
            d[col] = pd.to_numeric(d[col], errors="coerce")
    d = d[d["size"] == FIG1_SIZE]
    for col, want in (("dtype", "float64"), ("op", "sum"), ("delay", "none"),
                      ("timing", "percall")):
        if col in d:
            d = d[d[col].fillna(want) == want]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d["nodes"] = pd.to_numeric(d["nodes"], errors="coerce").fillna(1).astype(int) \
        if "nodes" in d else 1
    d["oversubscribed"] = d["oversubscribed"].map(_truthy) if "oversubscribed" in d else False
    if "n" not in d:
        d["n"] = np.nan
    if "finished" in d:
        d = d.sort_values("finished")
    d = d.drop_duplicates(["library", "nodes", "procs"], keep="last")
    d["_lib"] = d["library"].map(style.library_sort_key)
    return d.sort_values(["_lib", "nodes", "procs"])[cols].reset_index(drop=True)


def write_fig1_table(table: pd.DataFrame, base: Path) -> list[Path]:
    header = ["library", "nodes", "P", "time", "95% CI", "n", "status"]
    rows = []
    for r in table.to_dict("records"):
        mean, ci = (tables.format_time(r["mean"], r["ci_low"], r["ci_high"])
                    if r["status"] in TIMED else ("", ""))
        rows.append([style.library_title(r["library"]), _int(r["nodes"]), _int(r["procs"]),
                     mean + (" ‡" if r["oversubscribed"] else ""), ci, _int(r["n"]),
                     str(r["status"])])
    caption = ("Bienz et al., Fig. 1: time of one MPI_Allreduce of a single double (8 B, sum) "
               "with each library's own choice (AUTO) against P. ‡ oversubscribed (more ranks "
               "than cores): measured, but no claim is drawn from it.")
    return _write(table, header, rows, base, caption)


def fig1_figure(table: pd.DataFrame, path) -> list[Path]:
    """Time vs P, one line per library (and node count), the 95% CI shaded as the paper
    shades its five runs; oversubscribed points hollow."""
    t = table[table["status"].isin(TIMED)] if len(table) else table
    title = "MPI_Allreduce of one double against P (Bienz et al., Fig. 1)"
    if t.empty:
        return style.placeholder(path, title, "no native:auto cells of 8 B (float64, sum) in "
                                 "this campaign: add the node-aware-fig1 experiment")
    style.setup()
    fig = Figure(figsize=(5.2, 3.6), layout="constrained")
    ax = fig.subplots()
    markers = {"mpich": "D", "openmpi": "v", "impi": "P"}
    colors = {"mpich": "#000000", "openmpi": "#555555", "impi": "#999999"}
    # one line per library across P (P = 16 on one node, then 32 on two, ...); per node count
    # too only when some P was measured on several node counts
    multi = t.duplicated(["library", "procs"]).any()
    t = t.assign(_line=t["nodes"] if multi else 0)
    for (lib, nodes), g in t.groupby(["library", "_line"], sort=False):
        g = g.sort_values("procs")
        c, m = colors.get(lib, style.color(lib)), markers.get(lib, "o")
        label = style.library_title(lib) + (f", {nodes} nodes" if multi else "")
        ax.fill_between(g["procs"], g["ci_low"] * 1e6, g["ci_high"] * 1e6, color=c, alpha=0.15,
                        lw=0)
        ax.plot(g["procs"], g["mean"] * 1e6, "-", marker=m, color=c, label=label)
        hollow = g[g["oversubscribed"]]
        ax.plot(hollow["procs"], hollow["mean"] * 1e6, m, color=c, mfc="white", ls="none")
    ps = sorted(t["procs"].unique())
    if ps[-1] / ps[0] > 16:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ps)
    ax.set_xticklabels([str(int(p)) for p in ps], rotation=45 if len(ps) > 8 else 0)
    ax.set_yscale("log")
    _plain_log(ax)
    ax.set_xlabel("processes P")
    ax.set_ylabel("time per allreduce (µs)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center",
               ncol=t["library"].nunique() if not multi else 3,
               title="AUTO (the library's choice)")
    if t["oversubscribed"].any():
        first = int(t[t["oversubscribed"]]["procs"].min())
        ax.axvspan(first - 0.5, ps[-1] + 0.5, color="#f2f2f2", zorder=0, lw=0)
        ax.text(0.99, 0.02, f"P ≥ {first}: more ranks than cores (hollow): no claim",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5, color="0.3")
    fig.suptitle(title)
    return style.save(fig, path)


def make_fig1(summary_csv, tables_dir, figures_dir) -> list[Path]:
    table = fig1_table(summary_csv)
    return (write_fig1_table(table, Path(tables_dir) / "node_aware_fig1")
            + fig1_figure(table, Path(figures_dir) / "node_aware_fig1"))


def make_all(summary_csv, tables_dir, figures_dir) -> list[Path]:
    summary = _read(summary_csv)
    d = load(summary)
    nat = load_native(summary, like=d)
    written: list[Path] = []
    written += write_counts(counts_table(d), Path(tables_dir) / "node_aware_counts")
    written += write_times(times_table(d, nat), Path(tables_dir) / "node_aware_times")
    lib = style.library_title(d["library"].iloc[0]) if len(d) else "no data"
    layout = ", ".join(sorted(str(v) for v in d["layout"].dropna().unique())) if len(d) else ""
    beside = " (+ native)" if len(nat) else ""
    written += _figure(d, "procs", Path(figures_dir) / "node_aware_vs_procs",
                       f"RD vs SMP vs NAP{beside}, one value per process ({lib}, {layout} nodes)",
                       nat)
    written += _figure(d, "size", Path(figures_dir) / "node_aware_vs_size",
                       f"RD vs SMP vs NAP{beside} vs message size ({lib}, {layout} nodes)", nat)
    written += make_fig1(summary, tables_dir, figures_dir)
    written += model_figure(Path(figures_dir) / "node_aware_model", params=fitted_params(summary_csv))
    return written


def fitted_params(summary_csv):
    """The max-rate parameters ``harness fit`` wrote beside the summary
    (``model_params.json``, its ``maxrate`` section), else None (the defaults)."""

    return load_maxrate(Path(summary_csv).parent / "model_params.json")


def main(argv=None) -> int:
    return style.command_line(make_all, "node_aware", "SUMMARY_CSV TABLES_DIR FIGURES_DIR", argv)


if __name__ == "__main__":
    sys.exit(main())
