"""The selection policies replayed against a campaign's exhaustive truth, as data (``harness
tune regret <c>``): per library the truth table (``truth_tables``: every timed comparable
native algorithm at every point, campaigns of the same cells pooled), every policy's regret
curve over it (``replay_all``), Intel MPI's autotuner against it (``autotuner_point``), the
regret table's rows (``table_rows``) and the surrogate at a held-out P or node count
(``leave_one_out``); with a second campaign of the same cells, the choices judged in its
times (``judge_table``, ``judged_rows``). Built on ``harness.analysis.regret``; written and drawn by
``harness/report/regret.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..cells import SELECTORS
from ..results.launches import repetitions
from ..results.summary import allreduce_rows
from . import policies, regret
from .forecast import DEFAULT_SURROGATE, SURROGATES, TREES
from .vocabulary import timed_mask

_, AUTOTUNER = SELECTORS  # Intel MPI's autotuner: the library selecting by its own measurements
QUARTER = 0.25  # the share of the exhaustive cells the judged table reads the curves at
JUDGED_SHARES = (0.1, QUARTER, 0.5)
JUDGED_COLUMNS = ["library", "judge", "policy", "seeds", "share", "cells", "judged_regret",
                  "judged_regret_low", "judged_regret_high", "judged_cost", "judged_cost_low",
                  "judged_cost_high", "points"]
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


def spread(values) -> tuple[float, float, float]:
    """(median, min, max) of ``values``; inf stands for 'not reached'."""
    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(v.min()), float(v.max())


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
            & (rows["delay"] == "none"))
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


def judged_rows(curves: pd.DataFrame, table: pd.DataFrame, judge: pd.DataFrame,
                library: str, judge_name: str) -> list[dict]:
    """The rows of ``regret_judged.csv`` of one library (``JUDGED_COLUMNS``): the exhaustive
    campaign's own choice, then each policy at each share of ``JUDGED_SHARES``."""
    floor = regret.exhaustive_judged(table, judge)
    rows = [{"library": library, "judge": judge_name, "policy": "exhaustive", "seeds": 1,
             "share": 1.0, "cells": len(table), "judged_regret": floor["judged_regret"],
             "judged_cost": 0.0, "points": floor["points"]}]
    for name, group in curves[curves["library"] == library].groupby("policy", sort=True):
        for share in JUDGED_SHARES:
            want = share * len(table)
            reached = [g[g["cells"] >= want].iloc[0] for _, g in group.groupby("seed", sort=True)
                       if (g["cells"] >= want).any()]
            if not reached:
                continue
            at = pd.DataFrame(reached)
            row = {"library": library, "judge": judge_name, "policy": name,
                   "seeds": len(at), "share": share, "cells": float(at["cells"].median()),
                   "points": floor["points"]}
            for column in ("judged_regret", "judged_cost"):
                mid, low, high = spread(at[column])
                row.update({column: mid, f"{column}_low": low, f"{column}_high": high})
            rows.append(row)
    return rows


def judge_table(judge, library: str, name: str) -> pd.DataFrame:
    """The truth table of ``library`` in the judging campaign, or pooled over several
    (``judge``: a summary or a list of summaries; ``regret.pooled``); ValueError naming it."""
    try:
        summaries = judge if isinstance(judge, list) else [judge]
        return regret.pooled([regret.truth(one, library) for one in summaries])
    except ValueError as exc:
        raise ValueError(f"judge {name}: {exc}") from None


def median_curve(group: pd.DataFrame, x: str, column: str) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray, np.ndarray]:
    """(x, median, min, max) of ``column`` over the seeds of one policy: on the cells axis the
    seeds share their x; on the time axis each seed's step curve is read on a common grid."""
    seeds = [g for _, g in group.groupby("seed", sort=True)]
    if x == "cells":
        grid = np.array(sorted(set(group["cells"])), dtype=float)
    else:
        lo, hi = group[x].min(), group[x].max()
        grid = np.linspace(lo, hi, 400) if hi > lo else np.array([lo, hi], float)
    values = []
    for g in seeds:
        xs, ys = g[x].to_numpy(float), g[column].to_numpy(float)
        idx = np.searchsorted(xs, grid, side="right") - 1  # the last batch done by then
        values.append(np.where(idx >= 0, ys[np.clip(idx, 0, None)], np.nan))
    v = np.vstack(values)
    with np.errstate(all="ignore"):
        return grid, np.nanmedian(v, axis=0), np.nanmin(v, axis=0), np.nanmax(v, axis=0)


def replay_campaign(summary: pd.DataFrame, truths: dict, judges: dict, seeds: int,
                    batch: int | None, trees: int, surrogate: str, judge_name: str,
                    log=None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict, list]:
    """Every library of ``truths`` ({library: truth table}) replayed (``replay_all``; ``batch``
    None: a 25th of the library's cells, at least 4): (every curve, the regret table's rows,
    the leave-one-out rows, the autotuner's point per library, the rows judged in ``judges``'
    times). ValueError when a library has more cells than the surrogate can replay."""
    largest = getattr(SURROGATES[surrogate], "MAX_CELLS", math.inf)
    for library, table in truths.items():
        if len(table) > largest:  # the replays measure every cell in the end
            raise ValueError(f"surrogate {surrogate}: library {library} has {len(table)} cells, "
                             f"expected at most {largest} to replay with it (its fit grows as "
                             f"the cube of the cells); use --surrogate forest")
    curves, rows, general, points, judged = [], [], [], {}, []
    for library, table in truths.items():
        size = batch if batch is not None else max(4, len(table) // 25)
        curve = replay_all(table, library, seeds, size, trees, log, judges.get(library), surrogate)
        points[library] = autotuner_point(summary, table, library)
        curves.append(curve)
        rows += table_rows(curve, table, library, points[library])
        general += leave_one_out(table, library, trees=trees, surrogate=surrogate)
        if library in judges:
            judged += judged_rows(curve, table, judges[library], library, judge_name)
    return (pd.concat(curves, ignore_index=True), pd.DataFrame(rows).reindex(columns=TABLE_COLUMNS),
            pd.DataFrame(general).reindex(columns=GENERALISATION_COLUMNS), points, judged)
