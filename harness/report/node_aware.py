"""RD vs SMP vs NAP (Bienz et al., Figs. 12-15) and the message-count table, from
``summary.csv`` alone.

Rows used: the harness algorithms ``recursive_doubling`` (RD), ``smp`` and ``nap`` whose record
carries a node layout (``harness.layout``, ``harness.counting``); one library (the first in
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
  of ``harness.maxrate``, for comparison with the paper, or those fitted from the campaign's
  ping-pong cells when ``model_params.json`` beside the summary has them (``harness fit``);
- ``tables_dir/node_aware_counts.{md,tex,csv}``: per ppn, node count and algorithm, the most
  inter- and intra-node messages (and bytes) one rank sends per call, next to
  ``ceil(log_ppn n)`` and ``ceil(log2 n)``, at the smallest size;
- ``tables_dir/node_aware_times.{md,tex,csv}``: mean times of RD, SMP and NAP and NAP's
  speedups per ppn, P and size.

Returns the written paths. CLI: ``python -m harness.report.node_aware SUMMARY TABLES FIGURES``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..results import atomic_write_text
from . import style, tables

ALGORITHMS = ("recursive_doubling", "smp", "nap")
LABELS = {"recursive_doubling": "RD", "smp": "SMP", "nap": "NAP"}
# RD keeps the harness's colour of recursive doubling; SMP takes that of the library's own SMP
# (native:smp); NAP gets an orange of its own (the hashed colours of the two were alike)
COLORS = {"recursive_doubling": style.color("recursive_doubling"),
          "smp": style.color("native:smp"), "nap": "#e6550d"}
MARKERS = {"recursive_doubling": "o", "smp": "s", "nap": "^"}
TIMED = ("ok", "not-converged")


def _json(text) -> dict:
    if isinstance(text, str) and text.strip():
        try:
            value = json.loads(text)
            return value if isinstance(value, dict) else {}
        except ValueError:
            return {}
    return {}


def _from_params(params: dict, procs) -> dict:
    try:
        ppn = int(params["ppn"])
        return {"layout": params.get("layout", "emulated"), "ppn": ppn,
                "n_nodes": -(-int(procs) // ppn)}
    except (KeyError, TypeError, ValueError):
        return {}


def load(summary_csv) -> pd.DataFrame:
    """The node-aware rows of a summary, with ``ppn``, ``n_nodes`` and the counts as columns."""
    d = pd.read_csv(summary_csv)
    d = d[d["algorithm"].isin(ALGORITHMS)].copy()
    rec = d["record"].map(_json) if "record" in d else pd.Series([{}] * len(d), index=d.index)
    # a cell that never finished has no record: its layout and ppn come from its parameters
    params = d["params"].map(_json) if "params" in d else pd.Series([{}] * len(d), index=d.index)
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


def times_table(d: pd.DataFrame) -> pd.DataFrame:
    if d.empty:
        return pd.DataFrame(columns=["ppn", "procs", "n_nodes", "size"])
    return _pivot(d, ["ppn", "procs", "n_nodes", "size"]).sort_values(["ppn", "procs", "size"])


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
    header = ["ppn", "P", "nodes n", "size", "RD", "SMP", "NAP", "NAP speedup vs RD",
              "NAP speedup vs SMP"]

    def t(v, status=None):
        if isinstance(v, float) and math.isfinite(v):
            return tables.format_time(v)[0]
        return str(status) if isinstance(status, str) else ""

    def x(v):
        return f"{v:.2f}×" if isinstance(v, float) and math.isfinite(v) else ""

    rows = [[_int(r.ppn), _int(r.procs), _int(r.n_nodes), tables.format_size(r.size),
             t(r.recursive_doubling_mean, r.recursive_doubling_status), t(r.smp_mean, r.smp_status),
             t(r.nap_mean, r.nap_status), x(r.speedup_vs_rd),
             x(r.speedup_vs_smp)] for r in table.itertuples(index=False)]
    caption = ("Mean time per allreduce of RD, SMP and NAP and NAP's speedup (time of the other "
               "/ time of NAP), per processes per node, P and message size.")
    return _write(table, header, rows, base, caption)


# ----------------------------------------------------------------------------------- figures

def _figure(d: pd.DataFrame, x: str, path, title: str) -> list[Path]:
    """Columns per ppn: time vs ``x`` (top) and NAP's speedups (bottom)."""
    style.setup()
    t = _timed(d)
    ppns = sorted(t["ppn"].unique()) or [None]
    fig = Figure(figsize=(3.2 * len(ppns) + 0.6, 5.0))
    axes = fig.subplots(2, len(ppns), squeeze=False, sharex="col")
    for j, ppn in enumerate(ppns):
        ax, axs = axes[0, j], axes[1, j]
        g = t[t["ppn"] == ppn] if ppn is not None else t
        if x == "procs":
            size = g["size"].min() if len(g) else 0
            g = g[g["size"] == size]
            sub = f"ppn = {int(ppn)}, {tables.format_size(size)} per process" if ppn else ""
        else:
            procs = g["procs"].max() if len(g) else 0
            g = g[g["procs"] == procs]
            sub = f"ppn = {int(ppn)}, P = {int(procs)}" if ppn else ""
        for a in ALGORITHMS:
            s = g[g["algorithm"] == a].sort_values(x)
            if s.empty:
                continue
            lo = (s["mean"] - s["ci_low"]).clip(lower=0).fillna(0)
            hi = (s["ci_high"] - s["mean"]).clip(lower=0).fillna(0)
            ax.errorbar(s[x], s["mean"] * 1e6, yerr=[lo * 1e6, hi * 1e6], color=COLORS[a],
                        marker=MARKERS[a], label=LABELS[a])
        p = _pivot(g, [x]).sort_values(x) if len(g) else pd.DataFrame()
        for col, ref, ls in (("speedup_vs_rd", "recursive_doubling", "-"),
                             ("speedup_vs_smp", "smp", "--")):
            if len(p) and p[col].notna().any():
                axs.plot(p[x], p[col], ls, color=COLORS[ref], marker=MARKERS[ref],
                         label=f"NAP vs {LABELS[ref]}")
        axs.axhline(1.0, color="#000000", lw=0.6)
        ax.set_title(sub)
        ax.set_yscale("log")
        if x == "size":
            axs.set_xscale("log", base=2)
            ticks = sorted(g["size"].unique())
            axs.set_xticks(ticks)
            axs.set_xticklabels([tables.format_size(v) for v in ticks], rotation=45)
            axs.set_xlabel("message size per process")
        else:
            ticks = sorted(g["procs"].unique())
            axs.set_xticks(ticks)
            axs.set_xticklabels([str(int(v)) for v in ticks])
            axs.set_xlabel("processes P")
        if j == 0:
            ax.set_ylabel("time per allreduce (µs)")
            axs.set_ylabel("speedup of NAP")
        ax.legend(loc="best")
        axs.legend(loc="best")
    fig.suptitle(title)
    return style.save(fig, path)


def model_figure(path, params=None, ppn: int = 16, procs: int = 32768) -> list[Path]:
    """The max-rate model's RD, SMP and NAP (``harness.maxrate``, eqs. 4-6) in the shape of
    the paper's Figs. 10-11: cost vs P for one double per process (P = ppn, 2 ppn, ... up to
    ``procs``) and cost vs size at ``procs``, ``ppn`` processes per node; default parameters
    unless ``params`` (a ``MaxRateParams``) is given."""
    from .. import maxrate

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


def make_all(summary_csv, tables_dir, figures_dir) -> list[Path]:
    d = load(summary_csv)
    written: list[Path] = []
    written += write_counts(counts_table(d), Path(tables_dir) / "node_aware_counts")
    written += write_times(times_table(d), Path(tables_dir) / "node_aware_times")
    lib = style.library_title(d["library"].iloc[0]) if len(d) else "no data"
    layout = ", ".join(sorted(str(v) for v in d["layout"].dropna().unique())) if len(d) else ""
    written += _figure(d, "procs", Path(figures_dir) / "node_aware_vs_procs",
                       f"RD vs SMP vs NAP, one value per process ({lib}, {layout} nodes)")
    written += _figure(d, "size", Path(figures_dir) / "node_aware_vs_size",
                       f"RD vs SMP vs NAP vs message size ({lib}, {layout} nodes)")
    written += model_figure(Path(figures_dir) / "node_aware_model", params=fitted_params(summary_csv))
    return written


def fitted_params(summary_csv):
    """The max-rate parameters ``harness fit`` wrote beside the summary
    (``model_params.json``, its ``maxrate`` section), else None (the defaults)."""
    from ..netparams import load_maxrate

    return load_maxrate(Path(summary_csv).parent / "model_params.json")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: python -m harness.report.node_aware SUMMARY_CSV TABLES_DIR FIGURES_DIR",
              file=sys.stderr)
        return 2
    for p in make_all(*argv):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
