"""A truth table's cells as the surrogate sees them: the points, the time matrix, the forecast.

A cell is one algorithm at one point (P, nodes, message size); a point's cells are the
choices there. ``layout`` gives the points of a set of cells, ``time_matrix`` their measured
times as points x algorithms, ``forecast`` the surrogate's guesses at every point with the
measured times laid over them. The surrogate is one of ``SURROGATES``: the random forest
(``surrogate.Surrogate``, the default) or the Gaussian process (``gaussian.GaussianSurrogate``);
both give ``trees`` draws of every algorithm's time at every point, which ``verdict`` and the
policies (``policies``) read alike.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .gaussian import GaussianSurrogate
from .surrogate import FOREST_SEED, TREES, Surrogate, overlay

POINT = ["procs", "nodes", "size"]
CELL = [*POINT, "algorithm"]
CANDIDATE_COLUMNS = [*CELL, "dtype"]
MEASURED_COLUMNS = [*CANDIDATE_COLUMNS, "n", "mean"]
SURROGATES = {"forest": Surrogate, "gp": GaussianSurrogate}  # both import scikit-learn when built
DEFAULT_SURROGATE = "forest"


def checked_surrogate(name) -> str:
    """``name`` if it is a key of ``SURROGATES`` (ValueError naming the choices otherwise)."""
    if name not in SURROGATES:
        raise ValueError(f"surrogate: got {name!r}, expected one of {sorted(SURROGATES)}")
    return name


def layout(cells: pd.DataFrame):
    """The points of ``cells`` (sorted, with their dtype) and each cell's point index."""
    points = cells.drop_duplicates(POINT).sort_values(POINT)[[*POINT, "dtype"]]
    points = points.reset_index(drop=True)
    where = {tuple(p): i for i, p in enumerate(points[POINT].itertuples(index=False))}
    point_of = np.array([where[tuple(p)] for p in cells[POINT].itertuples(index=False)], dtype=int)
    return points, point_of


def forecast(measured: pd.DataFrame, cells: pd.DataFrame, algorithms, trees: int = TREES,
             seed: int = FOREST_SEED, surrogate: str = DEFAULT_SURROGATE):
    """Every draw's (tree's) time of every algorithm at the points of ``cells`` (the choices),
    by the surrogate named ``surrogate`` (``trees`` draws, random state ``seed``) fitted on
    ``measured``, with the measured times laid over them: (points, draw times)."""
    points, point_of = layout(cells)
    order = {a: i for i, a in enumerate(algorithms)}
    available = np.zeros((len(points), len(algorithms)), dtype=bool)
    available[point_of, [order[a] for a in cells["algorithm"]]] = True
    known = np.full(available.shape, np.nan)
    keys = points[POINT].apply(tuple, axis=1).tolist()
    where = {k: i for i, k in enumerate(keys)}
    for row in measured.itertuples(index=False):
        i = where.get((row.procs, row.nodes, row.size))
        if i is not None:
            known[i, order[row.algorithm]] = row.mean
    model = SURROGATES[checked_surrogate(surrogate)](algorithms, trees=trees, seed=seed).fit(measured)
    return points, overlay(model.predict(points, algorithms), known, available)


def time_matrix(cells: pd.DataFrame, points: pd.DataFrame, algorithms) -> np.ndarray:
    """The mean time of ``cells`` at every point x algorithm (NaN where ``cells`` has none)."""
    out = np.full((len(points), len(algorithms)), np.nan)
    where = {k: i for i, k in enumerate(points[POINT].itertuples(index=False, name=None))}
    order = {a: i for i, a in enumerate(algorithms)}
    for row in cells.itertuples(index=False):
        i, j = where.get((row.procs, row.nodes, row.size)), order.get(row.algorithm)
        if i is not None and j is not None:
            out[i, j] = row.mean
    return out


