"""A Gaussian-process surrogate of allreduce times: the forest's alternative (``--surrogate gp``).

The forest (``harness.analysis.surrogate.Surrogate``) predicts an unmeasured cell from the
nearest measured cells that its splits put in the same leaf; where every tree extrapolates
from the same far cells, they agree and all are wrong, which is why the adaptive policy
spends half its points exploring. A Gaussian process instead states how far its knowledge
reaches: its posterior variance grows with the distance from the measured cells, on a
length scale learned from the data.

The model: log(mean time) of a cell is a smooth function of the numeric features of
``surrogate.features`` (log2 P, log2 size, nodes, ranks per node, element bytes, power-of-two
P; the ones constant in the measured cells are left out) and of the algorithm, with one
squared-exponential kernel over all of them, a length scale per feature (ARD), plus white
noise for the launch-to-launch scatter. The algorithm enters as its one-hot column, so the
curves of algorithms a and b correlate by rho_ab = exp(-(1 / l_a^2 + 1 / l_b^2) / 2), l the
algorithm columns' learned length scales (near 1 for two algorithms that behave alike, near 0
for two unrelated ones): a cell measured for one algorithm informs the others at the same and
nearby sizes, and an algorithm's own cells inform its whole curve. The hyperparameters are
fitted by maximum marginal likelihood (scikit-learn's ``GaussianProcessRegressor``) from one
start, so that the fit depends on the cells alone (and the last fit is reused for the same
cells).

``predict`` returns ``draws`` joint samples of the noise-free posterior (the mean time, not a
new noisy launch), exponentiated: the same (draws, points, algorithms) array as the forest's
trees, so ``verdict``, ``overlay`` and the policies use it unchanged.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from .surrogate import FOREST_SEED, NUMERIC_FEATURES, TREES, cross, features, positive_numbers

FEATURE_SCALE = (0.3, 1e3)  # length scales of a numeric feature (log2 units, counts)
ALGORITHM_SCALE = (0.3, 1e2)  # of an algorithm column: rho from 0 (independent) to 1 (equal)
NOISE = (1e-5, 1.0)  # variance of log time between launches (1.0: a factor e^1 = 2.7 typical)
JITTER = 1e-9  # added to the posterior covariance's diagonal before its Cholesky factor
LAST_FIT: dict = {}  # the last fit's cells and process: the policy and the evaluation of a
# replay's batch fit the same cells one after the other


class GaussianSurrogate:
    """A Gaussian process of log(mean time) over the features of the measured cells of one
    library; ``predict`` draws ``draws`` joint posterior samples (the forest's trees)."""

    TITLE = "Gaussian process"  # in captions and figure titles
    # the adaptive policy's share of points explored: none, the posterior's spread already
    # grows away from the measured cells; replayed on three campaigns of
    # config/tuning-truth.yaml, 0 needed fewer cells than 0.5 for Intel MPI and Open MPI in
    # all three, as many for MPICH in two and more in one (docs/tuning.md)
    EXPLORE = 0.0
    MAX_CELLS = 3000  # the fit takes O(n^3) time and O(n^2 x features) memory: 2 min, 1.3 GB
    # at 1500 cells here; beyond this many, the forest

    def __init__(self, algorithms, trees: int = TREES, seed: int = FOREST_SEED):
        self.algorithms = list(algorithms)
        if not self.algorithms:
            raise ValueError("algorithms: got an empty list, expected at least one algorithm")
        if int(trees) < 1:
            raise ValueError(f"draws: got {trees!r}, expected an integer >= 1")
        self.draws, self.seed = int(trees), seed
        self.process = None

    def fit(self, cells: pd.DataFrame) -> GaussianSurrogate:
        """Fit to ``cells`` (summary rows with a ``mean`` time in seconds); returns self."""
        if len(cells) == 0:
            raise ValueError("cells: got no measured cells, expected at least one to fit")
        if len(cells) > self.MAX_CELLS:
            raise ValueError(f"surrogate gp: got {len(cells)} measured cells, expected at most "
                             f"{self.MAX_CELLS} (its fit grows as the cube of the cells); use "
                             f"the forest (--surrogate forest) for a matrix this large")
        from sklearn.exceptions import ConvergenceWarning  # a second to import: only when fitted
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, WhiteKernel
        from sklearn.gaussian_process.kernels import ConstantKernel as Scale

        matrix = features(cells, self.algorithms)
        target = np.log(positive_numbers(cells, "mean"))
        numeric = len(NUMERIC_FEATURES)
        varying = np.flatnonzero(np.ptp(matrix[:, :numeric], axis=0) > 0)
        self.columns = np.r_[varying, numeric + np.arange(len(self.algorithms))]
        scales = np.r_[np.full(len(varying), 3.0), np.full(len(self.algorithms), 1.0)]
        bounds = np.r_[np.tile([FEATURE_SCALE], (len(varying), 1)),
                       np.tile([ALGORITHM_SCALE], (len(self.algorithms), 1))]
        kernel = (Scale(1.0, (1e-3, 1e3)) * RBF(scales, bounds)
                  + WhiteKernel(0.02, NOISE))
        self.offset = float(target.mean())
        key = (tuple(self.algorithms), matrix.tobytes(), target.tobytes())
        if LAST_FIT.get("key") == key:  # a replay fits each set of cells twice: reuse
            self.process = LAST_FIT["process"]
            return self
        # one start from the kernel above: the fit depends on the cells alone
        self.process = GaussianProcessRegressor(kernel, n_restarts_optimizer=0)
        with warnings.catch_warnings():  # a scale at its bound is a finding, not a fault
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.process.fit(matrix[:, self.columns], target - self.offset)
        LAST_FIT.update(key=key, process=self.process)
        return self

    def noise(self) -> float:
        """The fitted variance of log time between launches (the white-noise level)."""
        return float(self.process.kernel_.k2.noise_level)

    def predict(self, points: pd.DataFrame, algorithms=None) -> np.ndarray:
        """``draws`` joint posterior samples of the time (seconds) of every algorithm at every
        point: an array of shape (draws, points, algorithms); ``algorithms`` defaults to the
        fitted list."""
        if self.process is None:
            raise ValueError("surrogate: not fitted, expected fit(cells) before predict")
        algorithms = self.algorithms if algorithms is None else list(algorithms)
        if len(points) == 0:
            return np.empty((self.draws, 0, len(algorithms)))
        grid = features(cross(points.reset_index(drop=True), algorithms), self.algorithms)
        mean, covariance = self.process.predict(grid[:, self.columns], return_cov=True)
        covariance -= self.noise() * np.eye(len(mean))  # the mean time, not one more launch
        normal = np.random.default_rng(self.seed).standard_normal((self.draws, len(mean)))
        logs = mean[None, :] + normal @ square_root(covariance).T + self.offset
        return np.exp(logs).reshape(self.draws, len(points), len(algorithms))


def square_root(covariance: np.ndarray) -> np.ndarray:
    """A matrix L with L L^T = ``covariance`` (Cholesky with a jitter; where rounding leaves
    the matrix indefinite, its eigenvectors scaled by the non-negative eigenvalues)."""
    try:
        return np.linalg.cholesky(covariance + JITTER * np.eye(len(covariance)))
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(covariance)
        return vectors * np.sqrt(np.clip(values, 0.0, None))[None, :]
