"""RD vs SMP vs NAP (Bienz et al., Figs. 12-15) and the message-count table, from
``summary.csv`` alone.

The rows (which cells, one library, one dtype/op/delay): ``harness/analysis/node_aware.py``.

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
  Fig. 1, each library's AUTO reducing one double (8 B) against P (``fig1_table``).

Beside RD/SMP/NAP the figures and the time table show the libraries' own allreduce when the
summary has it (``load_native``): MPICH's forced SMP (``native:smp``, "MPI" of Figs. 16-17)
and every library's AUTO. Those run on the REAL node layout (one node on one machine), so on
emulated nodes they are drawn hollow and dashed with a note and never turned into a speedup;
with ``layout: real`` on the same nodes the table and the speedup panel add NAP over MPICH's
SMP.

Returns the written paths. CLI: ``python -m harness.report node_aware --store results/<c>``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from ..analysis.node_aware import (
    ALGORITHMS,
    NATIVE_SERIES,
    counts_table,
    fig1_table,
    figure_column,
    load,
    load_native,
    native_series,
    speedups,
    times_table,
)
from ..analysis.netparams import maxrate_params
from ..analysis.projection import NA_SUMMARY, node_aware_map
from ..analysis.vocabulary import is_timed, oversubscribed_mask, timed_mask
from ..libraries import split_name
from ..models import maxrate
from ..units import format_number

_int = functools.partial(format_number, spec=".0f")  # a count, a P, a ppn
from . import facets, style, tables

# NAP's speedup lines: over whom, drawn in that one's look
SPEEDUPS = {"NAP vs RD": "recursive_doubling", "NAP vs SMP": "smp",
            "NAP vs MPICH SMP (native)": "native:smp@mpich"}


def library_name(lib: str, version=None) -> str:
    """A library as the tables and figures name it: a measured one by its title, a simulated
    installation (``<family>@<platform>``) as ``style.library_label`` gives it,
    ``mpich@<platform> (simulated MPICH 3.3b)``."""
    if split_name(lib)[1]:
        return style.library_label(lib, version)
    return style.library_title(lib)


def native_label(series: str) -> str:
    """``MPICH SMP (native)`` for ``native:smp@mpich``; ``AUTO Open MPI`` for AUTO."""
    alg, lib = series.split("@", 1)
    if alg == "native:auto":
        return f"AUTO {library_name(lib)}"
    return f"{library_name(lib)} {style.short(alg)} (native)"


def _look(series: str) -> facets.Look:
    """RD, SMP and NAP in their colours; the libraries' own MPI_Allreduce beside them (series
    ``<algorithm>@<library>``: MPICH's forced SMP, each library's AUTO, Bienz et al., Figs.
    16-17) ran on the REAL node layout, never on the emulated one: hollow and dashed, MPICH's
    SMP in native:smp's colour, each AUTO in its library's."""
    if "@" not in series:
        return facets.algorithm_look(series)
    alg, lib = series.split("@", 1)
    if alg == "native:auto":
        return facets.Look(style.library_color(lib), style.library_marker(lib), ":", hollow=True)
    return facets.Look(style.color(alg), style.marker(alg), "--", hollow=True)


def _label(series: str) -> str:
    return style.NODE_AWARE.get(series) or native_label(series)


def _order(names) -> list[str]:
    known = [*ALGORITHMS, *NATIVE_SERIES]
    return [n for n in known if n in names] + sorted(set(names) - set(known))


def _speedup_look(name: str) -> facets.Look:
    ref = SPEEDUPS[name]
    return dataclasses.replace(_look(ref), ls={"recursive_doubling": "-", "smp": "--"}.get(ref, ":"))


def _real_note(nat: pd.DataFrame) -> str:
    n = sorted({int(v) for v in nat["n_nodes"].dropna()}) if len(nat) else []
    nodes = ", ".join(map(str, n)) or "1"
    here = "all ranks on this one host" if n == [1] else "the run's Slurm nodes"
    return (f"native = the library's MPI_Allreduce on the real layout ({nodes} node"
            f"{'s' if n != [1] else ''}: {here}); RD/SMP/NAP on emulated nodes of ppn ranks "
            f"— not comparable (use layout: real on a multi-node Slurm)")


# ------------------------------------------------------------------------------------ tables

# the first column left, the others right; Markdown cells as they are
LAYOUT = tables.Layout(placement="t", align="lr", bold_header=True, bold_caption=True,
                       escape=False)


def write_counts(table: pd.DataFrame, base: Path) -> list[Path]:
    header = ["ppn", "nodes n", "P", "size", "algorithm", "inter msgs", "intra msgs",
              "inter bytes", "intra bytes", "inter msgs (all ranks)", "⌈log_ppn n⌉", "⌈log2 n⌉"]
    rows = [[_int(r.ppn), _int(r.n_nodes), _int(r.procs), tables.format_size(r.size),
             style.NODE_AWARE[r.algorithm], _int(r.inter_msgs), _int(r.intra_msgs), _int(r.inter_bytes),
             _int(r.intra_bytes), _int(r.inter_msgs_total), _int(r.log_ppn_n), _int(r.log2_n)]
            for r in table.itertuples(index=False)]
    caption = ("Point-to-point messages per allreduce call: the most any one rank sends to "
               "other nodes (inter) and inside its node (intra), counted on an extra untimed "
               "call; NAP's inter-node count against ⌈log_ppn n⌉, RD's against ⌈log2 n⌉.")
    return tables.write_table(table, base, caption, header=header, rows=rows, layout=LAYOUT)


def write_times(table: pd.DataFrame, base: Path, library: str | None = None) -> list[Path]:
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
    if library:
        caption += f" Library: {library}."
    if nats:
        caption += (" Native columns: the library's own MPI_Allreduce (MPICH's SMP forced, each "
                    "library's AUTO) on the real node layout ('native nodes'); where RD/SMP/NAP "
                    "ran on emulated nodes the two are not comparable and no speedup over "
                    "MPICH's SMP is given (Bienz et al., Figs. 16-17 compare them on real nodes).")
    return tables.write_table(table, base, caption, header=header, rows=rows, layout=LAYOUT)


# ----------------------------------------------------------------------------------- figures

def _figure(d: pd.DataFrame, x: str, path, title: str,
            nat: pd.DataFrame | None = None) -> list[Path]:
    """Columns per ppn: time vs ``x`` (top) and NAP's speedups (bottom); the native rows
    ``nat`` (``load_native``) hollow and dashed beside them, with a note when they ran on
    another layout than RD/SMP/NAP."""
    t = d[timed_mask(d)]
    t = t.assign(series=t["algorithm"])
    tn = nat[timed_mask(nat)] if nat is not None and len(nat) else pd.DataFrame(columns=["series"])
    top = facets.Spec(x=x, series="series", cols="ppn", look=_look, label=_label, order=_order,
                      ylabel="time per allreduce", title=title, panel_size=(3.4, 2.4))
    low = facets.Spec(x=x, series="series", y="speedup", ci="none", ylog=False, reference=1.0,
                      look=_speedup_look, order=lambda s: [k for k in SPEEDUPS if k in s])
    fig, axes, _, ppns = facets.layout(top, t, extra_rows=1, sharex="col")
    factor, unit = facets.time_unit(pd.concat([t["mean"], tn.get("mean", t["mean"])]))
    handles: dict[str, object] = {}
    notes = set()
    for j, ppn in enumerate(ppns):
        g, n, lay, at = figure_column(t, tn, ppn, x)
        sub = (f"ppn = {int(ppn)}, " + (f"{tables.format_size(at)} per process" if x == "procs"
                                        else f"P = {int(at)}")) if ppn else ""
        if lay and lay != "real" and ppn is not None:
            sub += f" ({lay})"
        handles.update(facets.panel(axes[0, j], top, pd.concat([g, n]), factor))
        if facets.panel(axes[1, j], low, speedups(g, n, x, lay)):
            axes[1, j].legend(loc="best")
        if len(n) and lay != "real":
            notes.add(_real_note(n))
        axes[0, j].set_title(sub)
        axes[0, j].set_xlabel("")
    axes[0, 0].set_ylabel(facets.y_label(top, unit))
    axes[1, 0].set_ylabel("speedup of NAP")
    return facets.finish(fig, dataclasses.replace(top, notes=tuple(sorted(notes))), handles, path,
                         ncols=len(ppns))


def model_figure(path, params=None, ppn: int = 16, procs: int = 32768) -> list[Path]:
    """The max-rate model's RD, SMP and NAP (``harness.models.maxrate``, eqs. 4-6) in the shape of
    the paper's Figs. 10-11: cost vs P for one double per process (P = ppn, 2 ppn, ... up to
    ``procs``) and cost vs size at ``procs``, ``ppn`` processes per node; default parameters
    unless ``params`` (a ``MaxRateParams``) is given."""

    style.setup()
    p = params or maxrate.MaxRateParams.defaults()
    fig = Figure(figsize=(7.0, 3.4), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    nodes = [2 ** k for k in range(0, int(math.log2(procs // ppn)) + 1)]
    sizes = [8 * 2 ** k for k in range(0, 18)]
    spec = facets.Spec(x="procs", series="algorithm", ci="none", ylog=False, label=style.NODE_AWARE.get,
                       order=lambda a: [x for x in ALGORITHMS if x in a], ylabel="modelled time")
    line = node_aware_map(p, ppn, [n * ppn for n in nodes], [8])
    facets.curves(ax1, spec, [n * ppn for n in nodes], {a: line[m][0] for a, m in NA_SUMMARY.items()},
                  f"one double per process, ppn = {ppn}")
    col = node_aware_map(p, ppn, [procs // ppn * ppn], sizes)
    facets.curves(ax2, dataclasses.replace(spec, x="size", ylog=True), sizes,
                  {a: col[m][:, 0] for a, m in NA_SUMMARY.items()}, f"P = {procs}, ppn = {ppn}")
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
        rows.append([library_name(r["library"]), _int(r["nodes"]), _int(r["procs"]),
                     mean + (" ‡" if r["oversubscribed"] else ""), ci, _int(r["n"]),
                     str(r["status"])])
    caption = ("Bienz et al., Fig. 1: time of one MPI_Allreduce of a single double (8 B, sum) "
               "with each library's own choice (AUTO) against P. ‡ oversubscribed (more ranks "
               "than cores): measured, but no claim is drawn from it.")
    return tables.write_table(table, base, caption, header=header, rows=rows, layout=LAYOUT)


def fig1_figure(table: pd.DataFrame, path) -> list[Path]:
    """Time vs P, one line per library (and node count), the 95% CI shaded as the paper
    shades its five runs; oversubscribed points hollow."""
    t = table[timed_mask(table)] if len(table) else table
    # one line per library across P (P = 16 on one node, then 32 on two, ...); per node count
    # too only when some P was measured on several node counts
    multi = len(t) and t.duplicated(["library", "procs"]).any()
    t = t.assign(line=[f"{lib}#{int(n)}" if multi else lib for lib, n in zip(t["library"], t["nodes"])])
    spec = facets.Spec(
        x="procs", series="line", ci="band", ylabel="time per allreduce", panel_size=(5.2, 3.2),
        look=_fig1_look, label=_fig1_label, after=_crowded_span,
        order=lambda names: sorted(names, key=lambda s: (style.library_sort_key(s.split("#")[0]),
                                                         _nodes(s))),
        title="MPI_Allreduce of one double against P (Bienz et al., Fig. 1)",
        notes=("AUTO (the library's choice)",))
    return facets.figure(spec, t, path, empty="no native:auto cells of 8 B (float64, sum) in "
                         "this campaign: add the node-aware-fig1 experiment")


def _nodes(line: str) -> int:
    """The node count of a Fig. 1 line ``<library>#<nodes>`` (0: the library's one line; a
    simulated library's name holds an ``@``)."""
    return int(line.split("#")[1]) if "#" in line else 0


def _fig1_look(line: str) -> facets.Look:
    """The library's look; a line per node count dashed and dotted beyond one node."""
    ls = ("-", "--", ":", "-.")[int(math.log2(max(_nodes(line), 1))) % 4]
    return dataclasses.replace(facets.library_look(line.split("#")[0]), ls=ls)


def _fig1_label(line: str) -> str:
    n = _nodes(line)
    return library_name(line.split("#")[0]) + (f", {n} node{'s' if n > 1 else ''}"
                                                      if n else "")


def _crowded_span(ax, key, t: pd.DataFrame, factor: float) -> None:
    """The P from which some line had more ranks than cores, shaded."""
    crowded = t[oversubscribed_mask(t)]
    if len(crowded):
        first, last = crowded["procs"].min(), t["procs"].max()
        ax.axvspan(first / 2**0.25, last * 2**0.25, color="#f2f2f2", zorder=0, lw=0)
        ax.text(0.99, 0.02, f"P ≥ {int(first)}: more ranks than cores (hollow): no claim",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5, color="0.3")


def make(inputs) -> list[Path]:
    """Every node-aware table and figure; the model figure with the max-rate parameters of
    ``inputs.params`` when it has them."""
    summary, tables_dir, figures_dir = inputs.summary, inputs.tables, inputs.figures
    d = load(summary)
    nat = load_native(summary, like=d)
    written: list[Path] = []
    written += write_counts(counts_table(d), Path(tables_dir) / "node_aware_counts")
    version = d["library_version"].iloc[0] if len(d) and "library_version" in d else None
    lib = library_name(d["library"].iloc[0], version) if len(d) else "no data"
    written += write_times(times_table(d, nat), Path(tables_dir) / "node_aware_times",
                           library=lib if len(d) else None)
    layout = ", ".join(sorted(str(v) for v in d["layout"].dropna().unique())) if len(d) else ""
    beside = " (+ native)" if len(nat) else ""
    written += _figure(d, "procs", Path(figures_dir) / "node_aware_vs_procs",
                       f"RD vs SMP vs NAP{beside}, one value per process ({lib}, {layout} nodes)",
                       nat)
    written += _figure(d, "size", Path(figures_dir) / "node_aware_vs_size",
                       f"RD vs SMP vs NAP{beside} vs message size ({lib}, {layout} nodes)", nat)
    fig1 = fig1_table(summary)
    written += write_fig1_table(fig1, Path(tables_dir) / "node_aware_fig1")
    written += fig1_figure(fig1, Path(figures_dir) / "node_aware_fig1")
    fitted = maxrate_params(inputs.params) if inputs.params else None
    return written + model_figure(figures_dir / "node_aware_model", params=fitted)
