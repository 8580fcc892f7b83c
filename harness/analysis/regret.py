"""Replay of algorithm-selection policies against an exhaustive campaign: how close to BEST
does a policy get, for how many measured cells and how much machine time?

The exhaustive campaign of a library measures every ``native:*`` algorithm at every point
(P, nodes, message size); BEST at a point is the fastest of them (``best.fastest``). Measuring
them all costs machine time, and most cells are far from the winner. A replay takes the
exhaustive results as the truth (``truth``), lets a policy pick which cells to "measure"
batch by batch (a look-up in the truth), and after each batch asks the surrogate
(``harness.analysis.surrogate``), fitted on the measured cells only, for the winner at every
held-out point. Regret of a choice at a point = t(chosen) / t(BEST) - 1; the curve
(``replay``) gives per batch the cells measured, the machine time they took (repetitions x
mean, summed), the mean and worst regret over the held-out points and the surrogate's own
estimate of its regret, which is all a real campaign would know (``stop``).

One campaign's BEST carries the noise of its launches: where two algorithms are close, a
second campaign of the same cells may name the other one. ``judge`` (``replay``,
``exhaustive_judged``) times the same choices in such a second campaign: their mean regret
there (``judged_regret``) and their mean cost against the first campaign's BEST
(``judged_cost``, t(choice) / t(exhaustive choice) - 1 in the second campaign's times); the
first campaign's BEST itself has a judged regret too, the floor no policy measured in that
campaign can go below.

The policies that choose the cells are in ``harness.analysis.policies``; the surrogate that
guesses the rest is named by ``surrogate`` (``harness.analysis.forecast``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results.launches import repetitions
from ..results.summary import allreduce_rows, typed
from .best import fastest
from .vocabulary import comparable_mask, timed_mask
from .forecast import (CANDIDATE_COLUMNS, CELL, DEFAULT_SURROGATE, MEASURED_COLUMNS, POINT,
                       checked_surrogate, forecast, layout, time_matrix)
from .policies import POLICIES, random_cells
from .surrogate import FOREST_SEED, TREES, check_columns, positive_numbers, verdict

TARGET = 0.05  # regret the stopping rule and ``reach`` aim below
TABLE_COLUMNS = ["library", *MEASURED_COLUMNS, "status", "best_algorithm", "best_mean"]
SUMMARY_NEEDS = ["library", "algorithm", "procs", "nodes", "size", "dtype", "delay", "status",
                 "n", "mean"]
# conditions that may make two summary rows of one cell differ
CONDITIONS = ["dtype", "op", "timing", "buffers", "thread_level", "metric", "params"]
CURVE_COLUMNS = ["batch", "cells", "machine_time", "mean_regret", "worst_regret",
                 "predicted_regret", "predicted_regret_q95", "judged_regret", "judged_cost"]


def whole(value, name: str, least: int = 1) -> int:
    """``value`` as an int >= ``least``; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name}: got {value!r}, expected an integer >= {least}")
    return int(value)


def native_rows(summary: pd.DataFrame, library: str) -> pd.DataFrame:
    """The summary's allreduce rows of ``library`` without delay, forced ``native:*`` only."""
    if not isinstance(summary, pd.DataFrame):
        raise ValueError(f"summary: got {type(summary).__name__}, expected a pandas DataFrame")
    check_columns(summary, SUMMARY_NEEDS, "summary")
    rows = allreduce_rows(typed(summary))
    libraries = sorted(set(rows["library"].dropna().astype(str)))
    if library not in libraries:
        raise ValueError(f"library: got {library!r}, expected one of the summary's libraries "
                         f"{libraries}")
    return rows[(rows["library"] == library) & comparable_mask(rows)]


def refuse_repeated_cells(timed: pd.DataFrame, library: str) -> None:
    """ValueError when a cell has more than one timed row (the summary mixes conditions)."""
    repeated = timed[timed.duplicated(CELL, keep=False)]
    if repeated.empty:
        return
    varying = [c for c in CONDITIONS if c in repeated.columns
               and repeated.groupby(CELL)[c].nunique(dropna=False).max() > 1]
    first = repeated.iloc[0]
    raise ValueError(f"summary: {len(repeated)} timed rows of {library} share a cell "
                     f"(procs, nodes, size, algorithm), e.g. {tuple(first[CELL])}, differing in "
                     f"{varying or 'no known column'}; expected one row per cell: select one "
                     f"condition first")


def truth(summary: pd.DataFrame, library: str) -> pd.DataFrame:
    """The exhaustive results of ``library``: one row per timed ``native:*`` cell (status ok or
    not-converged, finite positive mean, delay none; ``native:auto`` kept, as in the AUTO-vs-BEST
    table; ``native:tuned`` and the autotuner, which follow a tuning rather than a forced
    algorithm, left out), sorted by point and algorithm, with the point's BEST algorithm and
    time (``best_algorithm``, ``best_mean``, from ``best.fastest``)."""
    native = native_rows(summary, library)
    timed = native[timed_mask(native)].copy()
    if timed.empty:
        found = native["status"].value_counts().to_dict()
        raise ValueError(f"summary: no timed native:* rows of library {library!r} (found "
                         f"{len(native)} native rows without delay, statuses {found}); expected "
                         f"rows with status ok or not-converged and a finite mean > 0")
    for column in ["procs", "nodes", "size"]:
        timed[column] = positive_numbers(timed, column).astype(int)
    timed["n"] = repetitions(timed)  # over every launch of a replicated cell
    timed["mean"] = pd.to_numeric(timed["mean"], errors="coerce")
    bad_n = ~(timed["n"] >= 1)
    if bad_n.any():
        raise ValueError(f"summary: n (repetitions) of {int(bad_n.sum())} timed rows is "
                         f"{timed.loc[bad_n, 'n'].head(3).tolist()}, expected a count >= 1")
    refuse_repeated_cells(timed, library)
    return with_best(timed)


def with_best(timed: pd.DataFrame) -> pd.DataFrame:
    """``timed`` (one row per cell) with each point's BEST algorithm and time, as a truth
    table (``TABLE_COLUMNS``, sorted by cell)."""
    # BEST per point, from the columns that decide it (fewer columns: a faster sort)
    best = {key: fastest(group) for key, group in timed[[*CELL, "status", "mean"]].groupby(POINT)}
    timed = timed.assign(
        best_algorithm=[best[k]["algorithm"] for k in zip(*(timed[c] for c in POINT))],
        best_mean=[float(best[k]["mean"]) for k in zip(*(timed[c] for c in POINT))])
    return timed[TABLE_COLUMNS].sort_values(CELL, kind="stable").reset_index(drop=True)


def pooled(tables: list) -> pd.DataFrame:
    """Several campaigns' truth tables of the same cells as one: the cells every table timed,
    each with the mean of the tables' times (every campaign weighs the same, whatever its
    repetitions), the repetitions summed, status ``ok`` only where every table has it, and
    BEST decided again. A judge pooled from two campaigns has half the launch-to-launch
    variance of either."""
    tables = [checked_table(t) for t in tables]
    if len(tables) == 1:
        return tables[0]
    every = pd.concat([t.assign(_ok=t["status"] == "ok") for t in tables], ignore_index=True)
    cells = every.groupby(CELL, sort=True).agg(
        library=("library", "first"), dtype=("dtype", "first"), n=("n", "sum"),
        mean=("mean", "mean"), ok=("_ok", "all"), tables=("mean", "size")).reset_index()
    cells = cells[cells["tables"] == len(tables)]
    if cells.empty:
        raise ValueError(f"tables: got {len(tables)} truth tables without a cell in common, "
                         f"expected campaigns of the same cells")
    cells["status"] = np.where(cells["ok"], "ok", "not-converged")
    return with_best(cells.drop(columns=["ok", "tables"]))


def checked_table(table: pd.DataFrame) -> pd.DataFrame:
    """A truth table as ``truth`` makes it (ValueError naming what is missing)."""
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"truth_table: got {type(table).__name__}, expected the DataFrame "
                         f"of truth(summary, library)")
    check_columns(table, TABLE_COLUMNS, "truth_table")
    if table.empty:
        raise ValueError("truth_table: got no rows, expected the cells of truth(summary, library)")
    return table.reset_index(drop=True)


def held_out_points(table: pd.DataFrame, held_out) -> pd.DataFrame | None:
    """The held-out points as a frame of (procs, nodes, size); None for all points."""
    if held_out is None:
        return None
    if not isinstance(held_out, pd.DataFrame):
        raise ValueError(f"held_out: got {type(held_out).__name__}, expected a DataFrame with "
                         f"columns {POINT}")
    check_columns(held_out, POINT, "held_out")
    known = set(table[POINT].itertuples(index=False, name=None))
    asked = set(held_out[POINT].itertuples(index=False, name=None))
    if not asked or asked - known:
        raise ValueError(f"held_out: got points {sorted(asked - known)[:3] or 'none'} not in the "
                         f"truth table, expected points (procs, nodes, size) of it")
    return held_out[POINT].drop_duplicates()


def judged(chosen: np.ndarray, exhaustive: np.ndarray, judge: np.ndarray) -> dict:
    """Choices per point (algorithm indices) timed in another campaign's measurements
    ``judge`` (points x algorithms): the mean regret t_judge(chosen) / t_judge(its BEST) - 1 and
    the mean cost t_judge(chosen) / t_judge(the exhaustive campaign's choice) - 1, over the
    points where the judge timed the algorithms concerned."""
    rows = np.arange(len(chosen))
    with np.errstate(all="ignore"):
        best = np.nanmin(np.where(np.isnan(judge).all(axis=1)[:, None], np.inf, judge), axis=1)
        regret = judge[rows, chosen] / best - 1.0
        cost = judge[rows, chosen] / judge[rows, exhaustive] - 1.0
    regret, cost = regret[np.isfinite(regret)], cost[np.isfinite(cost)]
    return {"judged_regret": float(regret.mean()) if len(regret) else float("nan"),
            "judged_cost": float(cost.mean()) if len(cost) else float("nan")}


def evaluate(table: pd.DataFrame, measured: pd.DataFrame, targets: pd.DataFrame,
             trees: int = TREES, seed: int = FOREST_SEED, judge: pd.DataFrame | None = None,
             surrogate: str = DEFAULT_SURROGATE) -> dict:
    """The curve row after a batch: cells and machine time of ``measured``, the true regret of
    the surrogate's winners at the points of ``targets`` (cells of the truth table) and its
    predicted regret there; with ``judge`` (the truth table of another campaign of the same
    cells), the same winners timed in it (``judged``; NaN without one)."""
    algorithms = sorted(set(table["algorithm"]))
    points, times = forecast(measured, targets, algorithms, trees, seed, surrogate)
    said = verdict(times)
    true = time_matrix(targets, points, algorithms)
    regret = true[np.arange(len(points)), said.winner] / np.nanmin(true, axis=1) - 1.0
    against = ({"judged_regret": float("nan"), "judged_cost": float("nan")} if judge is None else
               judged(said.winner, np.nanargmin(true, axis=1),
                      time_matrix(judge, points, algorithms)))
    return {"cells": len(measured),
            "machine_time": float((measured["n"] * measured["mean"]).sum()),
            "mean_regret": float(regret.mean()), "worst_regret": float(regret.max()),
            "predicted_regret": float(said.regret.mean()),
            "predicted_regret_q95": said.mean_regret_upper(), **against}


def exhaustive_judged(truth_table: pd.DataFrame, judge: pd.DataFrame) -> dict:
    """The exhaustive campaign's own choice (its BEST at every point) timed in ``judge``: its
    mean regret there (``judged_regret``; what measuring everything once reaches in another
    campaign's launches) and the points both campaigns timed."""
    table, other = checked_table(truth_table), checked_judge(truth_table, judge)
    algorithms = sorted(set(table["algorithm"]))
    points, _ = layout(table)
    true = time_matrix(table, points, algorithms)
    best = np.nanargmin(true, axis=1)
    judge_times = time_matrix(other, points, algorithms)
    common = np.isfinite(judge_times[np.arange(len(points)), best])
    return {**judged(best, best, judge_times), "points": int(common.sum())}


def checked_judge(table: pd.DataFrame, judge) -> pd.DataFrame:
    """``judge`` as a truth table sharing cells with ``table`` (ValueError otherwise)."""
    if not isinstance(judge, pd.DataFrame):
        raise ValueError(f"judge: got {type(judge).__name__}, expected the DataFrame of "
                         f"truth(summary, library) of another campaign")
    check_columns(judge, TABLE_COLUMNS, "judge")
    if not table.set_index(CELL).index.isin(judge.set_index(CELL).index).any():
        raise ValueError(f"judge: got {len(judge)} cells, none of them a cell (procs, nodes, "
                         f"size, algorithm) of the truth table; expected another campaign of "
                         f"the same matrix")
    return judge.reset_index(drop=True)


def cells_at(table: pd.DataFrame, points: pd.DataFrame) -> pd.Series:
    """Which rows of ``table`` lie at one of ``points``."""
    return table.set_index(POINT).index.isin(points.set_index(POINT).index)


def chosen_rows(pool: pd.DataFrame, chosen, want: int, name: str) -> list:
    """The pool labels of the cells a policy chose (at most ``want``, each once)."""
    if not isinstance(chosen, pd.DataFrame):
        raise ValueError(f"policy {name}: returned {type(chosen).__name__}, expected a DataFrame "
                         f"of candidate cells")
    check_columns(chosen, CELL, f"policy {name}")
    label = {k: i for i, k in zip(pool.index, pool[CELL].itertuples(index=False, name=None))}
    found = list(dict.fromkeys(label.get(k) for k in chosen[CELL].itertuples(index=False, name=None)))
    if None in found or not found:
        raise ValueError(f"policy {name}: chose {len(chosen)} cells, {found.count(None)} of them "
                         f"not candidates; expected 1 to {want} cells not measured yet")
    return found[:want]


def replay(truth_table: pd.DataFrame, policy, batch: int, budget: int, seed: int,
           held_out: pd.DataFrame | None = None, trees: int = TREES, until=None,
           judge: pd.DataFrame | None = None, surrogate: str = DEFAULT_SURROGATE) -> pd.DataFrame:
    """Measure (look up) the cells ``policy`` chooses, ``batch`` at a time, until ``budget``
    cells are measured (or all of them are), or until ``until(curve row)`` is true (``stop``:
    the adaptive stopping rule); after each batch, the surrogate's winners at the held-out
    points (all points by default; else the given points, never measured), and with ``judge``
    (another campaign's truth table of the same cells) those winners timed there. One row per
    batch: ``CURVE_COLUMNS``. The same seed gives the same curve."""
    table = checked_table(truth_table)
    if judge is not None:
        judge = checked_judge(table, judge)
    if not callable(policy):
        raise ValueError(f"policy: got {policy!r}, expected a function such as one of "
                         f"{sorted(POLICIES)}")
    batch, budget = whole(batch, "batch"), whole(budget, "budget")
    seed = whole(seed, "seed", least=0)
    surrogate = checked_surrogate(surrogate)
    held = held_out_points(table, held_out)
    targets = table if held is None else table[cells_at(table, held)]
    pool = table if held is None else table[~cells_at(table, held)]
    if pool.empty:
        raise ValueError("held_out: got every point of the truth table, expected some points "
                         "left to measure")
    name = getattr(policy, "__name__", getattr(getattr(policy, "func", None), "__name__", "?"))
    rng = np.random.default_rng(seed)
    measured: list = []
    curve = []
    while len(measured) < min(budget, len(pool)):
        want = min(batch, budget - len(measured))
        open_cells = pool.drop(index=measured)
        chosen = policy(open_cells[CANDIDATE_COLUMNS], table.loc[measured, MEASURED_COLUMNS], rng, want)
        measured += chosen_rows(open_cells, chosen, want, name)
        row = evaluate(table, table.loc[measured, MEASURED_COLUMNS], targets, trees, seed, judge,
                       surrogate)
        curve.append({"batch": len(curve) + 1, **row})
        if until is not None and until(curve[-1]):
            break
    return pd.DataFrame(curve, columns=CURVE_COLUMNS)


def stop(curve_row, target: float = TARGET) -> bool:
    """The adaptive stopping rule: the surrogate is 95 % sure that its mean regret is below
    ``target`` (the upper 95 % quantile over trees of the mean predicted regret)."""
    upper = float(curve_row["predicted_regret_q95"])
    return bool(np.isfinite(upper) and upper < target)


STOP_ROUNDS = 2  # the rule must hold after this many batches in a row: after the seed cells
# alone a forest fitted on a few corners can be unanimous, and wrong, everywhere between them


def fired(curve: pd.DataFrame, target: float = TARGET, rounds: int = STOP_ROUNDS) -> int | None:
    """Position of the first row of ``curve`` where ``stop`` has held for ``rounds`` rows in a
    row (the adaptive driver's stopping point); None when it never does."""
    run = 0
    for i, (_, row) in enumerate(curve.iterrows()):
        run = run + 1 if stop(row, target) else 0
        if run >= rounds:
            return i
    return None


def reach(curve: pd.DataFrame, target: float = TARGET) -> dict | None:
    """The first cells count and machine time at which the mean regret is <= ``target``;
    None when the curve never gets there."""
    check_columns(curve, ["cells", "machine_time", "mean_regret"], "curve")
    if not (isinstance(target, (int, float)) and target >= 0):
        raise ValueError(f"target: got {target!r}, expected a regret >= 0 (0.05 for 5 %)")
    there = curve[curve["mean_regret"] <= target]
    if there.empty:
        return None
    first = there.iloc[0]
    return {"cells": int(first["cells"]), "machine_time": float(first["machine_time"])}


def exhaustive(truth_table: pd.DataFrame) -> dict:
    """What the exhaustive campaign measured: every cell, and their machine time."""
    table = checked_table(truth_table)
    return {"cells": len(table), "machine_time": float((table["n"] * table["mean"]).sum())}


def leave_one_p_out(truth_table: pd.DataFrame, budget: int, seed: int, policy=random_cells,
                    batch: int | None = None, trees: int = TREES,
                    surrogate: str = DEFAULT_SURROGATE) -> pd.DataFrame:
    """Per P: measure up to ``budget`` cells of the other P values (all of them when the budget
    covers them; ``policy`` picks otherwise, ``batch`` at a time, default all at once) and
    give the regret of the surrogate's winners at the held-out P (mean and worst)."""
    table = checked_table(truth_table)
    budget = whole(budget, "budget")
    procs = sorted(table["procs"].unique())
    if len(procs) < 2:
        raise ValueError(f"truth_table: got process counts {procs}, expected at least two to "
                         f"hold one out")
    rows = []
    for p in procs:
        held = table.loc[table["procs"] == p, POINT].drop_duplicates()
        others = int((table["procs"] != p).sum())
        curve = replay(table, policy, batch or min(budget, others), budget, seed, held, trees,
                       surrogate=surrogate)
        last = curve.iloc[-1]
        rows.append({"procs": int(p), "cells": int(last["cells"]),
                     "mean_regret": last["mean_regret"], "worst_regret": last["worst_regret"],
                     "predicted_regret": last["predicted_regret"]})
    return pd.DataFrame(rows)
