"""Training-iteration workloads (Castelló et al. 2021, Sect. 5, Figs. 9-10) from summary.csv.

A workload row (``harness.dnn.workload``) times one training iteration's gradient
communication: every allreduce call of the model's fused trace, back to back. Per library,
P and workload (model, fusion policy, precision) the table gives AUTO, BEST (the native
algorithm with the lowest iteration time, AUTO included) and the gain, and projects
images per second for the workload's batch per rank::

    images/s = batch * P / (compute + communication)       no overlap
    images/s = batch * P / max(compute, communication)     full overlap (an upper bound)

``compute`` is the ``workload.compute`` of the config (0: communication only, and the two
projections agree). Outputs:

- ``tables/workload.{md,tex,csv}``: AUTO vs BEST per library (Fig. 9's data);
- ``tables/workload_normalised.{md,tex,csv}``: every library's AUTO and BEST images/s
  divided by the reference library's AUTO (Fig. 10, right);
- ``figures/<c>/workload_fig9.{png,pdf}``: AUTO vs BEST images/s per library (Fig. 9);
- ``figures/<c>/workload_fig10.{png,pdf}``: BEST over the library's own AUTO (Fig. 10,
  left) and every library over the reference AUTO (Fig. 10, right).

A gain is called only when the two 95 % CIs do not overlap; oversubscribed rows carry no
claim.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..dnn import workload
from ..results.store import row_json
from . import style, tables
from .dnn_traces import make_fig7

REFERENCE = "impi"  # Fig. 10 normalises to Intel MPI's AUTO
KEYS = ["library", "library_version", "procs", "nodes", "dtype", "model", "fusion",
        "precision", "batch", "iteration_compute"]
TABLES = ("workload", "workload_normalised")
FIGURES = ("workload_fig9", "workload_fig10")


def rows(df: pd.DataFrame) -> pd.DataFrame:
    """The summary's workload rows, with the workload's parameters as columns."""
    d = tables.prepare(df, workloads=True)
    d = d[workload.rows(d)].copy()
    params = d["params"].map(row_json)
    for k in (workload.KEY, *workload.DEFAULTS):
        d[k if k != workload.KEY else "model"] = params.map(
            lambda p, k=k: p.get(k, workload.DEFAULTS.get(k)))
    return d.reset_index(drop=True)


def _images(batch, procs, compute, t, overlap: bool) -> float:
    if not (math.isfinite(t) and t > 0):
        return math.nan
    return batch * procs / (max(compute, t) if overlap else compute + t)


def table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per library x P x workload: AUTO, BEST, gain and the projected images/s."""
    d = rows(df)
    out = []
    if d.empty:
        return pd.DataFrame(columns=KEYS)
    timed = tables.timed_mask(d)
    for key, g in d.groupby(KEYS, sort=True, dropna=False):
        r = dict(zip(KEYS, key))
        native = g[g.algorithm.str.startswith("native:") & timed.loc[g.index]]
        auto = native[native.algorithm == tables.AUTO]
        a = auto.iloc[0] if len(auto) else None
        b = native.loc[native["mean"].idxmin()] if len(native) else None
        r.update(calls=int(row_json(g.iloc[0].get("record")).get("calls", 0)),
                 size=int(g.iloc[0]["size"]),
                 auto_status=a["status"] if a is not None else
                 (g[g.algorithm == tables.AUTO].status.iloc[0]
                  if (g.algorithm == tables.AUTO).any() else "missing"),
                 best_algorithm=b["algorithm"] if b is not None else "",
                 best_status=b["status"] if b is not None else "")
        for who, row in (("auto", a), ("best", b)):
            for c in ("mean", "ci_low", "ci_high"):
                r[f"{who}_{c}"] = tables.row_number(row, c)
        r["gain"] = r["auto_mean"] / r["best_mean"] if r["best_mean"] else math.nan
        r["significant"] = bool(a is not None and b is not None and b["algorithm"] != tables.AUTO
                                and r["best_ci_high"] < r["auto_ci_low"])
        over = any(tables.is_oversubscribed(x) for x in (a, b))
        r["oversubscribed"] = over
        r["verdict"] = ("oversubscribed" if over else "AUTO is BEST" if
                        r["best_algorithm"] == tables.AUTO else "BEST faster" if r["significant"]
                        else "tie" if b is not None and a is not None else "no data")
        for who in ("auto", "best"):
            for overlap, name in ((False, "images"), (True, "images_overlap")):
                r[f"{who}_{name}"] = _images(r["batch"], r["procs"], r["iteration_compute"],
                                             r[f"{who}_mean"], overlap)
        r["n_algorithms"] = int(g.algorithm.str.startswith("native:").sum())
        out.append(r)
    return pd.DataFrame(out)


def normalised(t: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Fig. 10 (right): each library's AUTO and BEST images/s over the reference library's
    AUTO in the same P and workload; the reference is Intel MPI if measured, else the first
    library."""
    if t.empty:
        return pd.DataFrame()
    libs = sorted(t.library.unique(), key=style.library_sort_key)
    ref = reference if reference in libs else libs[0]
    keys = [k for k in KEYS if k not in ("library", "library_version")]
    out = []
    for key, g in t.groupby(keys, sort=True, dropna=False):
        base = g[g.library == ref]
        if base.empty:
            continue
        b = float(base.iloc[0]["auto_images"])
        for r in g.itertuples(index=False):
            out.append({**dict(zip(keys, key)), "reference": ref, "library": r.library,
                        "auto": r.auto_images / b if b else math.nan,
                        "best": r.best_images / b if b else math.nan,
                        "best_algorithm": r.best_algorithm})
    return pd.DataFrame(out)


def _label(r) -> str:
    return f"{r['model']} {r['fusion']} {r['precision']}"


def _time(v: float) -> str:
    return tables.format_time(v)[0] if math.isfinite(v) else ""


CAPTION = ("One training iteration's gradient communication (every allreduce call of the "
           "model's fused gradient trace, back to back), AUTO vs BEST per library. Times are "
           "means with their 95% CI; Gain = AUTO / BEST, bold when the CIs do not overlap. "
           "images/s = batch x P / (compute + communication); 'overlap' uses max(compute, "
           "communication), an upper bound. † not converged. ‡ oversubscribed: no claim.")


def _display(t: pd.DataFrame) -> tuple[list[str], list[list]]:
    header = ["Library", "P", "Workload", "Calls", "Per iteration", "AUTO", "95% CI", "BEST",
              "BEST time", "95% CI", "Gain", "img/s AUTO", "img/s BEST", "img/s BEST (overlap)"]
    out = []
    for r in t.to_dict("records"):
        dag = lambda s: " †" if s == "not-converged" else ""  # noqa: E731
        _, aci = tables.format_time(r["auto_mean"], r["auto_ci_low"], r["auto_ci_high"])
        _, bci = tables.format_time(r["best_mean"], r["best_ci_low"], r["best_ci_high"])
        g = r["gain"]
        gain = (f"{g:.2f}×" if math.isfinite(g) else "n/a") + (" (tie)" if r["verdict"] == "tie"
                                                               else "")
        if r["significant"]:
            gain = f"**{gain}**"
        if r["oversubscribed"]:
            gain += " ‡"
        gain = {"text": gain, "tex": gain.replace("**", "")}  # LaTeX: not bold
        out.append([
            style.library_label(r["library"], r["library_version"]), str(int(r["procs"])),
            _label(r) + f" b={int(r['batch'])}", str(r["calls"]), f"{r['size'] / 2**20:.1f} MiB",
            (_time(r["auto_mean"]) or r["auto_status"]) + dag(r["auto_status"]), aci,
            tables.algorithm_label(r["best_algorithm"]) if r["best_algorithm"] else "none",
            _time(r["best_mean"]) + dag(r["best_status"]), bci, gain,
            f"{r['auto_images']:.1f}" if math.isfinite(r["auto_images"]) else "",
            f"{r['best_images']:.1f}" if math.isfinite(r["best_images"]) else "",
            f"{r['best_images_overlap']:.1f}" if math.isfinite(r["best_images_overlap"]) else "",
        ])
    return header, out


def grouped_bars(ax, groups: list[str], series: list[tuple[str, list, list, str, str]]) -> None:
    """Grouped bars: ``series`` of (label, values, (low, high) errors, colour, hatch)."""
    x = np.arange(len(groups))
    width = 0.8 / max(1, len(series))
    for i, (label, vals, err, colour, hatch) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width, yerr=err, label=label,
               color=colour, hatch=hatch, edgecolor="white" if not hatch else "0.2",
               linewidth=0.5, error_kw={"elinewidth": 0.7, "ecolor": "0.25"})
    ax.set_xticks(x, groups, rotation=20, ha="right")


LIB_COLOURS = {"mpich": "#1f77b4", "openmpi": "#d62728", "impi": "#2ca02c"}


def _err(t: pd.DataFrame, who: str) -> np.ndarray:
    """Images/s error bars from the time CI (a shorter time is more images)."""
    mid = t[f"{who}_images"].to_numpy(float)
    lo = np.array([_images(r["batch"], r["procs"], r["iteration_compute"], r[f"{who}_ci_high"],
                           False) for r in t.to_dict("records")])
    hi = np.array([_images(r["batch"], r["procs"], r["iteration_compute"], r[f"{who}_ci_low"],
                           False) for r in t.to_dict("records")])
    return np.nan_to_num(np.vstack([mid - lo, hi - mid]), nan=0.0).clip(min=0)


def figure_images(t: pd.DataFrame, base: Path) -> list[Path]:
    """Fig. 9: images/s of AUTO and BEST, a panel per P, the libraries side by side."""
    from matplotlib.figure import Figure

    title = "Training iteration: images/s with AUTO and BEST (Castelló et al., Fig. 9 style)"
    if t.empty:
        return style.placeholder(base, title, "no workload cells with a time")
    style.setup()
    procs = sorted(t.procs.unique())
    fig = Figure(figsize=(3.2 + 1.1 * t.groupby(["model", "fusion", "precision"]).ngroups,
                          2.9 * len(procs)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(procs), 1, squeeze=False)[:, 0])
    for ax, p in zip(axes, procs):
        d = t[t.procs == p]
        groups = sorted({_label(r) for r in d.to_dict("records")})
        series = []
        for lib in sorted(d.library.unique(), key=style.library_sort_key):
            x = d[d.library == lib].assign(g=lambda q: [_label(r) for r in q.to_dict("records")])
            x = x.set_index("g").reindex(groups)
            for who, hatch in (("auto", "//"), ("best", "")):
                err = _err(x.reset_index(), who) if len(x) else None
                series.append((f"{style.library_title(lib)} {who.upper()}",
                               x[f"{who}_images"].to_numpy(float), err,
                               LIB_COLOURS.get(lib, style.color(lib)), hatch))
        grouped_bars(ax, groups, series)
        compute = sorted(d.iteration_compute.unique())
        ax.set_ylabel("images/s (projected)")
        ax.set_title(f"P = {p}, batch {', '.join(str(int(b)) for b in sorted(d.batch.unique()))}"
                     f" per rank, compute {', '.join(_time(c) or '0' for c in compute)}"
                     + (" (communication only)" if compute == [0.0] else ""))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.suptitle(title)
    return style.save(fig, base)


def figure_normalised(t: pd.DataFrame, n: pd.DataFrame, base: Path) -> list[Path]:
    """Fig. 10: left, BEST over the library's own AUTO; right, AUTO and BEST of every
    library over the reference library's AUTO."""
    from matplotlib.figure import Figure

    title = "Training iteration, normalised (Castelló et al., Fig. 10 style)"
    if t.empty or n.empty:
        return style.placeholder(base, title, "no workload cells with a time")
    style.setup()
    procs = sorted(t.procs.unique())
    ngroups = t.groupby(["model", "fusion", "precision"]).ngroups
    fig = Figure(figsize=(2 * (2.4 + 0.9 * ngroups), 2.9 * len(procs)), layout="constrained")
    axes = fig.subplots(len(procs), 2, squeeze=False)
    ref = n.reference.iloc[0]
    for (left, right), p in zip(axes, procs):
        d = t[t.procs == p].assign(g=lambda q: [_label(r) for r in q.to_dict("records")])
        groups = sorted(d.g.unique())
        series = []
        for lib in sorted(d.library.unique(), key=style.library_sort_key):
            x = d[d.library == lib].set_index("g").reindex(groups)
            series.append((style.library_title(lib), (x.best_images / x.auto_images).to_numpy(float),
                           None, LIB_COLOURS.get(lib, style.color(lib)), ""))
        grouped_bars(left, groups, series)
        left.axhline(1.0, color="0.3", linewidth=0.8)
        left.set_ylabel("BEST / own AUTO (images/s)")
        left.set_title(f"P = {p}: BEST over the library's AUTO")
        left.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        q = n[n.procs == p].assign(g=lambda q: [_label(r) for r in q.to_dict("records")])
        series = []
        for lib in sorted(q.library.unique(), key=style.library_sort_key):
            x = q[q.library == lib].set_index("g").reindex(groups)
            for who, hatch in (("auto", "//"), ("best", "")):
                series.append((f"{style.library_title(lib)} {who.upper()}",
                               x[who].to_numpy(float), None,
                               LIB_COLOURS.get(lib, style.color(lib)), hatch))
        grouped_bars(right, groups, series)
        right.axhline(1.0, color="0.3", linewidth=0.8)
        right.set_ylabel(f"over {style.library_title(ref)} AUTO")
        right.set_title(f"P = {p}: over {style.library_title(ref)} AUTO")
        right.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.suptitle(title)
    return style.save(fig, base)


def make_all(summary_csv, tables_dir, figures_dir, models=None) -> list[Path]:
    """Every workload table and figure of a campaign (files exist even with no data); with
    ``models`` (the workloads' model names) also Fig. 7 of their gradients (``dnn_traces``)."""
    df = pd.read_csv(summary_csv)
    t = table(df)
    n = normalised(t)
    tdir, fdir = Path(tables_dir), Path(figures_dir)
    header, body = _display(t)
    written = tables.write_table(t, tdir / "workload", CAPTION, header=header, rows=body)
    nh = ["P", "Workload", "Library", "AUTO / ref AUTO", "BEST / ref AUTO", "BEST"]
    nb = [[str(int(r["procs"])), _label(r), style.library_title(r["library"]),
           f"{r['auto']:.3f}", f"{r['best']:.3f}", tables.algorithm_label(r["best_algorithm"])
           if r["best_algorithm"] else "none"] for r in n.to_dict("records")]
    ref = n.reference.iloc[0] if len(n) else REFERENCE
    written += tables.write_table(n, tdir / "workload_normalised",
                                  f"Projected images/s of each library's AUTO and BEST over "
                                  f"{style.library_title(ref)}'s AUTO (Castelló et al., Fig. 10 "
                                  f"right).", header=nh, rows=nb)
    written += figure_images(t, fdir / "workload_fig9")
    written += figure_normalised(t, n, fdir / "workload_fig10")
    if models is not None:
        written += make_fig7(models, tdir, fdir)
    return written
