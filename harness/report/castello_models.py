"""Theory against measurement (Castelló et al., Sect. 3, Table 1, Figs. 2-3) and the max-rate
cost of one message (Bienz et al., Fig. 5), with the network parameters fitted from the
campaign's ping-pong cells (``harness.analysis.netparams``, ``model_params.json``).

The models (Table 1 in bytes; THEO, OVL, NOVL): ``harness/analysis/castello.py``.

Outputs of ``make(inputs)``:

- ``tables_dir/castello_models.{md,tex,csv}``: per library, P, algorithm and measured size: the
  measured time and MiB/s, THEO, OVL and NOVL MiB/s, REAL/THEO;
- ``tables_dir/network_params.{md,tex,csv}``: the fitted parameters beside Castelló's and SUARA
  Table 4's;
- ``figures_dir/castello_fig1.{png,pdf}``: Fig. 1, THEO MiB/s of the five algorithms against
  size (p = 50), p (n = 16 MiB), link bandwidth and delta x gamma (SRG s = 24), with Castelló's
  parameters (solid) and the ping-pong fit of ``netparams.PREFERRED_LIBRARY`` (dashed; drawn
  also without a ping-pong fit, then the paper's curves only);
- ``figures_dir/castello_fig2.{png,pdf}``: per library (rows) and P (columns), measured MiB/s
  of RDB, RSA, LIN, RNG, SRG (solid) and the model "-T" (dashed);
- ``figures_dir/castello_fig3.{png,pdf}``: RSA and RNG (columns) per P (rows): THEO, REAL,
  OVL, NOVL;
- ``figures_dir/maxrate_fig5.{png,pdf}``: the modelled cost of one message against its size
  per level (socket, node, network at ppn 1, 2, 4, ...) from the max-rate parameters, with the
  measured ping-pong points.

The parameters come from ``inputs.params`` when given (the file ``harness fit`` writes), else
they are fitted here from the summary (``python -m harness.report castello_models --store
results/<c> [--params JSON]``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from ..analysis.castello import (
    ALGORITHMS,
    CASTELLO,
    NATIVE,
    fig5_lines,
    machine_params,
    measured,
    model_mibs,
    model_table,
    params_doc,
    params_table,
    pingpong_for,
    segment_size,
)
from ..analysis.castello import FIG1, fig1_curves  # noqa: F401  (the models' curves, Fig. 1)
from ..analysis.castello import size_grid as _grid
from ..units import format_number
from . import facets, style, tables


def _n(v) -> str:
    return format_number(v, ".0f" if v >= 100 else ".3g")


def write_model_table(t: pd.DataFrame, base, doc: dict) -> list[Path]:
    header = ["Library", "P", "Alg.", "native", "Size", "time", "REAL MiB/s", "THEO MiB/s",
              "REAL/THEO", "OVL MiB/s", "NOVL MiB/s"]
    rows = [[style.library_title(r.library), str(r.procs), r.algorithm,
             r.native.split(":", 1)[1], tables.format_size(r.size),
             tables.format_time(r.mean)[0] + (" ‡" if r.oversubscribed else ""),
             _n(r.real_mibs), _n(r.theo_mibs), f"{r.real_over_theo:.2f}", _n(r.ovl_mibs),
             _n(r.novl_mibs)] for r in t.itertuples(index=False)]
    srcs = ", ".join(sorted(set(t["params_from"]))) if len(t) else "none"
    cap = ("Castelló et al., Table 1 against measurement: measured allreduce throughput (REAL, "
           "size/time) and the models THEO (Table 1), OVL (all overlapped: L + max(B, A)) and "
           f"NOVL (no overlap: 2L + 2B + A), with alpha, beta, gamma from the {srcs} fit "
           f"(gamma {doc['gamma']:.3g} s/B). ‡ oversubscribed.")
    return tables.write_table(t, base, cap, header=header, rows=rows,
                              layout=tables.Layout(bold_caption=True))


def write_params_table(t: pd.DataFrame, base) -> list[Path]:
    header = ["source", "alpha", "beta [s/B]", "1/beta [GB/s]", "gamma [s/B]", "1/gamma [GB/s]",
              "R^2", "n"]
    rows = [[r.source, tables.format_time(r.alpha)[0], f"{r.beta:.3g}",
             f"{1 / r.beta / 1e9:.3g}" if r.beta > 0 else "inf", f"{r.gamma:.3g}",
             f"{1 / r.gamma / 1e9:.3g}" if r.gamma > 0 else "inf",
             format_number(r.r2, ".4f"), format_number(r.n, ".0f")]
            for r in t.itertuples(index=False)]
    cap = ("Network parameters: Hockney alpha, beta from one-pair ping-pong (least squares "
           "weighted by 1/time), gamma from local reductions, beside Castelló et al.'s "
           "(gamma = 8e9 FP32 flop/s as 4 B per flop) and SUARA Table 4's.")
    return tables.write_table(t, base, cap, header=header, rows=rows,
                              layout=tables.Layout(bold_caption=True))


# --------------------------------------------------------------------------- figures


def _table1_look(alg: str) -> facets.Look:
    """One colour and marker per Table 1 algorithm in every panel (MPICH names RSA
    reduce_scatter_allgather): Open MPI's name of it picks them."""
    return facets.algorithm_look(NATIVE["openmpi"][alg])


def fig2(meas: pd.DataFrame, doc: dict, path) -> list[Path]:
    """Measured MiB/s against size, a panel per library and P, a line per Table 1 algorithm;
    dashed, its model (THEO) with the library's ping-pong parameters."""
    xs = _grid(meas["size"].min(), meas["size"].max()) if len(meas) else []

    def model(ax, key, d, factor) -> dict:
        lib, P = key["library"], key["procs"]
        pp, src = pingpong_for(doc, lib)
        g, seg = pp.get("gamma") or doc["gamma"], segment_size(lib)
        ax.set_title(f"{style.library_title(lib)}, P = {P} (model: ping-pong {src})")
        return {f"{alg}-T": ax.plot(xs, model_mibs(alg, P, xs, pp, g, segment=seg), ls="--",
                                    lw=0.9, color=_table1_look(alg).color)[0]
                for alg in ALGORITHMS if alg in NATIVE.get(lib, {})}

    spec = facets.Spec(
        x="size", y="throughput", series="alg", rows="library", cols="procs", ci="none",
        look=_table1_look, order=lambda a: [x for x in ALGORITHMS if x in a], after=model,
        ylabel="MiB/s (size / time)", notes=("-T, dashed: the algorithm's Table 1 model (THEO)",),
        title="Castelló et al., Fig. 2: Table 1 models with ping-pong parameters against "
              "measured allreduce")
    return facets.figure(spec, meas, path, empty="no measured native allreduce of RDB, RSA, "
                         "LIN, RNG or SRG")


# Castelló et al., Fig. 1: the fixed values (caption and Sect. 3.3); n = 16 MiB is the caption's
# top-right value, used for every panel with a fixed size (the text gives 2^20 bytes)
def fig1(doc: dict | None, path) -> list[Path]:
    """Castelló et al., Fig. 1 with the paper's parameters (solid) and, when the parameter file
    has a ping-pong fit, the same curves with this machine's alpha, beta, gamma (dashed)."""
    machine, pp, src = machine_params(doc)
    sets = [("Castelló et al.", CASTELLO, "-")] + ([("this machine", machine, "--")] if machine
                                                   else [])
    if machine:
        mine = (f"dashed: this machine, {style.library_title(src)} ping-pong fit "
                f"({pp.get('level', '?')}): alpha = {tables.format_time(pp['alpha'])[0]}, "
                f"1/beta = {1 / pp['beta'] / 1e6:,.0f} MB/s, gamma = "
                f"{1 / machine['gamma'] / 4:.3g} FP32 flop/s (4 B each)")
    elif src and not pp.get("beta", 0) > 0:
        mine = (f"this machine not drawn: the {style.library_title(src)} ping-pong fit has "
                "beta = 0 (its sizes do not resolve the bandwidth; fit with larger sizes)")
    else:
        mine = "this machine not drawn: the parameter file has no ping-pong fit (harness fit)"
    style.setup()
    fig = Figure(figsize=(10.0, 7.6), layout="constrained")
    axs = fig.subplots(2, 2)
    panels = (("size", axs[0, 0], f"p = {FIG1['p']}"),
              ("nodes", axs[0, 1], f"n = {tables.format_size(FIG1['n'])}"),
              ("bandwidth", axs[1, 0], f"p = {FIG1['p']}, n = {tables.format_size(FIG1['n'])}"),
              ("delta", axs[1, 1], f"p = {FIG1['p']}, n = {tables.format_size(FIG1['n'])}, "
                                   "gamma x delta"))
    handles = {}
    for label, par, ls in sets:
        curves = fig1_curves(par["alpha"], par["beta"], par["gamma"])
        for panel, ax, _ in panels:
            xs, ys = curves[panel]
            xplot = xs / 1e6 if panel == "bandwidth" else xs
            for alg in ALGORITHMS:
                h, = ax.plot(xplot, ys[alg], ls=ls, lw=1.4 if ls == "-" else 1.1,
                             color=style.color(NATIVE["openmpi"][alg]))
                if ls == "-":
                    handles.setdefault(alg, h)
            if panel == "bandwidth":
                ax.axvline(1 / par["beta"] / 1e6, color="0.5", ls=ls, lw=0.7)
    for label, _, ls in sets:
        handles[label] = Line2D([], [], color="0.2", ls=ls)
    for panel, ax, fixed in panels:
        if panel == "size":
            facets.size_axis(ax, [], label="message size n (bytes per node)",
                             limits=(2**4 / 2**0.3, 2**28 * 2**0.3))
        elif panel == "nodes":
            ax.set_xscale("log", base=2)
            ax.set_xticks([2, 4, 8, 16, 32, 64, 128, 256])
            ax.set_xticklabels(["2", "4", "8", "16", "32", "64", "128", "256"])
            ax.set_xlabel("nodes p (one rank each)")
        elif panel == "bandwidth":
            ax.set_xscale("log", base=10)
            ax.set_xlabel("link bandwidth 1/beta (MB/s; grey: each set's fitted value)")
        else:
            ax.set_xscale("log", base=2)
            ticks = [2.0 ** k for k in range(-3, 5)]
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"1/{int(1 / v)}" if v < 1 else f"{v:g}" for v in ticks])
            ax.set_xlabel("delta (arithmetic rate = delta x gamma)")
        ax.set_yscale("log")
        ax.set_ylabel("MiB/s (n / time, THEO)")
        ax.set_title(fixed + (f", SRG s = {FIG1['s']}"), fontsize=9)
        ax.grid(True, which="major", lw=0.3, alpha=0.5)
        ax.xaxis.set_minor_locator(NullLocator())  # also keeps the figure quick to draw
    order = [k for k in (*ALGORITHMS, *(s[0] for s in sets)) if k in handles]
    fig.legend([handles[k] for k in order], order, loc="outside right center")
    fig.suptitle("Castelló et al., Fig. 1: Table 1 (THEO) throughput of the allreduce algorithms\n"
                 "solid: paper's parameters (ALTEC, InfiniBand EDR): alpha = 2 µs, "
                 "1/beta = 11,770 MB/s, gamma = 8e9 FP32 flop/s\n" + mine, fontsize=9)
    return style.save(fig, path)


VARIANT_STYLE = {name: (style.SERIES_COLORS[name], ls, mk) for name, ls, mk in (
    ("THEO", "--", None), ("REAL", "-", "o"), ("OVL", ":", None), ("NOVL", "-.", None))}


def fig3(meas: pd.DataFrame, doc: dict, path) -> list[Path]:
    """RSA and RNG of one library (Open MPI when measured): measured (REAL) against the
    three model variants, a panel per algorithm and P."""
    algs = ("RSA", "RNG")
    libs = [l for l in sorted(meas["library"].unique(), key=lambda l: (l != "openmpi", l))
            if set(meas[meas["library"] == l]["alg"]) & set(algs)] if len(meas) else []
    lib = libs[0] if libs else ""
    d = meas[(meas["library"] == lib) & meas["alg"].isin(algs)] if libs else meas
    pp, src = pingpong_for(doc, lib) if libs else ({}, "")
    g = pp.get("gamma") or doc.get("gamma")
    xs = _grid(d["size"].min(), d["size"].max()) if len(d) else []

    def model(ax, key, rows, factor) -> dict:
        alg, P = key["alg"], key["procs"]
        ax.set_title(f"{alg} ({NATIVE[lib].get(alg, '?').split(':')[-1]}), P = {P}")
        return {name: ax.plot(xs, model_mibs(alg, P, xs, pp, g, name), color=c, ls=ls)[0]
                for name, (c, ls, _) in VARIANT_STYLE.items() if name != "REAL"}

    spec = facets.Spec(
        x="size", y="throughput", series="variant", rows="procs", cols="alg", ci="none",
        look=lambda v: facets.Look(VARIANT_STYLE[v][0], VARIANT_STYLE[v][2]), after=model,
        ylabel="MiB/s (size / time)", panel_size=(3.6, 2.6),
        title="Castelló et al., Fig. 3: theory (THEO), overlapped (OVL: L + max(B, A)), not "
              f"overlapped (NOVL: 2L + 2B + A)\nand measured (REAL), {style.library_title(lib)}, "
              f"parameters: ping-pong {src}")
    return facets.figure(spec, d.assign(variant="REAL"), path,
                         empty="no measured native allreduce of RSA or RNG")


LEVEL_STYLE = {lv: (style.SERIES_COLORS[lv], mk) for lv, mk in (("socket", "o"), ("node", "s"),
                                                                 ("network", "^"))}


def fig5(df: pd.DataFrame, doc: dict, path, ppns=(1, 2, 4, 8, 16)) -> list[Path]:
    """Bienz et al., Fig. 5: modelled cost of one message vs size per level, with the measured
    ping-pong points (one pair per level; k pairs at the network level as ppn = k)."""
    if "maxrate" not in doc:
        return style.placeholder(path, "Bienz et al., Fig. 5",
                                 "no max-rate parameters: the campaign has no ping-pong cells")
    f5 = fig5_lines(df, doc, ppns)
    mr, lib, pp, xs, net = f5["params"], f5["library"], f5["points"], f5["sizes"], f5["net_fitted"]
    style.setup()
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.subplots()
    for lv, ys in f5["levels"].items():
        ax.plot(xs, ys, color=LEVEL_STYLE[lv][0], label=f"{lv.capitalize()} (model)")
    reds = ["#fcbba1", "#fc9272", "#fb6a4a", "#de2d26", "#a50f15", "#67000d"]
    for i, (k, ys) in enumerate(f5["network"].items()):
        ax.plot(xs, ys, color=reds[min(i + 1, len(reds) - 1)], ls="-" if net else "--",
                label=f"Network, ppn {k} (model{'' if net else ': from ' + f5['net_from']})")
    for lv in LEVELS_ORDER:
        d = pp[(pp["level"] == lv) & (pp["pairs"] == 1)]
        if len(d):
            c, mk = LEVEL_STYLE[lv]
            ax.plot(d["size"], d["mean"], ls="none", marker=mk, mfc="none", color=c,
                    label=f"{lv.capitalize()} ping-pong, 1 pair")
        dk = pp[(pp["level"] == lv) & (pp["pairs"] > 1)]
        for k, g in dk.groupby("pairs"):
            ax.plot(g["size"], g["mean"], ls="none", marker="x", ms=4,
                    color=LEVEL_STYLE[lv][0], alpha=0.5 + 0.5 * min(k, 8) / 8,
                    label=f"{lv.capitalize()} ping-pong, {k} pairs")
    facets.size_axis(ax, [], limits=(f5["lo"] / 2**0.3, f5["hi"] * 2**0.3))
    ax.set_yscale("log")
    ax.set_ylabel("time of one message (s)")
    ax.legend(loc="upper left", fontsize=6.5, ncol=2)
    fig.suptitle(f"Bienz et al., Fig. 5: max-rate cost of one message ({style.library_title(lib or '')})\n"
                 + ", ".join(f"{k}={getattr(mr, k):.3g}" for k in ("alpha_l", "beta_l", "alpha",
                                                                    "R_b", "R_N")),
                 fontsize=8.5)
    return style.save(fig, path)


LEVELS_ORDER = ("socket", "node", "network")


# --------------------------------------------------------------------------- all


def make(inputs) -> list[Path]:
    """The tables and figures; without ``inputs.params`` the parameters are fitted to the
    store's summary (``harness fit``'s document)."""
    df = inputs.summary
    doc = inputs.params or params_doc(inputs.store / "summary.csv", None)
    meas = measured(df)
    tables_dir, figures_dir = inputs.tables, inputs.figures
    written: list[Path] = []
    t = model_table(meas if "pingpong" in doc else meas.iloc[0:0], doc)
    written += write_model_table(t, Path(tables_dir) / "castello_models", doc)
    written += write_params_table(params_table(doc), Path(tables_dir) / "network_params")
    written += fig1(doc, Path(figures_dir) / "castello_fig1")
    if "pingpong" in doc:
        written += fig2(meas, doc, Path(figures_dir) / "castello_fig2")
        written += fig3(meas, doc, Path(figures_dir) / "castello_fig3")
    else:
        for name in ("castello_fig2", "castello_fig3"):
            written += style.placeholder(Path(figures_dir) / name, f"Castelló et al., {name[-4:]}",
                                         "no ping-pong parameters: the campaign has no pingpong cells")
    written += fig5(df, doc, Path(figures_dir) / "maxrate_fig5")
    return written
