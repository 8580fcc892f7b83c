"""The regret curves of ``harness tune <c> --regret``: how many measurements does a selection
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
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis import policies, regret
from ..analysis.best import timed_mask
from ..analysis.forecast import DEFAULT_SURROGATE, SURROGATES, TREES, checked_surrogate
from ..fileio import atomic_write_text
from ..results.launches import repetitions
from ..results.summary import allreduce_rows
from . import style, tables
from .regret_judged import (JUDGED_CAPTION, JUDGED_COLUMNS, JUDGED_SHARES, judge_table,
                            judged_display, judged_panel, judged_rows)
from .regret_style import FLOOR, POLICY_STYLE, median_curve, percent, spread

AUTOTUNER = "native:autotuner"
AUTOTUNER_LABEL = "Intel MPI autotuner"
SEEDED = ("adaptive", "random")  # the policies whose picks depend on the seed
CURVE_COLUMNS = ["library", "policy", "seed", *regret.CURVE_COLUMNS]
TABLE_COLUMNS = ["library", "policy", "seeds", "reached", "cells_5pct", "cells_5pct_low",
                 "cells_5pct_high", "time_5pct", "time_5pct_low", "time_5pct_high",
                 "exhaustive_cells", "exhaustive_time", "cells_ratio", "time_ratio",
                 "stop_cells", "stop_time", "stop_mean_regret", "stop_worst_regret",
                 "points", "calls", "mean_regret", "worst_regret"]
GENERALISATION_COLUMNS = ["library", "held_out", "value", "points", "trained_cells",
                          "mean_regret", "worst_regret", "predicted_regret", "note"]
CAPTION = ("Cells measured and machine time (sum of repetitions x mean) until the surrogate's "
           "choice is within 5 % of the exhaustive BEST on average over every point, per policy "
           "replayed against the exhaustive campaign: median over the seeds [min, max]; "
           "ratio = median / exhaustive. Stop: where the adaptive stopping rule (predicted regret "
           "below 5 % with 95 % confidence after two batches in a row) fired, and the true regret there. Intel MPI "
           "autotuner: its own regret at the points it was measured, by its calls (warm-up "
           "included) and their time.")
GENERALISATION_CAPTION = ("Regret of the surrogate's choice at a held-out P (or node count), "
                          "trained on every cell of the others.")


def library_algorithms(summary: pd.DataFrame) -> dict[str, int]:
    """Library -> number of native algorithms the truth table would hold (AUTO included)."""
    out = {}
    for library in sorted(set(allreduce_rows(summary)["library"].dropna().astype(str))):
        try:
            rows = regret.native_rows(summary, library)
        except ValueError:
            continue
        out[library] = int(rows[timed_mask(rows)]["algorithm"].nunique())
    return out


def truth_tables(summary: pd.DataFrame, libraries=None, pool=()) -> dict[str, pd.DataFrame]:
    """Library -> its truth table (with ``pool``, summaries of other campaigns of the same
    cells: the tables of all of them pooled, ``regret.pooled``); ValueError naming the library
    when one has fewer than two timed native algorithms (nothing to choose between) or none at
    all, or naming the pooled campaign a library's table fails in."""
    counts = library_algorithms(summary)
    if libraries is None:
        libraries = [lib for lib, n in counts.items() if n > 0]
        if not libraries:
            raise ValueError("summary: no library has timed native:* cells without delay; "
                             "expected an exhaustive campaign (every forced native algorithm "
                             "at every point)")
    out = {}
    for library in libraries:
        if counts.get(library, 0) < 2:
            raise ValueError(f"library: {library!r} has {counts.get(library, 0)} timed native "
                             f"algorithm(s) in the summary, expected at least 2 to choose between")
        out[library] = regret.truth(summary, library)
        if pool:
            try:
                out[library] = regret.pooled([out[library],
                                              *(regret.truth(one, library) for one in pool)])
            except ValueError as exc:
                raise ValueError(f"pool: {exc}") from None
    return out


def replay_all(table: pd.DataFrame, library: str, seeds: int, batch: int,
               trees: int = TREES, log=None, judge: pd.DataFrame | None = None,
               surrogate: str = DEFAULT_SURROGATE) -> pd.DataFrame:
    """Every policy's curve over the whole truth table (with ``judge``, another campaign's
    truth table, its choices also timed there), the winners guessed by ``surrogate``:
    ``CURVE_COLUMNS``."""
    seeds, batch = regret.whole(seeds, "seeds"), regret.whole(batch, "batch")
    frames = []
    for name in sorted(regret.POLICIES):
        policy = (policies.adaptive_with(trees, surrogate) if name == "adaptive"
                  else regret.POLICIES[name])
        for seed in range(seeds if name in SEEDED else 1):
            curve = regret.replay(table, policy, batch=batch, budget=len(table), seed=seed,
                                  trees=trees, judge=judge, surrogate=surrogate)
            frames.append(curve.assign(library=library, policy=name, seed=seed))
            if log:
                got = regret.reach(curve)
                log(f"{library}: {name} seed {seed}: 5 % at "
                    f"{got['cells'] if got else 'never'} of {len(table)} cells")
    return pd.concat(frames, ignore_index=True)[CURVE_COLUMNS]


def autotuner_point(summary: pd.DataFrame, table: pd.DataFrame, library: str) -> dict | None:
    """Intel MPI's autotuner against the truth: mean and worst regret over the points where
    its cells carry a time, its calls (warm-up + timed repetitions) and their time; None when
    the summary has none of its cells at the truth's points."""
    rows = allreduce_rows(summary)
    keep = ((rows["library"] == library) & (rows["algorithm"] == AUTOTUNER)
            & (rows["delay"].astype(str) == "none"))
    rows = rows[keep & timed_mask(rows)]
    rows = rows[rows["dtype"].astype(str).isin(set(table["dtype"].astype(str)))]
    if rows.empty:
        return None
    best = table.drop_duplicates(regret.POINT).set_index(regret.POINT)["best_mean"]
    keys = list(zip(*(pd.to_numeric(rows[c]).astype(int) for c in regret.POINT)))
    at = [k in best.index for k in keys]
    rows = rows[at]
    if rows.empty:
        return None
    mean = pd.to_numeric(rows["mean"]).to_numpy(float)
    ratio = mean / best.loc[[k for k, a in zip(keys, at) if a]].to_numpy(float) - 1.0
    warmup = pd.to_numeric(rows.get("warmup"), errors="coerce").fillna(0).to_numpy(float) \
        if "warmup" in rows else np.zeros(len(rows))
    launches = pd.to_numeric(rows.get("launches"), errors="coerce").fillna(1).clip(lower=1) \
        .to_numpy(float) if "launches" in rows else np.ones(len(rows))
    calls = warmup * launches + repetitions(rows).to_numpy(float)  # warm-up in every launch
    return {"points": int(len(rows)), "calls": int(calls.sum()),
            "machine_time": float((calls * mean).sum()),
            "mean_regret": float(ratio.mean()), "worst_regret": float(ratio.max())}


def table_rows(curves: pd.DataFrame, table: pd.DataFrame, library: str,
               autotuner: dict | None = None) -> list[dict]:
    """The rows of ``regret.csv`` of one library (``TABLE_COLUMNS``)."""
    full = regret.exhaustive(table)
    rows = []
    for name, group in curves[curves["library"] == library].groupby("policy", sort=True):
        cells, times, stops = [], [], []
        for _, curve in group.groupby("seed", sort=True):
            got = regret.reach(curve)
            cells.append(got["cells"] if got else math.inf)
            times.append(got["machine_time"] if got else math.inf)
            at = regret.fired(curve)
            if at is not None:
                stops.append(curve.iloc[at])
        c, t = spread(cells), spread(times)
        row = {"library": library, "policy": name, "seeds": int(group["seed"].nunique()),
               "reached": int(np.isfinite(cells).sum()),
               "cells_5pct": c[0], "cells_5pct_low": c[1], "cells_5pct_high": c[2],
               "time_5pct": t[0], "time_5pct_low": t[1], "time_5pct_high": t[2],
               "exhaustive_cells": full["cells"], "exhaustive_time": full["machine_time"],
               "cells_ratio": c[0] / full["cells"], "time_ratio": t[0] / full["machine_time"]}
        if name == "adaptive" and stops:
            fired = pd.DataFrame(stops)
            row.update(stop_cells=float(fired["cells"].median()),
                       stop_time=float(fired["machine_time"].median()),
                       stop_mean_regret=float(fired["mean_regret"].median()),
                       stop_worst_regret=float(fired["worst_regret"].median()))
        rows.append(row)
    if autotuner:
        rows.append({"library": library, "policy": AUTOTUNER_LABEL, "seeds": 1,
                     "exhaustive_cells": full["cells"], "exhaustive_time": full["machine_time"],
                     "points": autotuner["points"], "calls": autotuner["calls"],
                     "time_5pct": math.nan, "mean_regret": autotuner["mean_regret"],
                     "worst_regret": autotuner["worst_regret"],
                     "stop_time": autotuner["machine_time"]})
    return rows


def leave_one_out(table: pd.DataFrame, library: str, seed: int = 0,
                  trees: int = TREES, surrogate: str = DEFAULT_SURROGATE) -> list[dict]:
    """Per P (and per node count, when several): the surrogate trained on every cell of the
    other values, its regret at the held-out one (``GENERALISATION_COLUMNS``)."""
    rows = []
    for column, label in (("procs", "P"), ("nodes", "nodes")):
        values = sorted(int(v) for v in table[column].unique())
        if len(values) < 2:
            continue
        for value in values:
            held = table.loc[table[column] == value, regret.POINT].drop_duplicates()
            others = int((table[column] != value).sum())
            curve = regret.replay(table, regret.random_cells, others, others, seed, held, trees,
                                  surrogate=surrogate)
            last = curve.iloc[-1]
            rows.append({"library": library, "held_out": label, "value": value,
                         "points": len(held), "trained_cells": int(last["cells"]),
                         "mean_regret": float(last["mean_regret"]),
                         "worst_regret": float(last["worst_regret"]),
                         "predicted_regret": float(last["predicted_regret"]), "note": ""})
    if not rows:
        rows.append({"library": library, "held_out": "", "points": 0,
                     "note": "one P and one node count: nothing to hold out"})
    return rows


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


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """``regret.csv`` as printed: units, ranges, percentages."""
    out = []
    for r in frame.to_dict("records"):
        auto = r["policy"] == AUTOTUNER_LABEL
        num = (lambda k: r.get(k) if isinstance(r.get(k), (int, float)) else math.nan)
        out.append({
            "library": style.library_title(r["library"]), "policy": r["policy"],
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


def generalisation_display(frame: pd.DataFrame) -> pd.DataFrame:
    out = []
    for r in frame.to_dict("records"):
        held = f"{r['held_out']} = {int(r['value'])}" if r.get("held_out") else "none"
        out.append({"library": style.library_title(r["library"]), "held out": held,
                    "points": str(int(r["points"])),
                    "trained on (cells)": "" if r.get("note") else str(int(r["trained_cells"])),
                    "mean regret": percent(r.get("mean_regret")),
                    "worst regret": percent(r.get("worst_regret")),
                    "predicted": percent(r.get("predicted_regret")), "note": r.get("note") or ""})
    return pd.DataFrame(out)


def figure(curves: pd.DataFrame, table: pd.DataFrame, library: str, path,
           autotuner: dict | None = None, judged_floor: float | None = None,
           judge_name: str = "judge", surrogate: str = DEFAULT_SURROGATE) -> list[Path]:
    """Mean (solid) and worst (dashed) regret against cells measured and machine time; with
    ``judged_floor`` (the exhaustive campaign's regret in the judging campaign), a third panel:
    the choices' mean regret in the judging campaign against cells measured."""
    from matplotlib.figure import Figure  # no pyplot: drawn in the workflow's threads too

    d = curves[curves["library"] == library]
    title = (f"{style.library_title(library)}: regret of the {SURROGATES[surrogate].TITLE}'s "
             f"choice vs measurements")
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
                                (axes[1], "machine_time", "machine time (s)",
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
                    ms=11, ls="none", color="#9467bd", markeredgecolor="k", zorder=6,
                    label=f"{AUTOTUNER_LABEL} ({autotuner['calls']} calls, "
                          f"{autotuner['points']} points)")
        ax.set_yscale("log")
        ax.set_xlim(0, total * 1.03)
        ax.set_xlabel(label)
    axes[0].set_ylabel(f"regret t(chosen)/t(BEST) - 1\n(0 drawn at {FLOOR:g})")
    axes[0].plot([], [], color="0.3", ls="--", lw=0.9, label="worst regret")
    axes[0].plot([], [], color="0.3", ls=":", lw=0.8, label="5 %")
    axes[0].plot([], [], marker="v", ms=7, ls="none", color="#d62728", markeredgecolor="k",
                 label="adaptive stopping rule fires")
    axes[0].legend(fontsize=7, loc="lower left")
    if autotuner:
        axes[1].legend(fontsize=7, loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    return style.save(fig, path)


def make_regret(summary: pd.DataFrame, tables_dir, figures_dir, seeds: int = 3,
                batch: int | None = None, trees: int = TREES, libraries=None,
                log=None, judge=None, judge_name: str = "judge",
                surrogate: str = DEFAULT_SURROGATE, pool=(), truth_name: str | None = None
                ) -> list[Path]:
    """Every output of the module doc from ``summary`` (the exhaustive campaign). ``batch``:
    cells per batch of every replay (default: a 25th of the library's cells, at least 4).
    ``judge``: the summary of another exhaustive campaign of the same cells (``judge_name``),
    or a list of such summaries, pooled (``regret.pooled``): every choice is also timed there
    (``tables/regret_judged``, the figures' third panel).
    ``surrogate``: the model that guesses the winners (``forecast.SURROGATES``), named in every
    caption and title. ``pool``: summaries of other exhaustive campaigns of the same cells,
    pooled with ``summary`` into the truth (``truth_name`` names it in the captions)."""
    surrogate = checked_surrogate(surrogate)
    truths = truth_tables(summary, libraries, pool)
    judges = {} if judge is None else {lib: judge_table(judge, lib, judge_name) for lib in truths}
    curves, rows, general, points, judged = [], [], [], {}, []
    largest = getattr(SURROGATES[surrogate], "MAX_CELLS", math.inf)
    for library, table in truths.items():
        if len(table) > largest:  # the replays measure every cell in the end
            raise ValueError(f"surrogate {surrogate}: library {library} has {len(table)} cells, "
                             f"expected at most {largest} to replay with it (its fit grows as "
                             f"the cube of the cells); use --surrogate forest")
    for library, table in truths.items():
        size = batch if batch is not None else max(4, len(table) // 25)
        curve = replay_all(table, library, seeds, size, trees, log, judges.get(library), surrogate)
        points[library] = autotuner_point(summary, table, library)
        curves.append(curve)
        rows += table_rows(curve, table, library, points[library])
        general += leave_one_out(table, library, trees=trees, surrogate=surrogate)
        if library in judges:
            judged += judged_rows(curve, table, judges[library], library, judge_name)
    curves = pd.concat(curves, ignore_index=True)
    frame = pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS)
    gen = pd.DataFrame(general).reindex(columns=GENERALISATION_COLUMNS)
    tables_dir, figures_dir = Path(tables_dir), Path(figures_dir)
    truth_name = truth_name or Path(tables_dir).parent.name
    model = f" Surrogate: {SURROGATES[surrogate].TITLE}." + (
        f" Truth: {truth_name}, pooled (per cell the mean of their times)." if pool else "")
    written = tables.write_table(frame, tables_dir / "regret", CAPTION + model,
                                 **tables.cells_of(display(frame)))
    written += tables.write_table(gen, tables_dir / "regret_generalisation",
                                  GENERALISATION_CAPTION + model,
                                  **tables.cells_of(generalisation_display(gen)))
    if judged:
        frame = pd.DataFrame(judged).reindex(columns=JUDGED_COLUMNS)
        shares = ", ".join(percent(x) for x in JUDGED_SHARES)
        written += tables.write_table(
            frame, tables_dir / "regret_judged",
            JUDGED_CAPTION.format(truth=truth_name, judge=judge_name, shares=shares)
            + model,
            **tables.cells_of(judged_display(frame)))
    path = tables_dir / "regret_curve.csv"
    atomic_write_text(path, curves.to_csv(index=False))
    written.append(path)
    for library, table in truths.items():
        floor = (regret.exhaustive_judged(table, judges[library])["judged_regret"]
                 if library in judges else None)
        written += figure(curves, table, library, figures_dir / f"regret_{library}",
                          points[library], judged_floor=floor, judge_name=judge_name,
                          surrogate=surrogate)
    return written
