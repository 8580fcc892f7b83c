"""A nonparametric test of paired launches, beside the t-interval of their log ratios.

The confirmation and verification stages pair each launch of one algorithm with the launch of
the other next to it in time. Their t-interval of the mean log ratio assumes the ratios are
normal; with 4-12 pairs nothing can check that. So each comparison also reports the exact
Wilcoxon signed-rank test on the log ratios of the paired launch *medians* (no assumption on
the distribution beyond symmetry about its centre), with two effect sizes: the Hodges-Lehmann
estimate of the ratio (the median of the Walsh averages of the log ratios, taken back) and the
matched-pairs rank-biserial correlation (+1: every pair favours the second algorithm, -1: the
first). With k pairs the smallest two-sided p the exact test can give is 2 / 2^k: 4 pairs
can never reach 5 % (0.125), 6 pairs can (0.031); the result says so rather than call it a
tie of the data.
"""

from __future__ import annotations

import math

import numpy as np

TEST = "Wilcoxon signed-rank, exact, on the log ratios of paired launch medians"


def _signed_rank_null(ranks2: np.ndarray) -> np.ndarray:
    """The exact null distribution of W+ (in half-rank units: ranks doubled to integers) for
    these ranks: counts of each sum over the 2^k equally likely sign patterns."""
    total = int(ranks2.sum())
    counts = np.zeros(total + 1, dtype=float)
    counts[0] = 1.0
    for r in ranks2.astype(int):
        shifted = np.zeros_like(counts)
        shifted[r:] = counts[:total + 1 - r]
        counts = counts + shifted
    return counts


def wilcoxon_exact(d) -> tuple[float, int]:
    """Two-sided exact p of the signed-rank test of ``d`` (zeros dropped, ties at midranks)
    and the number of non-zero differences used."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d) & (d != 0)]
    k = d.size
    if k == 0:
        return math.nan, 0
    a = np.abs(d)
    order = np.argsort(a, kind="stable")
    ranks = np.empty(k)
    i = 0
    while i < k:  # midranks of tied magnitudes
        j = i
        while j + 1 < k and a[order[j + 1]] == a[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    ranks2 = np.rint(2 * ranks).astype(int)
    w_plus = int(ranks2[d > 0].sum())
    counts = _signed_rank_null(ranks2)
    prob = counts / counts.sum()
    mean = ranks2.sum() / 2
    extreme = abs(w_plus - mean)
    sums = np.arange(counts.size)
    p = float(prob[np.abs(sums - mean) >= extreme - 1e-9].sum())
    return min(1.0, p), k


def hodges_lehmann(d) -> float:
    """The median of the Walsh averages (d_i + d_j) / 2, i <= j."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return math.nan
    i, j = np.triu_indices(d.size)
    return float(np.median((d[i] + d[j]) / 2))


def rank_biserial(d) -> float:
    """Matched-pairs rank-biserial correlation: (W+ - W-) / (W+ + W-), zeros dropped."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d) & (d != 0)]
    if d.size == 0:
        return math.nan
    a = np.abs(d)
    ranks = np.argsort(np.argsort(a, kind="stable"), kind="stable") + 1.0
    for v in np.unique(a):  # midranks
        tied = a == v
        ranks[tied] = ranks[tied].mean()
    plus, minus = ranks[d > 0].sum(), ranks[d < 0].sum()
    return float((plus - minus) / (plus + minus))


def compare(first, second, names=("first", "second"), alpha: float = 0.05) -> dict:
    """The paired comparison of launch medians ``first`` (e.g. AUTO) and ``second`` (BEST):
    the ratio first/second by Hodges-Lehmann, the exact Wilcoxon p, the rank-biserial
    correlation, the smallest p the pairs could give, and a verdict: ``<second> faster``,
    ``<first> faster`` (``names``), ``no difference shown`` or ``too few pairs`` (the smallest
    possible p is above ``alpha``). Pairs where either median is missing are left out."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    d = np.log(a[ok] / b[ok])
    p, k = wilcoxon_exact(d)
    floor = 2.0 / 2 ** k if k else math.nan
    hl = hodges_lehmann(d)
    if not k or floor > alpha:
        said = "too few pairs"
    elif p <= alpha:
        said = f"{names[1]} faster" if hl > 0 else f"{names[0]} faster"
    else:
        said = "no difference shown"
    return {"test": TEST, "pairs": int(ok.sum()), "ratio": math.exp(hl) if math.isfinite(hl)
            else math.nan, "p": p, "rank_biserial": rank_biserial(d), "smallest_p": floor,
            "verdict": said}
