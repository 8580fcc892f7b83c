"""RD vs SMP vs NAP (Bienz et al., Figs. 12-15) and the message-count table, from
``summary.csv`` alone.

Rows used: the harness algorithms ``recursive_doubling`` (RD), ``smp`` and ``nap`` whose record
carries a node layout (``harness.layout``, ``harness.measure.counting``); one library (the first in
the usual order when several are present) and one dtype/op/delay (the most frequent). Cells
are told apart by processes per node (``ppn``, from the record), P and size.

``make(inputs)`` writes

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

Returns the written paths. CLI: ``python -m harness.report node_aware --store results/<c>``.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis.node_aware import (
    ALGORITHMS,
    NATIVE_SERIES,
    counts_table,
    fig1_table,
    load,
    load_native,
    native_series,
    pivot,
    times_table,
)
from ..analysis.netparams import maxrate_params
from ..analysis.vocabulary import is_timed, timed_mask
from ..models import maxrate
from . import style, tables

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
NATIVE_STYLE = dict(zip(NATIVE_SERIES, (  # (colour, marker, line style)
    (style.color("native:smp"), "s", "--"),  # MPICH's SMP
    ("#000000", "D", ":"),  # AUTO: MPICH, Open MPI, Intel MPI
    ("#555555", "v", ":"),
    ("#999999", "P", ":"),
)))


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


# ------------------------------------------------------------------------------------ tables

# the first column left, the others right; Markdown cells as they are
LAYOUT = dict(placement="t", align="lr", bold_header=True, bold_caption=True, escape=False)


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
    return tables.write_table(table, base, caption, header=header, rows=rows, **LAYOUT)


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
    return tables.write_table(table, base, caption, header=header, rows=rows, **LAYOUT)


# ----------------------------------------------------------------------------------- figures

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
    t = d[timed_mask(d)]
    tn = nat[timed_mask(nat)] if nat is not None and len(nat) else pd.DataFrame(columns=["series"])
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
        crowded = crowded or bool(g["oversubscribed"].any()) or bool(
            len(n) and n["oversubscribed"].any())
        p = pivot(g, [x]).sort_values(x) if len(g) else pd.DataFrame()
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

def write_fig1_table(table: pd.DataFrame, base: Path) -> list[Path]:
    header = ["library", "nodes", "P", "time", "95% CI", "n", "status"]
    rows = []
    for r in table.to_dict("records"):
        mean, ci = (tables.format_time(r["mean"], r["ci_low"], r["ci_high"])
                    if is_timed(r) else ("", ""))
        rows.append([style.library_title(r["library"]), _int(r["nodes"]), _int(r["procs"]),
                     mean + (" ‡" if r["oversubscribed"] else ""), ci, _int(r["n"]),
                     str(r["status"])])
    caption = ("Bienz et al., Fig. 1: time of one MPI_Allreduce of a single double (8 B, sum) "
               "with each library's own choice (AUTO) against P. ‡ oversubscribed (more ranks "
               "than cores): measured, but no claim is drawn from it.")
    return tables.write_table(table, base, caption, header=header, rows=rows, **LAYOUT)


def fig1_figure(table: pd.DataFrame, path) -> list[Path]:
    """Time vs P, one line per library (and node count), the 95% CI shaded as the paper
    shades its five runs; oversubscribed points hollow."""
    t = table[timed_mask(table)] if len(table) else table
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


def make(inputs) -> list[Path]:
    """Every node-aware table and figure; the model figure with the max-rate parameters of
    ``inputs.params`` when it has them."""
    summary, tables_dir, figures_dir = inputs.summary, inputs.tables, inputs.figures
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
    fitted = maxrate_params(inputs.params) if inputs.params else None
    return written + model_figure(figures_dir / "node_aware_model", params=fitted)
