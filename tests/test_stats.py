"""The stopping rule against hand computations with scipy."""

import math

import numpy as np
import pytest
from scipy import stats as st

from harness.stats import StoppingRule, decide, half_width, median_interval, summarize


def by_hand_holds(x, confidence=0.95, precision=0.025):
    x = np.asarray(x, float)
    n = len(x)
    t = st.t.ppf(1 - (1 - confidence) / 2, n - 1)
    return t * x.std(ddof=1) / math.sqrt(n) <= precision * x.mean()


def first_stop(samples, rule, elapsed=lambda n: 0.0):
    for n in range(1, len(samples) + 1):
        verdict = decide(samples[:n], rule, elapsed(n))
        if verdict:
            return n, verdict
    return None, None


def test_half_width_matches_scipy_interval():
    x = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95]
    lo, hi = st.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=st.sem(x))
    assert half_width(x, 0.95) == pytest.approx((hi - lo) / 2)


def test_stops_at_exactly_the_first_n_where_the_rule_holds():
    rng = np.random.default_rng(7)
    samples = list(1.0 + 0.08 * rng.standard_normal(400))
    rule = StoppingRule(min_reps=5, max_reps=1000)
    expected = next(n for n in range(5, 401) if by_hand_holds(samples[:n]))
    assert expected > 5  # the case really exercises the rule
    n, verdict = first_stop(samples, rule)
    assert (n, verdict) == (expected, "ok")
    assert not by_hand_holds(samples[:expected - 1])


def test_min_reps_is_respected_even_when_the_rule_holds_earlier():
    samples = [1.0, 1.0001, 0.9999, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert by_hand_holds(samples[:2])
    assert first_stop(samples, StoppingRule(min_reps=10)) == (10, "ok")


def test_not_converged_at_the_cap():
    samples = [1.0, 3.0] * 20  # half-width far above 2.5 % of the mean for n <= 40
    assert not any(by_hand_holds(samples[:n]) for n in range(2, 41))
    assert first_stop(samples, StoppingRule(min_reps=4, max_reps=25)) == (25, "not-converged")


def test_not_converged_when_the_time_budget_is_spent():
    samples = [1.0, 3.0] * 20
    rule = StoppingRule(min_reps=4, max_reps=1000, time_budget=10.0)
    assert first_stop(samples, rule, elapsed=lambda n: n * 1.0) == (10, "not-converged")


def test_precision_setting_is_used():
    samples = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98]
    strict, loose = StoppingRule(precision=0.001, min_reps=3), StoppingRule(precision=0.2, min_reps=3)
    assert first_stop(samples, strict) == (None, None)
    assert first_stop(samples, loose)[1] == "ok"


def test_rule_settings_are_checked():
    for bad, word in [(dict(precision=0), "precision"), (dict(confidence=1.0), "confidence"),
                      (dict(min_reps=20, max_reps=10), "min_reps"), (dict(time_budget=0), "time_budget")]:
        with pytest.raises(ValueError, match=word):
            StoppingRule(**bad).check()


def test_median_interval_order_statistics():
    x = list(range(1, 21))  # n = 20: the 95 % interval is (x(6), x(15))
    lo, hi = median_interval(x, 0.95)
    assert (lo, hi) == (6.0, 15.0)
    j = 6
    assert st.binom.cdf(j - 1, 20, 0.5) <= 0.025 < st.binom.cdf(j, 20, 0.5)


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_median_rank_is_the_binomial_quantile(confidence):
    """median_rank (harness.quantiles' binomial CDF) against scipy.stats.binom's definition, for
    every n up to 400 and a few large ones: the largest j with P(B <= j-1) <= alpha/2."""
    from harness.stats import median_rank

    half = (1 - confidence) / 2
    for n in [*range(1, 401), 1000, 4999, 10_000]:
        js = np.flatnonzero(st.binom.cdf(np.arange(n), n, 0.5) <= half) + 1  # j - 1 = 0..n-1
        assert median_rank(n, confidence) == (int(js[-1]) if js.size else 0), (n, confidence)


def test_summarize_fields():
    x = [2.0, 2.2, 1.8, 2.1, 1.9]
    s = summarize(x, 0.95)
    assert s["n"] == 5 and s["mean"] == pytest.approx(2.0)
    assert s["ci_high"] - s["mean"] == pytest.approx(half_width(x, 0.95))
    assert s["median"] == 2.0 and s["min"] == 1.8 and s["max"] == 2.2
    assert 0 < s["normality_p"] <= 1
    assert math.isnan(summarize([1.0], 0.95)["std"])


@pytest.mark.parametrize("seed", range(5))
def test_running_rule_stops_where_the_batch_rule_stops(seed):
    """stats.Running (O(1) per sample) takes the decision decide() takes on the same samples."""
    from harness.stats import Running

    rng = np.random.default_rng(seed)
    samples = list(rng.lognormal(0, 0.4 + 0.2 * seed, 3000))
    rule = StoppingRule(min_reps=10, max_reps=2500, precision=0.025)
    running = Running(rule)
    for n in range(1, len(samples) + 1):
        running.add(samples[n - 1])
        got = running.decide(0.0)
        if got:
            assert (n, got) == first_stop(samples, rule)
            break
    else:
        pytest.fail("never stopped")


def test_running_rule_time_budget_and_its_override():
    from harness.stats import Running

    rule = StoppingRule(min_reps=3, max_reps=100, time_budget=10.0)
    r = Running(rule)
    for x in (1.0, 5.0, 0.2, 9.0):
        r.add(x)
    assert r.decide(1.0) is None
    assert r.decide(10.0) == "not-converged"
    assert r.decide(1.0, budget=0.5) == "not-converged"


def test_rep_limit_scales_with_the_message_size_as_imb_does():
    from harness.stats import rep_limit

    rule = StoppingRule(min_reps=10, max_reps=20000)
    assert rep_limit(rule, 8, 2**30) == 20000
    assert rep_limit(rule, 2**20, 2**30) == 1024
    assert rep_limit(rule, 2**30, 2**30) == 10  # never below min_reps
    assert rep_limit(rule, 2**20, 0) == 20000  # 0: no volume cap


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999])
def test_t_critical_agrees_with_scipy(confidence):
    """harness.quantiles.t_critical (numpy only: the launch's ranks import no scipy) against
    scipy's Student-t quantile, every dof up to 5,000 (the exact series below EXACT_DOF and
    the Cornish-Fisher expansion above) and large ones; dof 0 is NaN."""
    from harness.quantiles import EXACT_DOF, t_critical

    dof = np.concatenate([np.arange(1, 5001), [EXACT_DOF + 1, 10**4, 10**5, 10**6, 10**7]])
    ours = t_critical(confidence, dof)
    theirs = st.t.ppf((1 + confidence) / 2, dof)
    assert np.max(np.abs(ours / theirs - 1)) < 1e-10
    assert np.isnan(t_critical(confidence, [0])[0])
    with pytest.raises(ValueError, match="confidence"):
        t_critical(1.0, [3])


def test_binomial_half_cdf_is_exact():
    """P(B <= i) for B ~ Binomial(n, 1/2) against the exact fraction (small n) and against
    scipy.stats.binom (large n) wherever it decides a median rank (the tails)."""
    from fractions import Fraction

    from harness.quantiles import binomial_half_cdf

    for n in [1, 2, 3, 7, 20, 101]:
        exact = [float(Fraction(sum(math.comb(n, j) for j in range(i + 1)), 2**n))
                 for i in range(n + 1)]
        assert binomial_half_cdf(n) == pytest.approx(exact, rel=1e-13, abs=0)
    for n in [1000, 10_000, 100_000]:
        ours, theirs = binomial_half_cdf(n), st.binom.cdf(np.arange(n + 1), n, 0.5)
        tail = (theirs > 1e-300) & (theirs < 0.5)
        assert np.max(np.abs(ours[tail] / theirs[tail] - 1)) < 1e-11


def test_a_launch_imports_neither_scipy_nor_pandas(tmp_path):
    """The bench (imported by every rank of every launch) and the raw table it writes on rank 0
    stay off scipy and pandas, whose imports cost a short launch a third of its time."""
    import subprocess
    import sys

    code = ("import sys; from harness import fileio; from harness.measure import bench; "
            "fileio.write_parquet(sys.argv[1], fileio.arrow_table("
            "{'cell_id': ['c'], 'rep': [0], 'arrival': [[0.5, 0.25]]})); "
            "print(sorted(m for m in ('scipy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "raw.parquet")],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("seed", range(4))
def test_median_ci_rule_stops_where_its_batch_form_stops(seed):
    """The median-ci rule (stats.Running, sorted insertion and tabulated ranks) stops at the
    first n where the median's order-statistics interval (stats.median_interval, the same
    definition as the summary's) lies within precision x median on both sides."""
    from harness.stats import Running

    rng = np.random.default_rng(seed)
    samples = list(rng.lognormal(0, 0.5 + 0.3 * seed, 6000))
    rule = StoppingRule(min_reps=10, max_reps=6000, precision=0.05, kind="median-ci")
    running, stop = Running(rule), None
    for n in range(1, len(samples) + 1):
        running.add(samples[n - 1])
        if running.decide(0.0):
            stop = n
            break
    assert stop is not None and running.decide(0.0) == "ok", stop

    def holds(x):
        lo, hi = median_interval(x, 0.95)
        m = float(np.median(x))
        return len(x) >= 10 and max(m - lo, hi - m) <= 0.05 * m and (lo, hi) != (min(x), max(x))

    assert holds(samples[:stop]) and not any(holds(samples[:n]) for n in range(10, stop))
    assert decide(samples[:stop], rule, 0.0) == "ok"


def test_the_two_rules_differ_on_heavy_tails():
    """On repetitions with rare large outliers the mean's interval stays wide while the
    median's is narrow: median-ci stops first."""
    from harness.stats import Running

    rng = np.random.default_rng(7)
    x = 1.0 + 0.01 * rng.standard_normal(3000)
    x[3::20] *= 20  # one call in 20 hits a 20x stall
    stops = {}
    for kind in ("student-t", "median-ci"):
        running = Running(StoppingRule(min_reps=10, max_reps=3000, precision=0.025, kind=kind))
        for n, v in enumerate(x, 1):
            running.add(float(v))
            if running.decide(0.0):
                stops[kind] = n
                break
    assert stops["median-ci"] < stops.get("student-t", 3001) / 3, stops
    with pytest.raises(ValueError, match="rule must be one of student-t, median-ci, got 'x'"):
        StoppingRule(kind="x").check()


def test_distribution_statistics_by_hand():
    from harness.stats import autocorrelated, effective_n

    x = np.array([1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 5.0, 1.02, 0.98, 1.01])
    s = summarize(x, 0.95)
    assert s["p5"] == pytest.approx(np.percentile(x, 5)) and s["p95"] == pytest.approx(np.percentile(x, 95))
    q1, q3 = np.percentile(x, [25, 75])
    assert s["outliers"] == int(((x < q1 - 1.5 * (q3 - q1)) | (x > q3 + 1.5 * (q3 - q1))).sum()) == 1
    d = x - x.mean()
    assert s["lag1"] == pytest.approx(float(np.sum(d[:-1] * d[1:]) / np.sum(d * d)))
    # an AR(1) series with r = 0.8: n_eff = n (1 - r) / (1 + r), far below n
    rng = np.random.default_rng(1)
    ar = np.zeros(2000)
    for i in range(1, ar.size):
        ar[i] = 0.8 * ar[i - 1] + rng.standard_normal()
    s = summarize(10 + ar, 0.95)
    assert s["lag1"] == pytest.approx(0.8, abs=0.05)
    assert s["effective_n"] == pytest.approx(2000 * 0.2 / 1.8, rel=0.2)
    assert autocorrelated(2000, s["lag1"]) and not autocorrelated(2000, 0.01)
    assert effective_n(100, -0.5) == 100  # negative correlation adds no samples
    assert summarize(rng.standard_normal(500) + 10, 0.95)["effective_n"] > 400


def test_no_interval_of_a_time_goes_below_zero():
    from harness.stats import time_interval

    assert time_interval([1.0, 1.1, 0.9], 0.95)[2] == "t"
    lo, hi, how = time_interval([0.2e-3, 3.0e-3], 0.95)  # two executions far apart
    mean, hw = 1.6e-3, half_width([0.2e-3, 3.0e-3], 0.95)
    assert mean - hw < 0 and how == "log-t" and 0 < lo < hi
    logs = np.log([0.2e-3, 3.0e-3])
    assert lo == pytest.approx(math.exp(logs.mean() - half_width(logs, 0.95)))
    assert time_interval([1.0], 0.95)[2] == "none"
    assert time_interval([-1.0, 2.0], 0.95)[2] == "none"  # not a time: no interval
    s = summarize([0.2e-3, 3.0e-3], 0.95)
    assert s["ci_low"] > 0 and s["ci_method"] == "log-t"


def test_two_launches_far_apart_give_a_positive_interval():
    from harness.results.launches import combine

    rows = [{"cell_id": "c", "launch": k, "status": "ok", "mean": m, "ci_low": m * 0.99,
             "ci_high": m * 1.01, "rel_halfwidth": 0.01, "n": 20, "median": m, "min": m,
             "max": m, "procs": 2, "size": 8, "algorithm": "ring", "finished": "x"}
            for k, m in enumerate([0.2e-3, 3.0e-3])]
    row = combine(rows)
    assert row["launches"] == 2 and row["ci_method"] == "log-t" and 0 < row["ci_low"] < row["ci_high"]
