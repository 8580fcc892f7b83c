"""Active-learning replay (harness/analysis/regret.py, surrogate.py) on synthetic summaries of
known structure (no MPI): four algorithms whose time is alpha_a * g_a(P) + beta_a * size *
f_a(P) with 3 % multiplicative noise, at P in {2, 3, 4, 6, 8, 12, 16} and every power of two
from 8 B to 64 MiB. The winner changes with size and P: recursive doubling for small messages
at powers of two, binomial for small messages elsewhere, Rabenseifner at medium sizes and
ring for large ones (Rabenseifner up to larger sizes at P = 8, 16)."""

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis import policies, regret, surrogate
from harness.results.store import SUMMARY_COLUMNS
from test_report import row

PROCS = [2, 3, 4, 6, 8, 12, 16]
SIZES = [2**k for k in range(3, 27)]  # 8 B .. 64 MiB
ALGORITHMS = ["native:binomial", "native:rabenseifner", "native:recursive_doubling", "native:ring"]
CELLS = len(PROCS) * len(SIZES) * len(ALGORITHMS)  # 672
FEW_TREES = 40  # the comparisons over seeds replay many batches: a smaller forest, same method


def model_time(algorithm: str, procs: int, size: int) -> float:
    """Noise-free time (s) of one allreduce: latency term + bandwidth term."""
    steps, pof2 = math.ceil(math.log2(procs)), procs & (procs - 1) == 0
    share = 2 * (procs - 1) / procs
    if algorithm == "native:recursive_doubling":
        return 2e-6 * steps * (1 if pof2 else 2.5) + 1.0e-9 * size * steps
    if algorithm == "native:binomial":
        return 4e-6 + 2e-6 * steps + 1.2e-9 * size * steps
    if algorithm == "native:rabenseifner":
        return 2e-6 * (2 * steps + (0 if pof2 else 2)) + 0.5e-9 * size * share * (1 if pof2 else 1.6)
    return 6e-6 * (procs - 1) + 0.45e-9 * size * share  # ring


def synthetic(seed: int = 1, noise: float = 0.03) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [row("mpich", a, s, model_time(a, p, s) * math.exp(noise * rng.standard_normal()), procs=p)
            for p in PROCS for s in SIZES for a in ALGORITHMS]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


@pytest.fixture(scope="module")
def table():
    return regret.truth(synthetic(), "mpich")


def distractors() -> pd.DataFrame:
    """Rows that must never be BEST though faster: wrong, failed, the tuned selection, a delayed
    condition, a harness algorithm, a ping-pong row, another library."""
    fast = 1e-9
    rows = [row("mpich", "native:ring", 8, fast, status="wrong", procs=2),
            row("mpich", "native:ring", 16, fast, status="failed", procs=2),
            row("mpich", "native:tuned", 8, fast, procs=2),
            row("mpich", "native:autotuner", 8, fast, procs=2),
            row("mpich", "native:ring", 8, fast, procs=2, delay="uniform", cell_id="d"),
            row("mpich", "suara_ring", 8, fast, procs=2),
            row("mpich", "pingpong", 8, fast, procs=2),
            row("openmpi", "native:ring", 8, fast, procs=2)]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def test_truth_picks_the_fastest_timed_native_algorithm():
    clean = synthetic()
    noisy = pd.concat([clean, distractors()], ignore_index=True)
    table = regret.truth(noisy, "mpich")
    assert len(table) == CELLS and set(table["algorithm"]) == set(ALGORITHMS)
    for (procs, size), group in clean.groupby(["procs", "size"]):
        want = group.loc[group["mean"].idxmin()]
        got = table[(table["procs"] == procs) & (table["size"] == size)]
        assert set(got["best_algorithm"]) == {want["algorithm"]}, (procs, size)
        assert got["best_mean"].iloc[0] == want["mean"]
    # the structure is as designed: four winners, changing with size and with P
    winners = table.drop_duplicates(["procs", "size"])
    assert set(winners["best_algorithm"]) == set(ALGORITHMS)
    by_p = winners[winners["size"] == 8].set_index("procs")["best_algorithm"]
    assert by_p[4] == "native:recursive_doubling" and by_p[6] == "native:binomial"
    at_8 = winners[winners["procs"] == 8].set_index("size")["best_algorithm"]
    assert at_8[8] == "native:recursive_doubling" and at_8[2**14] == "native:rabenseifner"
    assert at_8[2**26] == "native:ring"


def test_machine_time_counts_the_repetitions_of_every_launch():
    """A replicated cell (stopping.launches > 1) has n = its launch means and within_n = its
    repetitions over every launch: the machine time is repetitions x time, never n x time."""
    rows = [row("mpich", "native:ring", 8, 1e-5, procs=2, launches=3, n=3, within_n=300),
            row("mpich", "native:tree", 8, 2e-5, procs=2, launches=3, n=3, within_n=150),
            row("mpich", "native:ring", 16, 1e-5, procs=2, launches=1, n=40, within_n=None)]
    table = regret.truth(pd.DataFrame(rows, columns=SUMMARY_COLUMNS), "mpich")
    assert sorted(table["n"]) == [40, 150, 300]
    assert regret.exhaustive(table)["machine_time"] == pytest.approx(300e-5 + 150 * 2e-5 + 40e-5)


def test_a_choice_is_judged_against_the_judges_best_and_the_exhaustive_choice():
    judge = np.array([[1.0, 2.0], [4.0, 2.0], [np.nan, np.nan]])
    got = regret.judged(np.array([1, 1, 0]), np.array([0, 0, 0]), judge)
    assert got["judged_regret"] == pytest.approx((1.0 + 0.0) / 2)  # the untimed point left out
    assert got["judged_cost"] == pytest.approx((1.0 - 0.5) / 2)  # cheaper than the exhaustive's


def test_the_exhaustive_choice_judged_in_itself_and_in_another_campaign(table):
    assert regret.exhaustive_judged(table, table)["judged_regret"] == 0
    other = regret.truth(synthetic(seed=2, noise=0.2), "mpich")
    floor = regret.exhaustive_judged(table, other)
    assert floor["judged_regret"] > 0 and floor["judged_cost"] == 0
    assert floor["points"] == len(PROCS) * len(SIZES)
    small = table[table["procs"] == 2].reset_index(drop=True)
    judged = regret.replay(small, regret.random_cells, batch=48, budget=len(small), seed=0,
                           trees=10, judge=other)
    assert judged["judged_regret"].notna().all()
    assert judged["judged_cost"].iloc[-1] == 0  # every cell measured: the exhaustive choice
    assert judged["judged_regret"].iloc[-1] == pytest.approx(
        regret.exhaustive_judged(small, other)["judged_regret"])
    alone = regret.replay(small, regret.random_cells, batch=48, budget=len(small), seed=0, trees=10)
    assert alone["judged_regret"].isna().all()
    assert alone["mean_regret"].tolist() == judged["mean_regret"].tolist()
    elsewhere = other.assign(size=other["size"] + 1)
    with pytest.raises(ValueError, match="judge: got 672 cells, none of them a cell"):
        regret.replay(small, regret.random_cells, 48, 48, 0, judge=elsewhere)


def test_features_are_the_documented_columns():
    frame = pd.DataFrame({"procs": [8, 6], "nodes": [2, 1], "size": [1024, 8],
                          "dtype": ["float32", "int64"], "algorithm": ["native:ring", "native:b"]})
    x = surrogate.features(frame, ["native:b", "native:ring"])
    assert x.tolist() == [[3.0, 10.0, 2.0, 4.0, 4.0, 1.0, 0.0, 1.0],
                          [math.log2(6), 3.0, 1.0, 6.0, 8.0, 0.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match=r"algorithm: got \['native:ring'\], expected one of"):
        surrogate.features(frame, ["native:b"])
    with pytest.raises(ValueError, match=r"dtype: got 'bogus', expected a numeric type"):
        surrogate.features(frame.assign(dtype="bogus"), ["native:b", "native:ring"])


def test_surrogate_predicts_the_winner_on_fully_measured_data(table):
    points = table.drop_duplicates(regret.POINT)[[*regret.POINT, "dtype", "best_algorithm", "best_mean"]]
    model = surrogate.Surrogate(ALGORITHMS).fit(table)
    times = model.predict(points)
    assert times.shape == (surrogate.TREES, len(points), len(ALGORITHMS))
    said = surrogate.verdict(times)
    winners = np.array(ALGORITHMS)[said.winner]
    assert (winners == points["best_algorithm"].to_numpy()).mean() >= 0.9
    chosen = table.set_index([*regret.POINT, "algorithm"])["mean"]
    keys = list(zip(points["procs"], points["nodes"], points["size"], winners))
    true_regret = chosen.loc[keys].to_numpy() / points["best_mean"].to_numpy() - 1
    assert true_regret.mean() < 0.01 and true_regret.max() < 0.2
    assert ((said.win_probability > 0) & (said.win_probability <= 1)).all()
    assert (said.regret >= 0).all() and (said.regret_upper >= 0).all() and (said.regret_upper > 0).any()
    # laying the measurements over the trees decides every point by its measured best
    known = chosen.unstack("algorithm")[ALGORITHMS].to_numpy()
    exact = surrogate.verdict(surrogate.overlay(times, known))
    assert (np.array(ALGORITHMS)[exact.winner] == points["best_algorithm"].to_numpy()).all()
    assert (exact.win_probability == 1).all() and (exact.regret == 0).all()


@pytest.mark.parametrize("name", sorted(regret.POLICIES))
def test_replay_is_reproducible_and_exhaustive_budget_ends_at_zero(table, name):
    # 3 P values x 8 sizes of the synthetic data: the same structure, fewer forests to fit
    small = table[table["procs"].isin([2, 6, 16]) & table["size"].isin(SIZES[::3])]
    policy = policies.adaptive_with(10) if name == "adaptive" else regret.POLICIES[name]
    seeds = (3, 3, 4) if name == "random" else (3, 3)  # random: the seed decides the cells
    run = [regret.replay(small, policy, batch=32, budget=10_000, seed=s, trees=10) for s in seeds]
    pd.testing.assert_frame_equal(run[0], run[1])
    assert list(run[0].columns) == regret.CURVE_COLUMNS
    last = run[0].iloc[-1]
    assert last["cells"] == len(small) == 96 and last["mean_regret"] == 0 and last["worst_regret"] == 0
    assert last["predicted_regret_q95"] == 0 and regret.stop(last)
    assert not regret.stop(run[0].iloc[0])
    assert last["machine_time"] == pytest.approx(regret.exhaustive(small)["machine_time"])
    assert (np.diff(run[0]["cells"]) > 0).all() and (np.diff(run[0]["machine_time"]) > 0).all()
    if name == "random":
        assert not run[0]["mean_regret"].equals(run[2]["mean_regret"])


def needed_cells(table, policy, budget: int, seed: int, surrogate: str = "forest") -> float:
    """Cells a policy measures until the mean regret is <= 5 % (inf: not within budget)."""
    curve = regret.replay(table, policy, batch=24, budget=budget, seed=seed, trees=FEW_TREES,
                          until=lambda row: row["mean_regret"] <= 0.05, surrogate=surrogate)
    got = regret.reach(curve, 0.05)
    assert got is None or got["cells"] == curve["cells"].iloc[-1]  # ``until`` ended it there
    return got["cells"] if got else math.inf


def test_adaptive_reaches_five_percent_with_a_quarter_of_the_cells_before_random(table):
    quarter = CELLS // 4
    adaptive = [needed_cells(table, policies.adaptive_with(FEW_TREES), quarter, s) for s in (0, 1, 2)]
    assert np.median(adaptive) <= quarter, adaptive
    # random needs more: it has not got there (median over the seeds) when adaptive has
    random = [needed_cells(table, regret.random_cells, int(np.median(adaptive)), s) for s in (0, 1, 2)]
    assert np.median(adaptive) < np.median(random), (adaptive, random)


def test_the_adaptive_seed_is_every_algorithm_at_the_corners(table):
    first = policies.adaptive(table[regret.CANDIDATE_COLUMNS], table.iloc[:0][regret.MEASURED_COLUMNS],
                            np.random.default_rng(0), 100)
    assert len(first) == 2 * 3 * len(ALGORITHMS)
    assert set(first["procs"]) == {2, 16} and set(first["size"]) == {8, 2**15, 2**26}
    grid = policies.grid(table[regret.CANDIDATE_COLUMNS], table.iloc[:0][regret.MEASURED_COLUMNS],
                       np.random.default_rng(0), CELLS // 2)
    assert set(grid["size"]) == set(SIZES[::2]) and set(grid["procs"]) == set(PROCS)


def test_adaptive_measures_two_likely_winners_where_unsure_and_whole_points_far_away(table):
    seed = policies.seed_cells(table, table)
    measured, candidates = table.loc[seed.index], table.drop(index=seed.index)
    rng = np.random.default_rng(0)

    def per_point(explore):
        chosen = policies.adaptive(candidates[regret.CANDIDATE_COLUMNS], measured[regret.MEASURED_COLUMNS],
                                 rng, 24, trees=20, explore=explore)
        assert chosen.index.isin(candidates.index).all() and chosen.index.is_unique
        return chosen.groupby(regret.POINT).size()

    assert per_point(0.0).max() <= 2  # only the trees' top two, at the least certain points
    mixed = per_point(0.5)
    assert set(mixed) == {1, 2, 4} or set(mixed) == {2, 4}  # far points: every algorithm
    far = mixed[mixed == 4].index
    assert not set(far) & set(measured.set_index(regret.POINT).index)


def test_leave_one_p_out_gives_a_finite_regret_per_p(table):
    out = regret.leave_one_p_out(table, budget=CELLS, seed=0, trees=20)
    assert out["procs"].tolist() == PROCS
    assert (out["cells"] == CELLS - len(SIZES) * len(ALGORITHMS)).all()
    assert np.isfinite(out["mean_regret"]).all() and np.isfinite(out["worst_regret"]).all()
    assert (out["mean_regret"] >= 0).all() and (out["worst_regret"] >= out["mean_regret"]).all()
    assert out["mean_regret"].mean() < 0.2  # the other P values say much about a held-out one


def test_reach_and_stop():
    curve = pd.DataFrame({"cells": [10, 20, 30], "machine_time": [1.0, 2.0, 3.0],
                          "mean_regret": [0.3, 0.04, 0.06]})
    assert regret.reach(curve) == {"cells": 20, "machine_time": 2.0}
    assert regret.reach(curve, target=0.01) is None
    assert regret.stop({"predicted_regret_q95": 0.049})
    assert not regret.stop({"predicted_regret_q95": 0.05})
    assert not regret.stop({"predicted_regret_q95": float("nan")})


def test_bad_inputs_say_what_was_found_and_expected(table):
    summary = synthetic()
    with pytest.raises(ValueError, match=r"library: got 'nope', expected one of .*'mpich'"):
        regret.truth(summary, "nope")
    broken = summary.assign(status="wrong")
    with pytest.raises(ValueError, match=r"summary: no timed native:\* rows of library 'mpich' "
                                         r"\(found 672 native rows.*'wrong': 672.*expected rows"):
        regret.truth(broken, "mpich")
    with pytest.raises(ValueError, match=r"summary: no timed native:\* rows"):
        regret.truth(summary.assign(algorithm="suara_ring"), "mpich")
    twice = pd.concat([summary, summary.assign(dtype="float32")], ignore_index=True)
    with pytest.raises(ValueError, match=r"share a cell .*differing in \['dtype'\]; expected one row"):
        regret.truth(twice, "mpich")
    for budget in (0, -3, 2.5):
        with pytest.raises(ValueError, match=rf"budget: got {budget}, expected an integer >= 1"):
            regret.replay(table, regret.random_cells, batch=8, budget=budget, seed=0)
    with pytest.raises(ValueError, match=r"batch: got 0, expected an integer >= 1"):
        regret.replay(table, regret.random_cells, batch=0, budget=8, seed=0)
    with pytest.raises(ValueError, match=r"budget: got 0, expected an integer >= 1"):
        regret.leave_one_p_out(table, budget=0, seed=0)
    with pytest.raises(ValueError, match=r"held_out: got points \[\(5, 1, 8\)\] not in the truth"):
        regret.replay(table, regret.random_cells, batch=8, budget=8, seed=0,
                      held_out=pd.DataFrame({"procs": [5], "nodes": [1], "size": [8]}))
    with pytest.raises(ValueError, match=r"policy outside: chose 1 cells, 1 of them not candidates"):
        def outside(candidates, measured, rng, batch):
            return candidates.head(1).assign(size=3)
        regret.replay(table, outside, batch=8, budget=8, seed=0)
    with pytest.raises(ValueError, match=r"truth_table: missing columns \['best_algorithm'"):
        regret.replay(table.drop(columns=["best_algorithm", "best_mean"]), policies.grid, 8, 8, 0)


def test_pooled_campaigns_average_each_cell_they_all_timed_and_decide_best_again(table):
    small = table[table["procs"] == 2].reset_index(drop=True)
    slower = small.assign(mean=small["mean"] * np.where(small["algorithm"] == "native:ring", 3.0, 1.0))
    slower.loc[0, "status"] = "not-converged"
    fewer = slower.drop(index=[1])  # one cell the second campaign did not time
    both = regret.pooled([small, fewer])
    assert len(both) == len(small) - 1 and list(both.columns) == regret.TABLE_COLUMNS
    merged = small.drop(index=[1]).reset_index(drop=True)
    expected = (merged["mean"] + fewer["mean"].to_numpy()) / 2
    np.testing.assert_allclose(both["mean"], expected)
    assert (both["n"] == 2 * merged["n"]).all()
    assert both.loc[0, "status"] == "not-converged" and (both["status"].iloc[1:] == "ok").all()
    # ring is twice as slow in the pool as in the first campaign: it wins fewer points
    assert (both["best_algorithm"] == "native:ring").sum() < (merged["best_algorithm"] == "native:ring").sum()
    for _, group in both.groupby(regret.POINT):
        assert group["best_mean"].iloc[0] == group["mean"].min()
    pd.testing.assert_frame_equal(regret.pooled([small]), small)
    elsewhere = small.assign(size=small["size"] + 1)
    with pytest.raises(ValueError, match="without a cell in common"):
        regret.pooled([small, elsewhere])
