"""The Gaussian-process surrogate (harness/analysis/gaussian.py) and the choice of surrogate
(harness/analysis/forecast.py) on the synthetic summaries of test_regret.py (no MPI)."""

import numpy as np
import pytest

from harness.analysis import forecast, gaussian, policies, regret, surrogate
from test_regret import ALGORITHMS, CELLS, FEW_TREES, SIZES, needed_cells, synthetic


@pytest.fixture(scope="module")
def table():
    return regret.truth(synthetic(), "mpich")


def at_p(table, procs):
    return table[table["procs"] == procs].reset_index(drop=True)


def test_it_predicts_unmeasured_sizes_from_the_measured_ones(table):
    one_p = at_p(table, 8)
    measured = one_p[one_p["size"].isin(SIZES[::2])]  # every other size, every algorithm
    held = one_p[~one_p["size"].isin(SIZES[::2])]
    model = gaussian.GaussianSurrogate(ALGORITHMS, trees=50, seed=1).fit(measured)
    points = held.drop_duplicates(regret.POINT)[[*regret.POINT, "dtype"]]
    draws = model.predict(points, ALGORITHMS)
    assert draws.shape == (50, len(points), len(ALGORITHMS)) and np.isfinite(draws).all()
    # the posterior median is within 15 % of every held-out time (the data: 3 % noise)
    guess = np.median(draws, axis=0)
    truth = regret.time_matrix(held, points, ALGORITHMS)
    assert np.abs(np.log(guess / truth)).max() < np.log(1.15)
    # and its winners cost little against the true best
    said = surrogate.verdict(draws)
    chosen = truth[np.arange(len(points)), said.winner]
    assert (chosen / truth.min(axis=1) - 1).mean() < 0.05


def test_its_uncertainty_grows_away_from_the_measured_cells(table):
    one_p = at_p(table, 8)
    measured = one_p[one_p["size"] <= 2**14]  # the small half only
    model = gaussian.GaussianSurrogate(ALGORITHMS, trees=200, seed=1).fit(measured)
    points = one_p.drop_duplicates(regret.POINT)[[*regret.POINT, "dtype"]]
    spread = np.log(model.predict(points, ALGORITHMS)).std(axis=0).mean(axis=1)  # per point
    sizes = points["size"].to_numpy()
    near, far = spread[sizes <= 2**14].mean(), spread[sizes >= 2**22].mean()
    assert far > 5 * near, (near, far)
    # the draws are of the mean time, not of one more noisy launch: at a measured cell their
    # spread is below the fitted launch-to-launch scatter
    assert near < np.sqrt(model.noise())


def test_the_same_cells_and_seed_give_the_same_draws(table):
    cells = at_p(table, 6).iloc[::3]
    points = at_p(table, 6).drop_duplicates(regret.POINT)[[*regret.POINT, "dtype"]]
    a = gaussian.GaussianSurrogate(ALGORITHMS, trees=20, seed=3).fit(cells).predict(points)
    b = gaussian.GaussianSurrogate(ALGORITHMS, trees=20, seed=3).fit(cells).predict(points)
    np.testing.assert_array_equal(a, b)
    other = gaussian.GaussianSurrogate(ALGORITHMS, trees=20, seed=3).fit(at_p(table, 6).iloc[1::3])
    assert not np.array_equal(other.predict(points), a)  # other cells: another fit, not the last


def test_bad_use_is_refused_with_the_reason(table):
    with pytest.raises(ValueError, match="algorithms: got an empty list"):
        gaussian.GaussianSurrogate([])
    with pytest.raises(ValueError, match="draws: got 0"):
        gaussian.GaussianSurrogate(ALGORITHMS, trees=0)
    with pytest.raises(ValueError, match="not fitted"):
        gaussian.GaussianSurrogate(ALGORITHMS).predict(table.head(2))
    with pytest.raises(ValueError, match="got no measured cells"):
        gaussian.GaussianSurrogate(ALGORITHMS).fit(table.iloc[:0])
    with pytest.raises(ValueError, match=r"surrogate: got 'tree', expected one of \['forest', 'gp'\]"):
        regret.replay(table, regret.random_cells, 8, 8, 0, surrogate="tree")
    with pytest.raises(ValueError, match="surrogate: got 'svm'"):
        policies.adaptive_with(10, "svm")


def test_a_square_root_survives_a_covariance_that_rounding_made_indefinite():
    vectors = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0]
    covariance = vectors @ np.diag([1.0, 0.5, 0.0, -1e-6]) @ vectors.T
    root = gaussian.square_root(covariance)
    np.testing.assert_allclose(root @ root.T, vectors @ np.diag([1.0, 0.5, 0, 0]) @ vectors.T,
                               atol=1e-6)


def test_forecast_lays_the_measurements_over_either_surrogate(table):
    cells = at_p(table, 4)
    measured = cells.iloc[::2][regret.MEASURED_COLUMNS]
    for name in forecast.SURROGATES:
        points, times = forecast.forecast(measured, cells, ALGORITHMS, trees=10, surrogate=name)
        known = regret.time_matrix(measured, points, ALGORITHMS)
        where = ~np.isnan(known)
        assert (times[:, where] == known[where]).all()  # every draw keeps the measured time


def test_the_adaptive_policy_with_the_gaussian_process_reaches_five_percent_in_a_quarter(table):
    quarter = CELLS // 4
    policy = policies.adaptive_with(FEW_TREES, "gp")
    used = [needed_cells(table, policy, quarter, s, surrogate="gp") for s in (0, 1)]
    assert max(used) <= quarter, used
