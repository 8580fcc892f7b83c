"""The repetition stopping rule and the statistics of one cell. Pure functions, no MPI.

Stopping rule (SUARA paper, Section 5): after ``min_reps`` repetitions, stop as soon as the
Student-t confidence half-width ``t((1+c)/2, n-1) * s / sqrt(n)`` is at most ``precision``
times the mean; stop at ``max_reps`` or when the cell's time budget is spent, and then the
cell is *not converged*.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .quantiles import binomial_half_cdf, t_critical

# scipy is imported only where Shapiro-Wilk's p is computed (the summary): every rank of every
# launch imports this module, and scipy.special alone cost each rank 0.3 s of start-up
# (harness/quantiles.py has the t and binomial quantiles in numpy).


def _stats():
    from scipy import stats

    return stats


@dataclass(frozen=True)
class StoppingRule:
    confidence: float = 0.95
    precision: float = 0.025
    min_reps: int = 10
    max_reps: int = 1000
    time_budget: float = 60.0  # seconds of measuring per cell

    def check(self) -> None:
        """Raise ValueError naming the setting that is out of range."""
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {self.confidence}")
        if not self.precision > 0:
            raise ValueError(f"precision must be > 0, got {self.precision}")
        if self.min_reps < 2:
            raise ValueError(f"min_reps must be >= 2, got {self.min_reps}")
        if self.max_reps < self.min_reps:
            raise ValueError(f"min_reps ({self.min_reps}) must not exceed max_reps ({self.max_reps})")
        if not self.time_budget > 0:
            raise ValueError(f"time_budget must be > 0, got {self.time_budget}")


@lru_cache(maxsize=4096)
def t_quantile(confidence: float, dof: int) -> float:
    """Two-sided Student-t critical value t((1+confidence)/2, dof)."""
    return float(t_critical(confidence, [dof])[0])


_T_TABLES: dict[float, np.ndarray] = {}


def t_quantiles(confidence: float, upto: int) -> np.ndarray:
    """``t_quantile(confidence, dof)`` for every dof < len(result) (at least ``upto`` + 1;
    index 0 is NaN), computed in one vectorised call and grown by doubling: the stopping rule
    looks one up per repetition, and a scalar ``ppf`` (about 80 us) between timed calls would
    disturb them."""
    table = _T_TABLES.get(confidence)
    if table is None or len(table) <= upto:
        n = max(1024, 2 * upto + 2, 2 * (len(table) if table is not None else 0))
        table = t_critical(confidence, np.arange(n))
        _T_TABLES[confidence] = table
    return table


def half_width(samples, confidence: float) -> float:
    """Half-width of the Student-t confidence interval of the mean (NaN below two samples)."""
    x = np.asarray(samples, dtype=float)
    n = x.size
    if n < 2:
        return math.nan
    return t_quantile(confidence, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)


def rule_holds(samples, rule: StoppingRule) -> bool:
    """True when enough repetitions were made and the interval is narrow enough."""
    n = len(samples)
    if n < max(rule.min_reps, 2):
        return False
    mean = float(np.mean(samples))
    return half_width(samples, rule.confidence) <= rule.precision * abs(mean)


def decide(samples, rule: StoppingRule, elapsed: float) -> str | None:
    """After a repetition: ``"ok"`` (converged), ``"not-converged"`` (max_reps reached or the
    time budget spent first) or None (repeat again). ``elapsed`` is seconds spent measuring."""
    if rule_holds(samples, rule):
        return "ok"
    if len(samples) >= rule.max_reps or elapsed >= rule.time_budget:
        return "not-converged"
    return None


class Running:
    """The stopping rule applied one sample at a time in O(1) (Welford's mean and variance),
    so the check between repetitions costs the same at the 10th and the 10,000th: work
    between timed calls evicts caches and shows up in the next call's time.
    ``decide`` gives what ``decide(samples, ...)`` gives on the same samples."""

    __slots__ = ("rule", "n", "mean", "m2", "max_reps", "t")

    def __init__(self, rule: StoppingRule, max_reps: int | None = None):
        self.rule, self.n, self.mean, self.m2 = rule, 0, 0.0, 0.0
        self.max_reps = rule.max_reps if max_reps is None else max_reps
        self.t = t_quantiles(rule.confidence, min(self.max_reps, 1 << 20))

    def add(self, x: float) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    def holds(self) -> bool:
        n, rule = self.n, self.rule
        if n < max(rule.min_reps, 2):
            return False
        t = self.t
        if n - 1 >= len(t):
            t = self.t = t_quantiles(rule.confidence, n - 1)
        hw = float(t[n - 1]) * math.sqrt(max(self.m2, 0.0) / (n - 1) / n)
        return hw <= rule.precision * abs(self.mean)

    def decide(self, elapsed: float, budget: float | None = None) -> str | None:
        """As ``decide``; ``budget`` replaces the rule's time budget (oversubscribed cells)."""
        if self.holds():
            return "ok"
        if self.n >= self.max_reps or elapsed >= (self.rule.time_budget if budget is None else budget):
            return "not-converged"
        return None


def rep_limit(rule: StoppingRule, size: int, max_volume: float | None) -> int:
    """Repetitions a cell of ``size`` bytes may take: ``max_reps``, and at most
    ``max_volume / size`` (never below ``min_reps``), as IMB scales its iterations with the
    message size (``-iter``'s overall volume) so that large messages do not eat the budget."""
    if not max_volume or size <= 0:
        return rule.max_reps
    return max(rule.min_reps, min(rule.max_reps, int(max_volume // size)))


def median_interval(samples, confidence: float) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics (binomial, p=1/2).

    With too few samples for the requested confidence the interval is (min, max).
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        return (math.nan, math.nan)
    j = median_rank(n, confidence)
    if j < 1:
        return (float(x[0]), float(x[-1]))
    k = n - j + 1
    return (float(x[j - 1]), float(x[k - 1]))


def median_rank(n: int, confidence: float) -> int:
    """The largest j (1-based) with P(B <= j-1) <= (1-confidence)/2, B ~ Binomial(n, 1/2): the
    order statistics x(j) and x(n-j+1) bound the median's interval; 0 when none does."""
    half_alpha = (1.0 - confidence) / 2.0
    cdf = binomial_half_cdf(n)  # cdf[i] = P(B <= i)
    below = np.flatnonzero(cdf <= half_alpha)  # i = j - 1 for every admissible j
    return int(below[-1]) + 1 if below.size else 0


def normality_p(samples) -> float:
    """Shapiro-Wilk p-value (NaN when n < 3 or all samples are equal)."""
    x = np.asarray(samples, dtype=float)
    if x.size < 3 or np.ptp(x) == 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(_stats().shapiro(x[:5000]).pvalue)


def summarize(samples, confidence: float, normality: bool = True) -> dict:
    """Everything the summary row says about one metric's repetitions. ``normality=False``
    leaves ``normality_p`` NaN: the bench does, since Shapiro-Wilk needs scipy.stats, whose
    import cost rank 0 a second of every launch while the other ranks spun; the summary
    computes it from the raw repetitions instead (``results.summary_frame``)."""
    x = np.asarray(samples, dtype=float)
    n = int(x.size)
    if n == 0:
        nan = math.nan
        return dict(n=0, mean=nan, std=nan, ci_low=nan, ci_high=nan, rel_halfwidth=nan,
                    median=nan, median_ci_low=nan, median_ci_high=nan, min=nan, max=nan,
                    normality_p=nan)
    mean = float(x.mean())
    hw = half_width(x, confidence)
    mlo, mhi = median_interval(x, confidence)
    return dict(
        n=n,
        mean=mean,
        std=float(x.std(ddof=1)) if n > 1 else math.nan,
        ci_low=mean - hw,
        ci_high=mean + hw,
        rel_halfwidth=hw / abs(mean) if mean else math.nan,
        median=float(np.median(x)),
        median_ci_low=mlo,
        median_ci_high=mhi,
        min=float(x.min()),
        max=float(x.max()),
        normality_p=normality_p(x) if normality else math.nan,
    )
