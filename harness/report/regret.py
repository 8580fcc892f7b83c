"""The regret curves of ``harness tune regret <c>``: how many measurements does a selection
policy need to get within 5 % of the exhaustive campaign's BEST?

The campaign's summary is the ground truth (``harness.analysis.regret.truth``): every forced
``native:*`` algorithm (AUTO included) at every point of a library. Per library, each policy
of ``harness.analysis.regret.POLICIES`` is replayed against it (``regret.replay``; adaptive and
random with several seeds, the fixed grid once, since it has no random choice) until every cell
is measured. After each batch the surrogate, fitted on the cells measured so far, picks the
winner at every point, and regret = t(chosen) / t(BEST) - 1 over all points.

Outputs:

- ``tables/regret.{md,tex,csv}``: per library and policy, the cells and machine time at which
  the mean regret first reaches 5 % (median over the seeds, with the range), the exhaustive
  campaign's cells and time, their ratio, and for the adaptive policy where its stopping rule
  (``regret.fired``: predicted regret below 5 % with 95 % confidence after two batches in a
  row) fired; for Intel MPI, the
  autotuner's own regret, calls and time where the summary holds ``native:autotuner`` cells;
- ``tables/regret_curve.csv``: every replay's curve (one row per batch);
- ``tables/regret_generalisation.{md,tex,csv}``: the surrogate trained on every cell but those
  of one P (or one node count) picks the winner at the held-out P: its regret there;
- ``figures/<c>/regret_<library>.{png,pdf}``: mean and worst regret against cells measured
  (left) and machine time (right), log y, the 5 % line, the stopping rule's point, the
  exhaustive campaign's cells and time, and the autotuner's point (Intel MPI).

``harness tune <c> --compare <truth>`` is ``tuning_compare``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis import regret
from ..analysis.forecast import DEFAULT_SURROGATE, SURROGATES, TREES, checked_surrogate
from ..analysis.replay import (  # noqa: F401  (the regret table's rows and curves)
    AUTOTUNER,
    AUTOTUNER_LABEL,
    CURVE_COLUMNS,
    GENERALISATION_COLUMNS,
    SEEDED,
    TABLE_COLUMNS,
    autotuner_point,
    leave_one_out,
    library_algorithms,
    median_curve,
    replay_all,
    replay_campaign,
    table_rows,
    truth_tables,
)
from ..fileio import atomic_write_text
from ..libraries import split_name
from . import style, tables
from .regret_judged import (JUDGED_CAPTION, JUDGED_COLUMNS, JUDGED_SHARES, judge_table,
                            judged_display, judged_panel)
from .regret_style import FLOOR, POLICY_STYLE, percent

CAPTION = ("Cells measured and machine time (sum of repetitions x mean) until the surrogate's "
           "choice is within 5 % of the exhaustive BEST on average over every point, per policy "
           "replayed against the exhaustive campaign: median over the seeds [min, max]; "
           "ratio = median / exhaustive. Stop: where the adaptive stopping rule (predicted regret "
           "below 5 % with 95 % confidence after two batches in a row) fired, and the true regret there. Intel MPI "
           "autotuner: its own regret at the points it was measured, by its calls (warm-up "
           "included) and their time.")
GENERALISATION_CAPTION = ("Regret of the surrogate's choice at a held-out P (or node count), "
                          "trained on every cell of the others.")


def count_range(mid, low, high) -> str:
    if not math.isfinite(mid):
        return "not reached"
    text = f"{mid:g}"
    return text if low == high else f"{text} [{low:g}, {high:g}]"


def time_range(mid, low, high) -> str:
    if not math.isfinite(mid):
        return "not reached" if not math.isnan(mid) else ""
    text = tables.format_time(mid)[0]
    if low == high or not math.isfinite(high):
        return text
    return f"{text} [{tables.format_time(low)[0]}, {tables.format_time(high)[0]}]"


def library_titles(summary: pd.DataFrame, libraries) -> dict[str, str]:
    """Each library's name in the tables and figures: the catalogue's title (``MPICH``); a
    simulated installation ``<family>@<platform>`` as ``style.library_label`` gives it
    (``openmpi@flat (simulated Open MPI 4.1.2)``), so a simulated truth never reads as a
    measured one."""
    out = {}
    for library in libraries:
        if not split_name(library)[1]:
            out[library] = style.library_title(library)
            continue
        versions = (summary.loc[summary["library"] == library, "library_version"].dropna()
                    if "library_version" in summary else pd.Series(dtype=object))
        out[library] = style.library_label(library, versions.iloc[0] if len(versions) else None)
    return out


def simulated_note(summary: pd.DataFrame, libraries) -> str:
    """The captions' sentence for a truth of simulated libraries ("" for a measured one)."""
    simulated = [lib for lib in libraries if split_name(lib)[1]]
    if not simulated:
        return ""
    platforms = ", ".join(sorted({split_name(lib)[1] for lib in simulated}))
    simulator = (summary["simulator"].dropna().astype(str).replace("", np.nan).dropna()
                 if "simulator" in summary else pd.Series(dtype=object))
    by = f" ({simulator.iloc[0]})" if len(simulator) else ""
    return (f" Truth simulated{by} on platform(s) {platforms}: SMPI's copies of the libraries' "
            f"selection and algorithms, one exact call per cell, so a cell's machine time is "
            f"its simulated time.")


def title_of(library: str, titles: dict | None) -> str:
    return (titles or {}).get(library) or style.library_title(library)


def display(frame: pd.DataFrame, titles: dict | None = None) -> pd.DataFrame:
    """``regret.csv`` as printed: units, ranges, percentages (``titles``: the libraries'
    names, ``library_titles``)."""
    out = []
    for r in frame.to_dict("records"):
        auto = r["policy"] == AUTOTUNER_LABEL
        num = (lambda k: r.get(k) if isinstance(r.get(k), (int, float)) else math.nan)
        out.append({
            "library": title_of(r["library"], titles), "policy": r["policy"],
            "seeds (reached)": "" if auto else f"{int(r['seeds'])} ({int(r['reached'])})",
            "cells to 5 %": (f"{int(r['calls'])} calls, {int(r['points'])} points" if auto else
                             count_range(num("cells_5pct"), num("cells_5pct_low"),
                                         num("cells_5pct_high"))),
            "time to 5 %": (time_range(num("stop_time"), math.nan, math.nan) if auto else
                            time_range(num("time_5pct"), num("time_5pct_low"),
                                       num("time_5pct_high"))),
            "exhaustive": f"{int(r['exhaustive_cells'])} cells, "
                          f"{tables.format_time(r['exhaustive_time'])[0]}",
            "ratio cells / time": "" if auto else
            f"{percent(num('cells_ratio')) or '-'} / {percent(num('time_ratio')) or '-'}",
            "stop: cells, time, regret": (f"mean regret {percent(num('mean_regret'))}, worst "
                                          f"{percent(num('worst_regret'))}" if auto else
                                          "" if not math.isfinite(num("stop_cells")) else
                                          f"{num('stop_cells'):g}, "
                                          f"{tables.format_time(num('stop_time'))[0]}, "
                                          f"{percent(num('stop_mean_regret'))} (worst "
                                          f"{percent(num('stop_worst_regret'))})")})
    return pd.DataFrame(out)


def generalisation_display(frame: pd.DataFrame, titles: dict | None = None) -> pd.DataFrame:
    out = []
    for r in frame.to_dict("records"):
        held = f"{r['held_out']} = {int(r['value'])}" if r.get("held_out") else "none"
        out.append({"library": title_of(r["library"], titles), "held out": held,
                    "points": str(int(r["points"])),
                    "trained on (cells)": "" if r.get("note") else str(int(r["trained_cells"])),
                    "mean regret": percent(r.get("mean_regret")),
                    "worst regret": percent(r.get("worst_regret")),
                    "predicted": percent(r.get("predicted_regret")), "note": r.get("note") or ""})
    return pd.DataFrame(out)


def figure(curves: pd.DataFrame, table: pd.DataFrame, library: str, path,
           autotuner: dict | None = None, judged_floor: float | None = None,
           judge_name: str = "judge", surrogate: str = DEFAULT_SURROGATE,
           library_name: str | None = None) -> list[Path]:
    """Mean (solid) and worst (dashed) regret against cells measured and machine time; with
    ``judged_floor`` (the exhaustive campaign's regret in the judging campaign), a third panel:
    the choices' mean regret in the judging campaign against cells measured. ``library_name``:
    the library as the title names it (default its catalogue title); a simulated library's
    time axis is simulated time."""
    from matplotlib.figure import Figure  # no pyplot: drawn in the workflow's threads too

    d = curves[curves["library"] == library]
    title = (f"{library_name or style.library_title(library)}: regret of the "
             f"{SURROGATES[surrogate].TITLE}'s choice vs measurements")
    time_label = ("simulated time of the cells (s)" if split_name(library)[1]
                  else "machine time (s)")
    if d.empty:
        return style.placeholder(path, title, "no replay curves")
    style.setup()
    full = regret.exhaustive(table)
    judged = judged_floor is not None
    fig = Figure(figsize=(13.5 if judged else 9.0, 3.6))
    axes = fig.subplots(1, 3 if judged else 2)
    axes[1].sharey(axes[0])
    axes[1].tick_params(labelleft=False)
    if judged:
        judged_panel(axes[2], d, full["cells"], judged_floor, judge_name)
    for ax, x, label, total in ((axes[0], "cells", "cells measured", full["cells"]),
                                (axes[1], "machine_time", time_label,
                                 full["machine_time"])):
        for name, group in d.groupby("policy", sort=True):
            color, text = POLICY_STYLE.get(name, ("0.4", name))
            seeds = group["seed"].nunique()
            for column, ls, lw in (("mean_regret", "-", 1.6), ("worst_regret", "--", 0.9)):
                gx, mid, low, high = median_curve(group, x, column)
                ax.plot(gx, np.maximum(mid, FLOOR), ls=ls, lw=lw, color=color,
                        label=(f"{text}" + (f" (median of {seeds})" if seeds > 1 else ""))
                        if column == "mean_regret" else None, drawstyle="steps-post")
                if seeds > 1 and column == "mean_regret":
                    ax.fill_between(gx, np.maximum(low, FLOOR), np.maximum(high, FLOOR),
                                    color=color, alpha=0.15, step="post", lw=0)
            if name == "adaptive":
                for _, curve in group.groupby("seed", sort=True):
                    at = regret.fired(curve)
                    if at is not None:
                        r = curve.iloc[at]
                        ax.plot(r[x], max(r["mean_regret"], FLOOR), marker="v", ms=7, ls="none",
                                color=color, markeredgecolor="k", zorder=5)
        ax.axhline(regret.TARGET, color="0.3", lw=0.8, ls=":")
        ax.axvline(total, color="0.5", lw=0.8, ls="-.")
        ax.annotate("exhaustive", (total, 1.0), xytext=(-3, 0), textcoords="offset points",
                    rotation=90, ha="right", va="top", fontsize=7, color="0.4",
                    xycoords=("data", "axes fraction"))
        if autotuner and x == "machine_time" and autotuner["machine_time"] > 0:
            ax.plot(autotuner["machine_time"], max(autotuner["mean_regret"], FLOOR), marker="*",
                    ms=11, ls="none", color=style.color(AUTOTUNER), markeredgecolor="k", zorder=6,
                    label=f"{AUTOTUNER_LABEL} ({autotuner['calls']} calls, "
                          f"{autotuner['points']} points)")
        ax.set_yscale("log")
        ax.set_xlim(0, total * 1.03)
        ax.set_xlabel(label)
    axes[0].set_ylabel(f"regret t(chosen)/t(BEST) - 1\n(0 drawn at {FLOOR:g})")
    axes[0].plot([], [], color="0.3", ls="--", lw=0.9, label="worst regret")
    axes[0].plot([], [], color="0.3", ls=":", lw=0.8, label="5 %")
    axes[0].plot([], [], marker="v", ms=7, ls="none", color=POLICY_STYLE["adaptive"][0],
                 markeredgecolor="k",
                 label="adaptive stopping rule fires")
    axes[0].legend(fontsize=7, loc="lower left")
    if autotuner:
        axes[1].legend(fontsize=7, loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    return style.save(fig, path)


@dataclass(frozen=True)
class ReplaySettings:
    """How ``make_regret`` replays the policies and names what it writes."""
    seeds: int = 3  # seeds of the adaptive and random policies
    batch: int | None = None  # cells per batch (None: a 25th of the library's, at least 4)
    trees: int = TREES  # the surrogate's size
    surrogate: str = DEFAULT_SURROGATE  # the model that guesses the winners
    #                                     (forecast.SURROGATES), named in captions and titles
    libraries: tuple[str, ...] | None = None  # None: every library of the summary
    judge_name: str = "judge"  # the campaign(s) that judge the choices
    truth_name: str | None = None  # the truth in the captions (None: the tables' campaign)
    log: Callable[[str], None] | None = None  # each replay's progress


def make_regret(summary: pd.DataFrame, tables_dir, figures_dir,
                settings: ReplaySettings = ReplaySettings(), *, judge=None,
                pool=()) -> list[Path]:
    """Every output of the module doc from ``summary`` (the exhaustive campaign), replayed as
    ``settings`` say. ``judge``: the summary of another exhaustive campaign of the same cells,
    or a list of such summaries, pooled (``regret.pooled``): every choice is also timed there
    (``tables/regret_judged``, the figures' third panel). ``pool``: summaries of other
    exhaustive campaigns of the same cells, pooled with ``summary`` into the truth."""
    seeds, batch, trees, libraries, log = (settings.seeds, settings.batch, settings.trees,
                                           settings.libraries, settings.log)
    judge_name, truth_name = settings.judge_name, settings.truth_name
    surrogate = checked_surrogate(settings.surrogate)
    truths = truth_tables(summary, libraries, pool)
    judges = {} if judge is None else {lib: judge_table(judge, lib, judge_name) for lib in truths}
    curves, frame, gen, points, judged = replay_campaign(
        summary, truths, judges, seeds, batch, trees, surrogate, judge_name, log)
    tables_dir, figures_dir = Path(tables_dir), Path(figures_dir)
    truth_name = truth_name or Path(tables_dir).parent.name
    titles = library_titles(summary, truths)
    model = f" Surrogate: {SURROGATES[surrogate].TITLE}." + (
        f" Truth: {truth_name}, pooled (per cell the mean of their times)." if pool else "") + (
        simulated_note(summary, truths))
    written = tables.write_table(frame, tables_dir / "regret", CAPTION + model,
                                 **tables.cells_of(display(frame, titles)))
    written += tables.write_table(gen, tables_dir / "regret_generalisation",
                                  GENERALISATION_CAPTION + model,
                                  **tables.cells_of(generalisation_display(gen, titles)))
    if judged:
        frame = pd.DataFrame(judged).reindex(columns=JUDGED_COLUMNS)
        shares = ", ".join(percent(x) for x in JUDGED_SHARES)
        written += tables.write_table(
            frame, tables_dir / "regret_judged",
            JUDGED_CAPTION.format(truth=truth_name, judge=judge_name, shares=shares)
            + model,
            **tables.cells_of(judged_display(frame, titles)))
    path = tables_dir / "regret_curve.csv"
    atomic_write_text(path, curves.to_csv(index=False))
    written.append(path)
    for library, table in truths.items():
        floor = (regret.exhaustive_judged(table, judges[library])["judged_regret"]
                 if library in judges else None)
        written += figure(curves, table, library, figures_dir / f"regret_{library}",
                          points[library], judged_floor=floor, judge_name=judge_name,
                          surrogate=surrogate, library_name=titles[library])
    return written
