"""Which cells to measure next: the selection policies of a replay and of the adaptive driver.

A policy is a function ``policy(candidates, measured, rng, batch)`` returning up to ``batch``
rows of ``candidates`` (cells not measured yet; measured cells carry n and mean):

- ``adaptive`` measures the two likeliest winners where the surrogate is least sure of the
  winner and, for a share of the points it picks (the surrogate's ``EXPLORE``: half with the
  forest, none with the Gaussian process), every algorithm where nothing was measured nearby
  (the forest's trees are confidently wrong where they all extrapolate from the same far
  cells); it uses the surrogate named by its ``surrogate`` argument (``forecast``);
- ``random_cells`` measures cells uniformly at random;
- ``grid`` measures every algorithm at every other size first, then the rest.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from .forecast import (CANDIDATE_COLUMNS, CELL, DEFAULT_SURROGATE, POINT, SURROGATES,
                       checked_surrogate, forecast)
from .surrogate import TREES, top_two_share, verdict


def seed_cells(candidates: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The space-filling start still to measure: every algorithm at the smallest and largest P
    and at the smallest, middle and largest size."""
    sizes = np.sort(cells["size"].unique())
    corners = {sizes[0], sizes[len(sizes) // 2], sizes[-1]}
    procs = {cells["procs"].min(), cells["procs"].max()}
    return candidates[candidates["procs"].isin(procs) & candidates["size"].isin(corners)]


def open_cells(candidates: pd.DataFrame, points: pd.DataFrame, algorithms) -> dict:
    """(point index, algorithm index) -> label in ``candidates`` of every cell not measured."""
    keys = {k: i for i, k in enumerate(points[POINT].itertuples(index=False, name=None))}
    order = {a: i for i, a in enumerate(algorithms)}
    return {(keys[k[:3]], order[k[3]]): label for label, k
            in zip(candidates.index, candidates[CELL].itertuples(index=False, name=None))}


def grid_coordinates(points: pd.DataFrame) -> np.ndarray:
    """Each point's place on the grid of P values x sizes, both ranks scaled to [0, 1]."""
    out = []
    for column in ["procs", "size"]:
        rank = points[column].rank(method="dense").to_numpy() - 1
        out.append(rank / max(rank.max(), 1))
    return np.column_stack(out)


def farthest(coordinates: np.ndarray, covered: np.ndarray, eligible: np.ndarray) -> int | None:
    """The eligible point farthest from every covered point (None when none is eligible)."""
    if not eligible.any():
        return None
    if not covered.any():
        return int(np.flatnonzero(eligible)[0])
    gap = np.linalg.norm(coordinates[:, None, :] - coordinates[None, covered, :], axis=2).min(axis=1)
    return int(np.argmax(np.where(eligible, gap, -1.0)))


def adaptive(candidates: pd.DataFrame, measured: pd.DataFrame, rng, batch: int,
             trees: int = TREES, explore: float | None = None,
             surrogate: str = DEFAULT_SURROGATE) -> pd.DataFrame:
    """The seed set first; then point by point: the unmeasured algorithms that the trees rank
    in the top two at the point where the predicted winner is least certain (lowest win
    probability, then highest predicted regret) or, for a share ``explore`` of the points,
    every unmeasured algorithm at the point farthest from every measured one (where the trees
    all extrapolate from the same far cells, they agree, and may all be wrong); random cells
    if that is too few. Measuring a whole point tells the forest how the algorithms compare
    there, which carries over to its neighbours. ``explore`` defaults to the surrogate's own
    share (its class's ``EXPLORE``)."""
    surrogate = checked_surrogate(surrogate)
    explore = SURROGATES[surrogate].EXPLORE if explore is None else float(explore)
    seed = seed_cells(candidates, pd.concat([candidates, measured]))
    if len(seed) or measured.empty:
        return (seed if len(seed) else random_cells(candidates, measured, rng, batch)).head(batch)
    cells = pd.concat([candidates[CANDIDATE_COLUMNS], measured[CANDIDATE_COLUMNS]])
    algorithms = sorted(set(cells["algorithm"]))
    forest_seed = int(rng.integers(2**31))  # a seed of its own per batch, from the replay's
    points, times = forecast(measured, cells, algorithms, trees, forest_seed, surrogate)
    said, share = verdict(times), top_two_share(times)
    unmeasured = open_cells(candidates, points, algorithms)
    coordinates = grid_coordinates(points)
    measured_keys = set(measured[POINT].itertuples(index=False, name=None))
    covered = np.array([k in measured_keys for k in points[POINT].itertuples(index=False, name=None)])
    uncertain = [int(p) for p in np.lexsort((-said.regret, said.win_probability))
                 if said.win_probability[p] < 1.0]
    eligible = np.zeros(len(points), dtype=bool)
    eligible[[p for p, _ in unmeasured]] = True
    picked: list = []
    turn = 0
    while len(picked) < batch:
        exploring = int((turn + 1) * explore) > int(turn * explore)
        uncertain = [p for p in uncertain if eligible[p]]
        p = farthest(coordinates, covered, eligible) if exploring or not uncertain else uncertain[0]
        if p is None:
            break
        ranked = [a for a in np.argsort(-share[p], kind="stable")
                  if (p, a) in unmeasured and (share[p, a] > 0 or exploring)]
        picked += [unmeasured[(p, a)] for a in (ranked if exploring else ranked[:2])]
        eligible[p], covered[p], turn = False, True, turn + 1
    chosen = candidates.loc[picked[:batch]]
    if len(chosen) < batch:
        rest = candidates.drop(index=chosen.index)
        chosen = pd.concat([chosen, random_cells(rest, measured, rng, batch - len(chosen))])
    return chosen


def random_cells(candidates: pd.DataFrame, measured: pd.DataFrame, rng, batch: int) -> pd.DataFrame:
    """``batch`` candidate cells drawn uniformly without replacement."""
    take = rng.choice(len(candidates), size=min(batch, len(candidates)), replace=False)
    return candidates.iloc[np.sort(take)]


GRID_SEED = 7  # the grid visits its points in one fixed shuffled order, the same every replay


def grid(candidates: pd.DataFrame, measured: pd.DataFrame, rng, batch: int) -> pd.DataFrame:
    """A fixed coarse grid first (every algorithm at every other size, every P), then the other
    cells; points in a fixed shuffled order within each stage, a point's algorithms together."""
    cells = pd.concat([candidates[CANDIDATE_COLUMNS], measured[CANDIDATE_COLUMNS]])
    sizes = np.sort(cells["size"].unique())
    points = cells.drop_duplicates(POINT).sort_values(POINT)[POINT].reset_index(drop=True)
    shuffled = np.random.default_rng(GRID_SEED).permutation(len(points))
    visit = {tuple(p): int(shuffled[i]) for i, p in enumerate(points.itertuples(index=False))}
    coarse = candidates["size"].isin(sizes[::2])
    order = pd.DataFrame({"stage": np.where(coarse, 0, 1),
                          "visit": [visit[tuple(p)] for p in candidates[POINT].itertuples(index=False)],
                          "algorithm": candidates["algorithm"].to_numpy()}, index=candidates.index)
    return candidates.loc[order.sort_values(["stage", "visit", "algorithm"]).index[:batch]]


POLICIES = {"adaptive": adaptive, "random": random_cells, "grid": grid}



def adaptive_with(trees: int, surrogate: str = DEFAULT_SURROGATE):
    """The adaptive policy with ``trees`` draws (trees) of the surrogate named ``surrogate``
    (fewer draws: faster, less sure)."""
    return partial(adaptive, trees=trees, surrogate=checked_surrogate(surrogate))
