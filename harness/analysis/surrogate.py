"""A random-forest surrogate of allreduce times, for choosing which cells to measure.

The exhaustive campaign measures every algorithm at every (P, message size) point; active
learning (``harness.analysis.regret``) measures a part of them and lets a model guess the rest.
The model is a scikit-learn ``RandomForestRegressor`` per library, fitted on log(mean time)
of the measured cells against a few numeric features of the cell (``features``): log2 P,
log2 size, nodes, ranks per node, element bytes, whether P is a power of two, and the
algorithm as a one-hot column.

Why a forest: its trees disagree where the data is thin, and that disagreement is the
uncertainty the selection needs. ``Surrogate.predict`` returns every tree's time for every
algorithm at every point; ``verdict`` turns those into, per point, the predicted winner (the
lowest mean log time over trees), the probability that it is truly best (the share of trees
in which it is the fastest) and the predicted regret of choosing it (over trees,
t(winner) / min_a t(a) - 1: its mean and upper 95 % quantile).

Times already measured can be laid over the trees' guesses (``overlay``), so a point whose
algorithms were all measured is decided by its measurements, with win probability 1 and
predicted regret 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

TREES = 200
FOREST_SEED = 20261126  # fixed: the same measured cells always give the same forest
UPPER = 0.95  # the quantile over trees that bounds a predicted regret
# P a power of two is a feature of its own: recursive doubling, recursive halving and
# Rabenseifner take extra steps at other P, so P = 6 and 12 behave alike and unlike 8
NUMERIC_FEATURES = ["log2_procs", "log2_size", "nodes", "ranks_per_node", "element_bytes",
                    "procs_power_of_two"]
FEATURE_INPUT = ["procs", "nodes", "size", "dtype", "algorithm"]


def element_bytes(dtype) -> int:
    """Bytes of one element of ``dtype`` (float32/int32: 4, float64/int64: 8)."""
    try:
        return int(np.dtype(str(dtype)).itemsize)
    except TypeError as err:
        raise ValueError(f"dtype: got {dtype!r}, expected a numeric type name such as "
                         f"float32, float64, int32 or int64") from err


def check_columns(frame: pd.DataFrame, needed, what: str) -> None:
    """ValueError naming the columns of ``needed`` that ``frame`` lacks."""
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: missing columns {missing}; found {list(frame.columns)}, "
                         f"expected at least {list(needed)}")


def positive_numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    """The column as floats, all of them finite and > 0 (ValueError otherwise)."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        raise ValueError(f"{column}: got {frame[column].to_numpy()[bad][:3].tolist()}, "
                         f"expected finite numbers > 0")
    return values


def features(frame: pd.DataFrame, algorithms) -> np.ndarray:
    """The feature matrix of summary rows (one row per row of ``frame``): the columns of
    ``NUMERIC_FEATURES`` (log2 P, log2 size, nodes, ranks per node, element bytes, 1 if P is a
    power of two), then one 0/1 column per entry of ``algorithms`` (in that order, so a matrix
    for fitting and one for predicting agree)."""
    check_columns(frame, FEATURE_INPUT, "features")
    algorithms = list(algorithms)
    unknown = sorted(set(frame["algorithm"]) - set(algorithms))
    if unknown:
        raise ValueError(f"algorithm: got {unknown}, expected one of {algorithms}")
    procs = positive_numbers(frame, "procs")
    nodes = positive_numbers(frame, "nodes")
    size = positive_numbers(frame, "size")
    elements = np.array([element_bytes(d) for d in frame["dtype"]], dtype=float)
    onehot = (frame["algorithm"].to_numpy()[:, None] == np.array(algorithms)[None, :])
    whole_procs = procs.astype(np.int64)
    power_of_two = (whole_procs == procs) & ((whole_procs & (whole_procs - 1)) == 0)
    numeric = np.column_stack([np.log2(procs), np.log2(size), nodes, procs / nodes, elements,
                               power_of_two.astype(float)])
    return np.hstack([numeric, onehot.astype(float)])


def cross(points: pd.DataFrame, algorithms) -> pd.DataFrame:
    """Every point paired with every algorithm: point-major, algorithms in the given order."""
    algorithms = list(algorithms)
    repeated = points.loc[points.index.repeat(len(algorithms))].reset_index(drop=True)
    return repeated.assign(algorithm=algorithms * len(points))


class Surrogate:
    """A random forest of log(mean time) over the features of the measured cells of one
    library. ``algorithms`` fixes the one-hot columns (every algorithm that may be asked for,
    measured or not)."""

    TITLE = "random forest"  # in captions and figure titles
    # the adaptive policy's share of points explored (the farthest from the measured): where
    # every tree extrapolates from the same far cells they agree, and may all be wrong; on the
    # synthetic data of tests/test_regret.py, 0 and 1 needed 1.3 to 2 times as many cells
    EXPLORE = 0.5

    def __init__(self, algorithms, trees: int = TREES, seed: int = FOREST_SEED):
        self.algorithms = list(algorithms)
        if not self.algorithms:
            raise ValueError("algorithms: got an empty list, expected at least one algorithm")
        if int(trees) < 1:
            raise ValueError(f"trees: got {trees!r}, expected an integer >= 1")
        from sklearn.ensemble import RandomForestRegressor  # a second to import: only when built

        self.forest = RandomForestRegressor(n_estimators=int(trees), min_samples_leaf=1,
                                            random_state=seed, n_jobs=1)
        self.fitted = False

    def fit(self, cells: pd.DataFrame) -> Surrogate:
        """Fit to ``cells`` (summary rows with a ``mean`` time in seconds); returns self."""
        if len(cells) == 0:
            raise ValueError("cells: got no measured cells, expected at least one to fit")
        target = np.log(positive_numbers(cells, "mean"))
        self.forest.fit(features(cells, self.algorithms), target)
        self.fitted = True
        return self

    def predict(self, points: pd.DataFrame, algorithms=None) -> np.ndarray:
        """Every tree's predicted time (seconds) of every algorithm at every point: an array of
        shape (trees, points, algorithms); ``algorithms`` defaults to the fitted list."""
        if not self.fitted:
            raise ValueError("surrogate: not fitted, expected fit(cells) before predict")
        algorithms = self.algorithms if algorithms is None else list(algorithms)
        if len(points) == 0:
            return np.empty((len(self.forest.estimators_), 0, len(algorithms)))
        grid = features(cross(points.reset_index(drop=True), algorithms), self.algorithms)
        logs = np.stack([tree.predict(grid) for tree in self.forest.estimators_])
        return np.exp(logs.reshape(len(self.forest.estimators_), len(points), len(algorithms)))


def overlay(tree_times: np.ndarray, known: np.ndarray, available: np.ndarray | None = None) -> np.ndarray:
    """``tree_times`` with the measured times laid over every tree (``known``: points x
    algorithms, NaN where not measured) and +inf where an algorithm is not a choice at a
    point (``available`` False)."""
    out = np.where(np.isnan(known)[None, :, :], tree_times, known[None, :, :])
    if available is not None:
        out = np.where(available[None, :, :], out, np.inf)
    return out


@dataclass
class Verdict:
    """Per point: the predicted winner (an algorithm index), the share of trees in which it is
    the fastest, its predicted regret (mean over trees) and that regret's upper quantile;
    ``tree_regret`` (trees x points) keeps every tree's regret for aggregates."""

    winner: np.ndarray
    win_probability: np.ndarray
    regret: np.ndarray
    regret_upper: np.ndarray
    tree_regret: np.ndarray

    def frame(self, algorithms) -> pd.DataFrame:
        """The verdict as a table, one row per point, the winner by name."""
        return pd.DataFrame({"winner": np.array(list(algorithms), dtype=object)[self.winner],
                             "win_probability": self.win_probability,
                             "predicted_regret": self.regret,
                             "predicted_regret_q95": self.regret_upper})

    def mean_regret_upper(self) -> float:
        """The upper quantile over trees of the predicted regret averaged over the points."""
        if self.tree_regret.shape[1] == 0:
            return float("nan")
        return float(np.quantile(self.tree_regret.mean(axis=1), UPPER))


def verdict(tree_times: np.ndarray) -> Verdict:
    """Winner, win probability and predicted regret per point of ``tree_times`` (trees x
    points x algorithms; +inf for an algorithm that is no choice at a point). Equal scores go
    to the algorithm listed first."""
    if tree_times.ndim != 3 or tree_times.shape[2] == 0:
        raise ValueError(f"tree_times: got shape {tree_times.shape}, expected (trees, points, "
                         f"algorithms) with at least one algorithm")
    finite_any = np.isfinite(tree_times).any(axis=(0, 2))
    if not finite_any.all():
        raise ValueError(f"tree_times: {int((~finite_any).sum())} points have no finite time, "
                         f"expected at least one available algorithm per point")
    with np.errstate(divide="ignore"):
        score = np.log(tree_times).mean(axis=0)  # points x algorithms; +inf if unavailable
    winner = np.argmin(score, axis=1)
    points = np.arange(tree_times.shape[1])
    fastest = tree_times.min(axis=2)  # trees x points
    chosen = tree_times[:, points, winner]  # trees x points
    tree_regret = chosen / fastest - 1.0
    return Verdict(winner=winner,
                   win_probability=(chosen <= fastest).mean(axis=0),
                   regret=tree_regret.mean(axis=0),
                   regret_upper=np.quantile(tree_regret, UPPER, axis=0),
                   tree_regret=tree_regret)


def top_two_share(tree_times: np.ndarray) -> np.ndarray:
    """Per point and algorithm, the share of trees that rank the algorithm first or second
    (points x algorithms); an unavailable (+inf) algorithm gets 0."""
    ranks = np.argsort(np.argsort(tree_times, axis=2, kind="stable"), axis=2, kind="stable")
    share = (ranks < 2).mean(axis=0)
    return np.where(np.isfinite(tree_times).all(axis=0), share, 0.0)
