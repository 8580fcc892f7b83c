"""AUTO's selection map (``tables/auto_choices``, ``figures/<c>/auto_choices``): per
installation, P and size, the algorithm AUTO ran (the summary's ``auto_ran``, seen under gdb
by the campaign's ``auto_ran`` stage), beside AUTO's time and BEST where BEST is another
algorithm and beats AUTO beyond noise (the rows: ``harness.analysis.auto_vs_best.auto_choices``). The figure: size on x, P on y, one colour per
algorithm, one panel per installation; a ringed square where BEST beat AUTO."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ..analysis.auto_vs_best import auto_choices as choices
from ..analysis.auto_vs_best import prepare
from . import facets, style, tables

TITLE = "What AUTO ran: the library's choice per installation, P and size"


def make(inputs) -> list[Path]:
    style.setup()
    t = choices(prepare(inputs.summary))
    written = []
    base_t = inputs.tables / "auto_choices"
    base_f = inputs.figures / "auto_choices"
    if t.empty:
        frame = pd.DataFrame(columns=["library", "procs", "size", "auto_ran"])
        written += tables.write_table(frame, base_t, TITLE, header=["Library", "P", "Size", "AUTO ran"],
                                      rows=[], layout=tables.Layout(placeholder="no AUTO cell says what it ran"))
        return written + style.placeholder(base_f, TITLE, "no AUTO cell says what it ran")
    rows = []
    for r in t.itertuples(index=False):
        r = r._asdict()
        at, _ = tables.format_time(r["auto_mean"])
        beat = r["verdict"] == "BEST faster"
        rows.append([style.library_label(r["library"], r["library_version"]), str(int(r["procs"])),
                     tables.format_size(r["size"]), r["auto_ran"],
                     (at + (" †" if r["auto_status"] == "not-converged" else "")) if at
                     else r["auto_status"],
                     tables.algorithm_label(r["best_algorithm"]) if r["best_algorithm"] else "",
                     (f"{r['gain']:.2f}×" if math.isfinite(r["gain"]) else "n/a")
                     + ("" if beat else " (tie)" if r["verdict"] == "tie" else "")
                     + (" ‡" if r["oversubscribed"] else "")])
    header = ["Library", "P", "Size", "AUTO ran", "AUTO time", "BEST", "Gain"]
    cols = ["library", "library_version", "procs", "size", "auto_ran", "auto_mean",
            "best_algorithm", "gain", "verdict", "oversubscribed"]
    written += tables.write_table(
        t[cols], base_t, TITLE, header=header, rows=rows, layout=tables.Layout(
        align="lrrlrlr", md_note="AUTO ran: the catalogue's name for the library functions one AUTO call ran "
                "(harness whatran). Gain = AUTO time / BEST time; (tie): the 95% CIs overlap; "
                "† not converged; ‡ oversubscribed, no claim.\n"))
    written += _figure(t, base_f)
    return written


def _figure(t: pd.DataFrame, base) -> list[Path]:
    libs = sorted(t["library"].unique(), key=style.library_sort_key)
    sizes = sorted(t["size"].unique())
    procs = sorted(t["procs"].unique())
    fig, axes = plt.subplots(1, len(libs), figsize=(max(4.0, 3.6 * len(libs)), 0.5 * len(procs) + 2.6),
                             squeeze=False, sharey=True)
    names = sorted(t["auto_ran"].unique())
    for ax, lib in zip(axes[0], libs):
        d = t[t["library"] == lib]
        for r in d.itertuples(index=False):
            x, y = sizes.index(r.size), procs.index(r.procs)
            ax.scatter([x], [y], s=170, marker="s", color=style.color(f"native:{r.auto_ran}"),
                       edgecolors="none")
            if r.verdict == "BEST faster":
                ax.scatter([x], [y], s=330, marker="s", facecolors="none", edgecolors="#d62728",
                           linewidths=1.4)
        ax.set_title(style.library_label(lib, d["library_version"].iloc[0]))
        ax.set_xticks(range(len(sizes)), [tables.format_size(s) for s in sizes], rotation=60,
                      fontsize=7)
        ax.set_yticks(range(len(procs)), [str(int(p)) for p in procs])
        ax.set_xlim(-0.6, len(sizes) - 0.4)
        ax.set_ylim(-0.6, len(procs) - 0.4)
        ax.set_xlabel(facets.X_AXES["size"][0])
    axes[0][0].set_ylabel(facets.X_AXES["procs"][0])
    handles = [plt.Line2D([], [], marker="s", linestyle="", markersize=8,
                          color=style.color(f"native:{n}"), label=n) for n in names]
    handles.append(plt.Line2D([], [], marker="s", linestyle="", markersize=10, markerfacecolor="none",
                              markeredgecolor="#d62728", label="BEST beat AUTO (CIs apart)"))
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), frameon=False,
               fontsize=7.5, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle("What AUTO ran (seen under gdb)")
    fig.tight_layout(rect=(0, 0.12 + 0.03 * (len(handles) // 4), 1, 1))
    written = style.save(fig, base)
    plt.close(fig)
    return written
