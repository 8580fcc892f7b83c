"""SUARA tables and figures (Nuriyev et al. 2023), from ``summary.csv`` alone.

``make(inputs)`` writes:

- ``figures/suara_speedup.{png,pdf}`` (Fig. 8 style): measured speedup of SUARA2 (``grid``
  auto or best-grid) over the library's native allreduce, AUTO (solid) and BEST native algorithm
  (dashed), against P, one colour per message size; a sqrt(P) trend through the first point
  (grey) and the model's predicted speedup over the best single algorithm (dotted);
- ``figures/suara_grid.{png,pdf}`` (Fig. 7 style): measured time against P_c for each P and
  (row, column) combination swept over every grid (``grid`` set per cell), 95% CI bars, the
  model's predicted time on a second axis, sqrt(P) marked;
- ``figures/suara_agreement.{png,pdf}`` and ``tables/suara_agreement.*``: per (P, m) whose
  grid sweep was run, whether the model's pick among the configurations that were run equals
  the measured best (the paper reports 100 %);
- ``tables/suara_choice.*``: per library, P and size: the grid and combination SUARA2 chose
  (from the cell's record), predicted and measured time, native AUTO and BEST, speedups;
- ``tables/model_vs_measured.*``: each classic algorithm's measured mean against the model;
- ``tables/fitted_params.*``: (alpha, beta) per algorithm fitted to this summary (Open MPI
  native cells, ``harness.analysis.fit.fit_campaign``), gamma measured here; ``paper`` values when
  nothing could be fitted.

The model uses the fitted parameters where there are some, else the paper's Table 4; the
captions say which. The rows, the fit and AUTO and BEST beside SUARA2:
``harness/analysis/suara.py``. Every table comes as ``.md``, ``.tex`` (booktabs) and ``.csv``.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import models
from ..analysis.suara import TO_MODEL, agreement_models, fitted_params  # noqa: F401
from ..analysis.suara import agreement as _agreement
from ..analysis.suara import choices as _choices
from ..analysis.suara import has_ci as _has_ci
from ..analysis.suara import load as _load
from ..analysis.suara import model_name as _model_name
from ..analysis.suara import modelled as _modelled
from ..analysis.suara import grid_sweeps, speedups
from ..analysis.vocabulary import is_oversubscribed as _crowded
from . import facets, style, tables

# Markdown cells as they are, a dash row when there are none
LAYOUT = tables.Layout(placement="t", align="l", bold_header=True, bold_caption=True,
                       escape=False, placeholder="–")


def _lib(r) -> str:
    """A row's library as the tables print it: a simulated installation as
    ``openmpi@<platform> (simulated Open MPI 4.1.2)``, a measured one as its name."""
    lib = str(r["library"])
    if "@" not in lib:
        return lib
    return style.library_label(lib, r.get("library_version") if hasattr(r, "get") else None)


def _titles(d: pd.DataFrame) -> dict:
    """Panel titles per library: a simulated installation labelled as such (``_lib``)."""
    if "library_version" not in d.columns:
        return {}
    return {lib: _lib({"library": lib, "library_version": v})
            for lib, v in d.groupby("library")["library_version"].first().items()}


def _t(seconds) -> str:
    return tables.format_time(float(seconds))[0] or "–"


def _speedup(r, ref: str) -> str:
    """SUARA2's speedup over a native reference with its verdict: ≈ when the two 95% CIs
    overlap (a tie), ‡ when the launch was oversubscribed (no win or loss drawn)."""
    t = r[ref]
    if not np.isfinite(t):
        return "–"
    text = f"{t / r['mean']:.2f}"
    if _crowded(r):
        return text + " ‡"
    if r["ci_high"] >= r[f"{ref}_lo"] and r["ci_low"] <= r[f"{ref}_hi"]:
        return text + " ≈"
    return text


def choice_table(d: pd.DataFrame, params: models.Params) -> pd.DataFrame:
    rows = []
    for _, r in _choices(d, params).iterrows():
        rec = r["r"]
        pr, pc = rec.get("P_r"), rec.get("P_c")
        rows.append({
            "library": _lib(r), "P": int(r["procs"]), "size": tables.format_size(r["size"]),
            "grid": f"{pr} x {pc}" if pr else "–",
            "combination": f"({rec.get('row', '?')}, {rec.get('col', '?')})",
            "model": {None: "grid wins", "single": "single predicted faster",
                      "no-grid": "no grid (prime P)",
                      "small": f"<= {rec.get('small_max')}: best native"}.get(rec.get("fallback"), "–")
            if "fallback" in rec else "–",
            "predicted": _t(r["predicted"]), "measured": _t(r["mean"]),
            "native AUTO": _t(r["auto"]), "BEST native": f"{_t(r['best'])} {style.short(str(r['best_algorithm']))}"
            if isinstance(r["best_algorithm"], str) else "–",
            "speedup vs AUTO": _speedup(r, "auto"),
            "speedup vs BEST": _speedup(r, "best"),
            "3-step": f"{_t(r['three'])} ({r['three_grid']})" if np.isfinite(r["three"]) else "–",
            "speedup vs 3-step": _speedup(r, "three"),
        })
    return pd.DataFrame(rows, columns=["library", "P", "size", "grid", "combination", "model", "predicted",
                                       "measured", "native AUTO", "BEST native", "speedup vs AUTO",
                                       "speedup vs BEST", "3-step", "speedup vs 3-step"])


def model_table(d: pd.DataFrame, params: models.Params) -> pd.DataFrame:
    rows = [{"library": _lib(r), "algorithm": r["algorithm"], "model": r["model"],
             "P": int(r["procs"]), "size": tables.format_size(r["size"]),
             "measured": _t(r["mean"]), "model time": _t(r["predicted"]),
             "measured / model": f"{r['mean'] / r['predicted']:.2f}" if r["predicted"] > 0 else "–"}
            for _, r in _modelled(d, params).iterrows()]
    return pd.DataFrame(rows, columns=["library", "algorithm", "model", "P", "size", "measured",
                                       "model time", "measured / model"])


def params_table(params: models.Params) -> pd.DataFrame:
    fits = params.provenance.get("fits", {})
    rows = []
    for a in models.ALL6:
        if a not in params.ab:
            continue
        al, be = params.ab[a]
        f = fits.get(a, {})
        rows.append({"algorithm": a, "alpha": _t(al), "beta [s/B]": f"{be:.3g}",
                     "1/beta": f"{1 / be / 2**30:.2f} GiB/s" if be > 0 else "–",
                     "R^2": f"{f['r2']:.3f}" if "r2" in f else "–",
                     "cells": str(f.get("n", "–")),
                     "source": "fit" if "r2" in f else "paper"})
    rows.append({"algorithm": "gamma", "alpha": "–", "beta [s/B]": f"{params.gamma:.3g}",
                 "1/beta": f"{1 / params.gamma / 2**30:.2f} GiB/s" if params.gamma > 0 else "–",
                 "R^2": "–", "cells": "–", "source": str(params.provenance.get("gamma_from", "paper"))})
    return pd.DataFrame(rows)


def _ci_text(r) -> str:
    if not _has_ci(r):  # one repetition (an oversubscribed cell's budget): no interval
        return f"{_t(r['mean'])} (no CI)"
    return f"{_t(r['mean'])} [{_t(r['ci_low'])}, {_t(r['ci_high'])}]"


def agreement_table(d: pd.DataFrame, params) -> pd.DataFrame:
    """Sect. 5's check (``harness.analysis.suara.agreement``) as printed. Oversubscribed
    cells are listed but claim nothing (``timing claim``)."""
    rows = [{"library": a["library"], "P": a["procs"], "size": tables.format_size(a["size"]),
             "model": a["model"], "configurations": a["configurations"],
             "model's pick": a["pick_label"] + (f" (+{a['tied']} tied)" if a["tied"] else ""),
             "predicted": _t(a["predicted"]), "pick measured": _ci_text(a["pick"]),
             "measured best": a["best_label"], "best time": _ci_text(a["best"]),
             "agree": "yes" if a["agree"] else "no", "rank": f"{a['rank']} of {a['configurations']}",
             "loss": f"{a['loss'] * 100:+.1f}%", "verdict": a["verdict"],
             "timing claim": "none (oversubscribed)" if a["crowded"] else "yes"}
            for a in _agreement(d, params)]
    return pd.DataFrame(rows, columns=["library", "P", "size", "model", "configurations",
                                       "model's pick", "predicted", "pick measured",
                                       "measured best", "best time", "agree", "rank", "loss",
                                       "verdict", "timing claim"])


def agreement_summary(agree: pd.DataFrame) -> str:
    """"model's pick is the measured best in k of n cases" per model, with ties and losses."""
    if agree.empty:
        return "no grid sweep to check"
    parts = []
    for name, g in agree.groupby("model", sort=False):
        k, n = int((g["agree"] == "yes").sum()), len(g)
        ties = int((g["verdict"] == "tie (CIs overlap)").sum())
        crowded = int((g["timing claim"] != "yes").sum())
        text = f"{name}: model's pick is the measured best in {k} of {n} cases"
        extra = [f"{ties} more within the CIs (tie)"] if ties else []
        if crowded:
            extra.append(f"{crowded} oversubscribed: no timing claim")
        parts.append(text + (f" ({'; '.join(extra)})" if extra else ""))
    return "; ".join(parts)


def _speedup_line(line: str) -> tuple[int, str]:
    size, who = line.split("|")
    return int(size), who


def speedup_figure(d: pd.DataFrame, params: models.Params, how: str, path) -> list[Path]:
    """SUARA2's speedup over AUTO (solid) and BEST (dashed, hollow) against P, a colour per
    size, a panel per library; dotted the model's best grid over the best single algorithm,
    grey a sqrt(P) through the first point."""
    rows = speedups(d)
    titles = _titles(d)
    colour = facets.sequential_look(rows["size"])

    def look(line: str) -> facets.Look:
        size, who = _speedup_line(line)
        return dataclasses.replace(colour(size), marker="os"[who == "BEST"],
                                   ls="-" if who == "AUTO" else "--", hollow=who == "BEST")

    def model(ax, key, g, factor) -> None:
        for size, h in g.groupby("size"):
            P = sorted(h["procs"].unique())
            ax.plot(P, [models.select_suara2(int(p), float(size), params).grid_speedup or 1.0
                        for p in P], ":", color=colour(size).color, lw=1.5)
        P = np.array(sorted(g["procs"].unique()), float)
        first = g[(g["procs"] == P[0]) & g["line"].str.endswith("|AUTO")]
        ax.plot(P, float(first["speedup"].mean()) * np.sqrt(P / P[0]), color="#888888", lw=2,
                alpha=0.5)

    spec = facets.Spec(
        x="procs", y="speedup", series="line", cols="library", ci="none", ylog=False,
        reference=1.0, look=look, after=model, ylabel="speedup of SUARA2",
        label=lambda x: f"{tables.format_size(_speedup_line(x)[0])} vs {_speedup_line(x)[1]}",
        order=lambda lines: sorted(lines, key=_speedup_line),
        panel_title=lambda k: titles.get(k["library"]) or style.library_title(k["library"]),
        notes=(f"dotted: model, best grid vs best single ({how}); grey: ∝ sqrt(P) through the "
               "first point",))
    return facets.figure(spec, rows, path, empty="no SUARA2 cells (experiment 'suara')")


def grid_figure(d: pd.DataFrame, params: models.Params, how: str, path) -> list[Path]:
    """Time against the process columns P_c of the grid (Fig. 7), a panel per library, P and
    algorithm pair, a colour per size; dotted the model, dashed sqrt(P)."""
    s, keys = grid_sweeps(d)  # one algorithm in rows and columns (tables/suara_agreement: all)
    titles = _titles(d)
    # log axis: a CI reaching below zero (few noisy repetitions) is drawn down to y/10
    s = s.assign(ci_low=np.maximum(s["ci_low"], s["mean"] / 10))
    colour = facets.sequential_look(s["size"])

    def model(ax, key, g, factor) -> None:
        _, P, row, col = keys[key["panel"]]
        ar, ac = _model_name(row), _model_name(col)
        for size, h in g.groupby("size"):
            pcs = sorted(h["P_c"].unique())
            if ar and ac:
                ax.plot(pcs, [models.suara2_cost(ar, ac, int(P), int(pc), float(size), params)
                              * factor for pc in pcs], ":", color=colour(size).color, lw=1.5)
        ax.axvline(math.sqrt(P), color="#888888", lw=1, ls="--")

    def title(key) -> str:
        lib, P, row, col = keys[key["panel"]]
        name = titles.get(lib) or style.library_title(lib)
        return f"{name}, P={int(P)}, ({style.short(row)}, {style.short(col)})"

    spec = facets.Spec(
        x="P_c", series="size", cols="panel", wrap=3, xlog=True, look=colour,
        label=tables.format_size, xlabel=r"process columns $P_c$ (grid $P/P_c \times P_c$)",
        ylabel="time", panel_title=title, after=model,
        notes=(f"solid: measured (95% CI); dotted: model ({how}); dashed: sqrt(P)",))
    return facets.figure(spec, s, path, empty="no grid sweep (suara2 with grid set per cell)")


def agreement_figure(agree: pd.DataFrame, path) -> list[Path]:
    groups = agree.groupby(["library", "model"] if "model" in agree.columns else ["library"],
                           sort=False).ngroups if len(agree) else 1
    fig = Figure(figsize=(max(3.2, 1.5 * groups + 0.8), 2.6), layout="constrained")
    ax = fig.subplots()
    if agree.empty:
        facets.blank(ax, "no grid sweep to compare with the model")
    else:
        keys = ["library", "model"] if "model" in agree.columns else ["library"]
        share = agree.groupby(keys, sort=False)["agree"].apply(lambda x: (x == "yes").mean() * 100)
        n = agree.groupby(keys, sort=False).size()
        names = [style.library_title(k[0]) + "\n" + textwrap.fill(str(k[1]), 16)
                 if isinstance(k, tuple) else style.library_title(k) for k in share.index]
        crowded = (agree.groupby(keys, sort=False)["timing claim"].apply(lambda x: (x != "yes").any())
                   if "timing claim" in agree.columns else pd.Series(False, index=share.index))
        bars = ax.bar(names, share.values, color="white", edgecolor=style.color("native:auto"),
                      hatch=None)
        for b, c in zip(bars, crowded.values):
            b.set_hatch("///" if c else None)
            b.set_facecolor("white" if c else style.color("native:auto"))
        ax.tick_params(axis="x", labelsize=7)
        for b, v, k in zip(bars, share.values, n.values):
            ax.text(b.get_x() + b.get_width() / 2, v + 2, f"{v:.0f}% of {k}", ha="center", fontsize=8)
        ax.set_ylim(0, 115)
        ax.set_ylabel("model's pick = measured best [%]", fontsize=8)
        if crowded.any():
            fig.text(0.01, -0.02, "hatched: oversubscribed cells, no timing claim",
                     fontsize=7, color="0.35", ha="left", va="top")
    return style.save(fig, path)


def make(inputs) -> list[Path]:
    """Every SUARA table and figure; the agreement table also checks ``model_params.json``
    beside the summary when it exists."""
    style.setup()
    d = _load(inputs.summary)
    params, how = fitted_params(inputs.summary)
    tdir, fdir = inputs.tables, inputs.figures
    agree = agreement_table(d, agreement_models(inputs.store / "summary.csv", params, how))
    written = []
    for t, name, caption in (
            (choice_table(d, params), "suara_choice",
             f"SUARA2's choice per P and message size: grid, combination, "
             f"predicted (model: {how}) and measured time, against the native allreduce "
             f"and the 3-step decomposition (reduce-scatter, allreduce, allgather; its grid); "
             f"speedup ≈: a tie (the 95% CIs overlap); ‡: oversubscribed "
             f"(more ranks than cores), no win or loss drawn"),
            (model_table(d, params), "model_vs_measured",
             f"Measured time of each classic algorithm against its Table 1 model ({how})"),
            (params_table(params), "fitted_params",
             f"Hockney parameters ({how}); gamma from a timed local reduction"),
            (agree, "suara_agreement",
             "Nuriyev et al., Sect. 5: SUARA2's model pick against the measured "
             "best among the grids and (row, column) combinations run; rank 1 = "
             "fastest measured; loss = pick time / best time - 1, a tie when the "
             "95% CIs overlap; oversubscribed cells make no timing claim. "
             + agreement_summary(agree))):
        written += tables.write_table(t, tdir / name, caption, **tables.cells_of(t), layout=LAYOUT)
    written += speedup_figure(d, params, how, fdir / "suara_speedup")
    written += grid_figure(d, params, how, fdir / "suara_grid")
    written += agreement_figure(agree, fdir / "suara_agreement")
    return written
