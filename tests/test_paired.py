"""The nonparametric comparison of paired launches (harness/analysis/paired.py) against
scipy.stats and hand computations."""

import math

import numpy as np
import pytest
from scipy import stats as st

from harness.analysis.paired import compare, hodges_lehmann, rank_biserial, wilcoxon_exact


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 13, 20])
def test_exact_p_equals_scipys(k):
    rng = np.random.default_rng(k)
    for _ in range(20):
        d = rng.normal(0.3, 1.0, k)
        assert wilcoxon_exact(d)[0] == pytest.approx(st.wilcoxon(d, method="exact").pvalue, abs=1e-12)


def test_ties_and_zeros():
    d = np.array([0.0, 1.0, -1.0, 2.0, 2.0, 3.0])  # a zero is dropped, ties share midranks
    p, k = wilcoxon_exact(d)
    assert k == 5 and 0 < p <= 1
    # by enumeration of the 2^5 sign patterns on the midranks 1.5 1.5 3.5 3.5 5
    ranks = np.array([1.5, 1.5, 3.5, 3.5, 5.0])
    w = ranks[[1, 2, 3, 4]].sum()  # the observed W+: ranks of 1, 2, 2, 3
    sums = [sum(r for r, bit in zip(ranks, f"{m:05b}") if bit == "1") for m in range(32)]
    centre = ranks.sum() / 2
    assert p == pytest.approx(sum(abs(x - centre) >= abs(w - centre) for x in sums) / 32)


def test_effect_sizes_by_hand():
    d = np.array([0.1, 0.2, 0.4, -0.05])
    walsh = [(d[i] + d[j]) / 2 for i in range(4) for j in range(i, 4)]
    assert hodges_lehmann(d) == pytest.approx(np.median(walsh))
    assert rank_biserial(d) == pytest.approx((2 + 3 + 4 - 1) / 10)
    assert rank_biserial(np.array([1.0, 2.0])) == 1.0


def test_compare_says_when_the_pairs_cannot_decide():
    auto = [2.0, 2.1, 2.05, 1.9]
    best = [1.0, 1.1, 1.0, 0.9]
    four = compare(auto, best, names=("AUTO", "BEST"))
    assert four["verdict"] == "too few pairs" and four["smallest_p"] == 0.125
    six = compare(auto + [2.2, 2.0], best + [1.05, 1.0], names=("AUTO", "BEST"))
    assert six["verdict"] == "BEST faster" and six["p"] == pytest.approx(1 / 32)
    assert six["ratio"] == pytest.approx(2.0, rel=0.05) and six["rank_biserial"] == 1.0
    slower = compare(best + [1.05, 1.0], auto + [2.2, 2.0], names=("AUTO", "BEST"))
    assert slower["verdict"] == "AUTO faster"
    mixed = compare([1, 2, 1, 2, 1, 2], [2, 1, 2, 1, 2, 1.0])
    assert mixed["verdict"] == "no difference shown"
    gaps = compare([1.0, math.nan, 2.0], [0.5, 1.0, 1.0])
    assert gaps["pairs"] == 2  # a pair with a missing median is left out
