"""AUTO vs BEST as the confirmation stage measured it (``harness.campaign.confirm``): one table
(md, tex, csv) and one figure of the gain t_AUTO / t_BEST with its 95 % interval; and the
performance-guideline violations it measured again (``guidelines_confirmed``, a table).

A gain whose interval contains 1 is a tie and is drawn as one (hollow grey marker, its bar
crossing the line at 1); oversubscribed groups are listed with no claim; "AUTO is BEST"
means no forced algorithm beat AUTO in the campaign.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..analysis.confirm import COLUMNS, GUIDELINE, load  # noqa: F401  (the stage's rows)
from ..units import format_number, format_size
from . import style, tables
from .guidelines import LABELS
from .tuned import ratio

# a guideline entry's verdict, read for the mock-up in BEST's place
GUIDELINE_VERDICTS = {"BEST faster": "violation confirmed", "AUTO faster": "holds",
                      "tie": "not confirmed (tie)"}


def _ranked(r) -> str:
    """The median gain (Hodges-Lehmann), the exact Wilcoxon p and its reading."""
    g, p = r["median_gain"], r["wilcoxon_p"]
    if not isinstance(g, (int, float)) or not math.isfinite(g):
        return ""
    p_text = f"p = {p:.3f}" if isinstance(p, (int, float)) and math.isfinite(p) else "no p"
    return f"{g:.2f}, {p_text}: {r.nonparametric}"


def _size(r) -> str:
    """The size, marked when each call ran on rotated (cold) buffers (``buffers: rotate``)."""
    return format_size(r["size"]) + (" rotated" if r.get("buffers") == "rotate" else "")


def _display(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = ["library", "P", "size", "AUTO (us)", "BEST", "BEST (us)", "gain [95% CI]", "verdict",
              "median gain, Wilcoxon"]
    rows = [[r.library, str(r.procs), _size(r), format_number(r.auto_mean, scale=1e6),
             str(r.best or "").replace("native:", ""), format_number(r.best_mean, scale=1e6),
             ratio(r, "gain"), r.verdict, _ranked(r)] for _, r in df.iterrows()]
    return header, rows


CAPTION = ("AUTO vs BEST confirmed in fresh launches measured alternately (A B B A). Gain = "
           "t_AUTO / t_BEST over paired launches, 95% CI (Student-t on the log ratios of the "
           "launch means; the verdict rests on it); a CI containing 1 is a tie. Beside it, with "
           "no assumption on the distribution: the median gain (Hodges-Lehmann, launch "
           "medians) and the exact Wilcoxon signed-rank test of the pairs (4 pairs cannot reach "
           "p < 0.05: 'too few pairs'). Oversubscribed: more ranks than cores, no claim.")


def figure(df: pd.DataFrame, path) -> list[Path]:
    from matplotlib.figure import Figure  # no pyplot: the workflow draws in threads

    style.setup()
    libs = sorted(df.library.unique()) or ["(none)"]
    fig = Figure(figsize=(3.2 * len(libs), 2.8))
    axes = fig.subplots(1, len(libs), squeeze=False, sharey=True)
    for ax, lib in zip(axes[0], libs):
        crowded = int(((df.library == lib) & (df.verdict == "oversubscribed")).sum())
        # oversubscribed cells were not measured again: counted in a note, not drawn
        d = df[(df.library == lib) & (df.verdict != "oversubscribed")]
        if crowded:
            ax.text(0.02, 0.02, f"+ {crowded} oversubscribed (no claim)", transform=ax.transAxes,
                    fontsize=7, color="0.4")
        ax.axhline(1.0, color="0.3", lw=0.8)
        labels = []
        for i, (_, r) in enumerate(d.iterrows()):
            labels.append(f"{_size(r)}\nP={r.procs}")
            g = r["gain"]
            if r.verdict in ("BEST faster", "AUTO faster", "tie") and isinstance(g, float) \
                    and math.isfinite(g):
                lo, hi = r["gain_ci_low"], r["gain_ci_high"]
                tie = r.verdict == "tie"
                color = "0.55" if tie else style.color(r.best)
                if isinstance(lo, float) and math.isfinite(lo):  # bars never negative
                    ax.errorbar(i, g, yerr=[[max(g - lo, 0.0)], [max(hi - g, 0.0)]], fmt="none",
                                ecolor=color, capsize=3, lw=1)
                ax.plot(i, g, marker="o", ms=6, color=color,
                        markerfacecolor="white" if tie else color)
                ax.annotate("tie" if tie else style.short(r.best), (i, g), xytext=(4, 4),
                            textcoords="offset points", fontsize=7, color=color)
            else:
                ax.annotate({"oversubscribed": "oversub.", "AUTO is BEST": "AUTO best"}.get(
                    r.verdict, r.verdict), (i, 1.0), xytext=(0, 6), textcoords="offset points",
                    ha="center", fontsize=7, color="0.4", rotation=90)
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlim(-0.7, max(len(labels), 1) - 0.3)
        ax.set_title(lib)
        ax.set_yscale("log")
    axes[0][0].set_ylabel("gain t_AUTO / t_BEST (log)")
    fig.suptitle("AUTO vs BEST, confirmed (95% CI; hollow grey: tie)", fontsize=9, y=1.06)
    return style.save(fig, path)


GUIDELINES_CAPTION = (
    "Performance-guideline violations of the campaign (tables/guidelines) measured again in fresh "
    "launches, AUTO and the mock-up alternately (A B B A). Speedup = t_AUTO / t_mock-up over "
    "paired launches, 95% CI (Student-t on the log ratios of the launch means); 'violation "
    "confirmed' when the CI lies above 1, 'holds' below 1, 'not confirmed (tie)' when it "
    "contains 1. Beside it: the median speedup (Hodges-Lehmann) and the exact Wilcoxon test.")


def write_guidelines(df: pd.DataFrame, tables_dir) -> list[Path]:
    """``tables/guidelines_confirmed``: the guideline entries, their verdicts read for the
    mock-up."""
    shown = df.assign(verdict=df["verdict"].map(lambda v: GUIDELINE_VERDICTS.get(v, v)))
    header = ["library", "P", "size", "AUTO (us)", "mock-up", "mock-up (us)",
              "speedup [95% CI]", "campaign speedup", "verdict", "median speedup, Wilcoxon"]
    rows = [[r.library, str(r.procs), _size(r), format_number(r.auto_mean, scale=1e6),
             LABELS.get(r.best, r.best), format_number(r.best_mean, scale=1e6), ratio(r, "gain"),
             format_number(r.campaign_gain), r.verdict, _ranked(r)] for _, r in shown.iterrows()]
    caption = GUIDELINES_CAPTION + (f" {len(shown)} violation(s) of the campaign measured again."
                                    if len(shown) else " The campaign showed no violation.")
    return tables.write_table(shown, Path(tables_dir) / "guidelines_confirmed", caption,
                              header=header, rows=rows, layout=tables.Layout(
                                  placeholder="no guideline violation to measure again"))


def make(inputs) -> list[Path]:
    """The table and figure of AUTO vs BEST, and the table of the guideline violations measured
    again, from the groups' documents (``inputs.documents``: ``confirm/<group>.json``); entries
    with no data (a size of another experiment the group never measured) compare nothing:
    counted in the caption, not listed."""
    every = load(inputs.documents)
    guideline = every["role"] == GUIDELINE
    written = write_guidelines(every[guideline].reset_index(drop=True), inputs.tables)
    df = every[~guideline].reset_index(drop=True)
    empty = df["verdict"] == "no data"
    shown = df[~empty].reset_index(drop=True)
    caption = CAPTION + (f" {int(empty.sum())} entr{'y' if empty.sum() == 1 else 'ies'} with no "
                         f"data left out." if empty.any() else "")
    header, rows = _display(shown)
    written += tables.write_table(shown, inputs.tables / "auto_vs_best_confirmed", caption,
                                  header=header, rows=rows)
    return written + figure(shown, inputs.figures / "auto_vs_best_confirmed")
