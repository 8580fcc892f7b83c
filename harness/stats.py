"""The repetition stopping rule and the statistics of one cell. Pure functions, no MPI.

Stopping rule ``student-t`` (SUARA paper, Section 5; the default): after ``min_reps``
repetitions, stop as soon as the Student-t confidence half-width ``t((1+c)/2, n-1) * s /
sqrt(n)`` is at most ``precision`` times the mean. ``median-ci`` (Hoefler & Belli, SC15; no
assumption on the distribution): stop as soon as the median's order-statistics interval lies
within ``precision`` times the median on both sides. Either way, stop at ``max_reps`` or when
the cell's time budget is spent, and then the cell is *not converged*.

Beside the mean and its interval, a cell's statistics (``summarize``) hold what says whether
that interval can be trusted: the median and its distribution-free interval, p5 and p95, the
count of Tukey outliers (kept, never removed), the lag-1 autocorrelation of the repetitions in
the order they ran and the effective sample size it implies, and (in the summary) the
Shapiro-Wilk p-value. No interval of a time goes below zero (``time_interval``).
"""

from __future__ import annotations

import bisect
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .quantiles import t_critical

# scipy is imported only where Shapiro-Wilk's p is computed (the summary): every rank of every
# launch imports this module, and scipy.special alone cost each rank 0.3 s of start-up
# (harness/quantiles.py has the t and binomial quantiles in numpy).


def _stats():
    from scipy import stats

    return stats


RULES = ("student-t", "median-ci")


@dataclass(frozen=True)
class StoppingRule:
    confidence: float = 0.95
    precision: float = 0.025
    min_reps: int = 10
    max_reps: int = 1000
    time_budget: float = 60.0  # seconds of measuring per cell
    kind: str = "student-t"  # RULES: the mean's t-interval, or the median's order statistics

    def check(self) -> None:
        """Raise ValueError naming the setting that is out of range."""
        if self.kind not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {self.kind!r}")
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
    if rule.kind == "median-ci":
        return median_ci_holds(np.sort(np.asarray(samples, dtype=float)), rule)
    mean = float(np.mean(samples))
    return half_width(samples, rule.confidence) <= rule.precision * abs(mean)


def median_ci_holds(ordered, rule: StoppingRule) -> bool:
    """The median's order-statistics interval of ``ordered`` (sorted samples) lies within
    ``precision`` times the median on both sides; never with too few samples for an interval
    at the rule's confidence."""
    n = len(ordered)
    j = median_rank(n, rule.confidence)
    if j < 1:
        return False
    lo, hi = float(ordered[j - 1]), float(ordered[n - j])
    med = float(np.median(ordered)) if isinstance(ordered, np.ndarray) else _median_sorted(ordered)
    return max(med - lo, hi - med) <= rule.precision * abs(med)


def _median_sorted(x: list) -> float:
    n = len(x)
    return float(x[n // 2]) if n % 2 else (float(x[n // 2 - 1]) + float(x[n // 2])) / 2


def decide(samples, rule: StoppingRule, elapsed: float) -> str | None:
    """After a repetition: ``"ok"`` (converged), ``"not-converged"`` (max_reps reached or the
    time budget spent first) or None (repeat again). ``elapsed`` is seconds spent measuring."""
    if rule_holds(samples, rule):
        return "ok"
    if len(samples) >= rule.max_reps or elapsed >= rule.time_budget:
        return "not-converged"
    return None


class Running:
    """The stopping rule applied one sample at a time. ``student-t`` in O(1) (Welford's mean
    and variance), so the check between repetitions costs the same at the 10th and the
    10,000th: work between timed calls evicts caches and shows up in the next call's time.
    ``median-ci`` keeps the samples sorted (one insertion per repetition) and looks the
    order-statistic ranks up in a table (``median_ranks``).
    ``decide`` gives what ``decide(samples, ...)`` gives on the same samples."""

    __slots__ = ("rule", "n", "mean", "m2", "max_reps", "t", "ordered")

    def __init__(self, rule: StoppingRule, max_reps: int | None = None):
        self.rule, self.n, self.mean, self.m2 = rule, 0, 0.0, 0.0
        self.max_reps = rule.max_reps if max_reps is None else max_reps
        if rule.kind == "median-ci":
            self.t, self.ordered = None, []
            median_ranks(rule.confidence, min(self.max_reps, 1 << 20))  # before the timing
        else:
            self.t, self.ordered = t_quantiles(rule.confidence, min(self.max_reps, 1 << 20)), None

    def add(self, x: float) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)
        if self.ordered is not None:
            bisect.insort(self.ordered, x)

    def holds(self) -> bool:
        n, rule = self.n, self.rule
        if n < max(rule.min_reps, 2):
            return False
        if self.ordered is not None:
            return median_ci_holds(self.ordered, rule)
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
    return int(median_ranks(confidence, n)[n])


_MEDIAN_RANKS: dict[float, tuple] = {}  # confidence -> (n, j, P(B_n <= j), P(B_n = j), table)


def median_ranks(confidence: float, upto: int) -> list[int]:
    """``median_rank(n, confidence)`` for every n <= ``upto`` (index 0 is 0), grown when asked
    for more and kept per confidence: the ``median-ci`` rule looks one up per repetition.
    From n to n + 1 the rank j stays or grows by one (the binomial CDF at a fixed point falls
    as n grows, by at most half a point's probability), so one recurrence step per n carries
    P(B_n <= j) and P(B_n = j) along: O(1) per n, checked against the exact CDF
    (``quantiles.binomial_half_cdf``) in tests/test_stats.py."""
    half_alpha = (1.0 - confidence) / 2.0
    n, j, cdf, pmf, table = _MEDIAN_RANKS.get(confidence) or (0, 0, 1.0, 1.0, [0])
    while n < upto:
        cdf -= 0.5 * pmf  # P(B_{n+1} <= j) = P(B_n <= j) - P(B_n = j) / 2
        pmf *= (n + 1) / (2.0 * (n + 1 - j))  # P(B_{n+1} = j)
        n += 1
        if cdf <= half_alpha:  # the order statistic j + 1 is admissible
            pmf *= (n - j) / (j + 1)  # P(B_n = j + 1)
            j += 1
            cdf += pmf
        table.append(j)
    _MEDIAN_RANKS[confidence] = (n, j, cdf, pmf, table)
    return table


def normality_p(samples) -> float:
    """Shapiro-Wilk p-value (NaN when n < 3 or all samples are equal)."""
    x = np.asarray(samples, dtype=float)
    if x.size < 3 or np.ptp(x) == 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(_stats().shapiro(x[:5000]).pvalue)


def time_interval(samples, confidence: float) -> tuple[float, float, str]:
    """The interval of a mean time that never goes below zero: ``(low, high, method)``.
    ``t``: the Student-t interval of the mean, when its low end is above zero; ``log-t``: the
    t-interval of the log times taken back (an interval of the geometric mean, for times
    spread so widely, or so few, that the t-interval would reach below zero); ``none`` (NaN
    bounds): fewer than two samples, or a time that is not positive."""
    x = np.asarray(samples, dtype=float)
    n = x.size
    if n < 2 or not np.isfinite(x).all():
        return (math.nan, math.nan, "none")
    mean, hw = float(x.mean()), half_width(x, confidence)
    if mean - hw > 0:
        return (mean - hw, mean + hw, "t")
    if (x <= 0).any():
        return (math.nan, math.nan, "none")
    logs = np.log(x)
    centre, lhw = float(logs.mean()), half_width(logs, confidence)
    return (math.exp(centre - lhw), math.exp(centre + lhw), "log-t")


def tukey_outliers(x: np.ndarray) -> int:
    """How many samples lie beyond Tukey's fences (1.5 interquartile ranges outside the
    quartiles); counted, never removed."""
    if x.size < 4:
        return 0
    q1, q3 = np.percentile(x, [25, 75])
    fence = 1.5 * (q3 - q1)
    return int(((x < q1 - fence) | (x > q3 + fence)).sum())


def lag1_autocorrelation(x: np.ndarray) -> float:
    """The lag-1 autocorrelation of the samples in the order they were taken (NaN below three
    samples or when all are equal)."""
    if x.size < 3:
        return math.nan
    d = x - x.mean()
    denom = float(d @ d)
    return float(d[:-1] @ d[1:]) / denom if denom > 0 else math.nan


def effective_n(n: int, lag1: float) -> float:
    """The effective sample size n (1 - r) / (1 + r) of an AR(1) series with lag-1
    autocorrelation r, at most n (a negative r is not counted as extra information)."""
    if not n or not math.isfinite(lag1):
        return float(n)
    r = min(max(lag1, -0.999), 0.999)
    return float(min(n, max(1.0, n * (1 - r) / (1 + r))))


def autocorrelated(n: int, lag1: float) -> bool:
    """The lag-1 autocorrelation is beyond what independent samples give at 95 % (Bartlett:
    |r| > 1.96 / sqrt(n))."""
    return bool(n >= 3 and math.isfinite(lag1) and abs(lag1) > 1.96 / math.sqrt(n))


def summarize(samples, confidence: float, normality: bool = True) -> dict:
    """Everything the summary row says about one metric's repetitions. ``normality=False``
    leaves ``normality_p`` NaN: the bench does, since Shapiro-Wilk needs scipy.stats, whose
    import cost rank 0 a second of every launch while the other ranks spun; the summary
    computes it from the raw repetitions instead (``results.summary_frame``)."""
    x = np.asarray(samples, dtype=float)
    n = int(x.size)
    if n == 0:
        nan = math.nan
        return dict(n=0, mean=nan, std=nan, ci_low=nan, ci_high=nan, ci_method="none",
                    rel_halfwidth=nan, median=nan, median_ci_low=nan, median_ci_high=nan,
                    min=nan, max=nan, p5=nan, p95=nan, outliers=0, lag1=nan, effective_n=0.0,
                    normality_p=nan)
    mean = float(x.mean())
    hw = half_width(x, confidence)
    low, high, method = time_interval(x, confidence)
    mlo, mhi = median_interval(x, confidence)
    p5, p95 = (float(v) for v in np.percentile(x, [5, 95]))
    lag1 = lag1_autocorrelation(x)
    return dict(
        n=n,
        mean=mean,
        std=float(x.std(ddof=1)) if n > 1 else math.nan,
        ci_low=low,
        ci_high=high,
        ci_method=method,
        rel_halfwidth=hw / abs(mean) if mean else math.nan,
        median=float(np.median(x)),
        median_ci_low=mlo,
        median_ci_high=mhi,
        min=float(x.min()),
        max=float(x.max()),
        p5=p5,
        p95=p95,
        outliers=tukey_outliers(x),
        lag1=lag1,
        effective_n=effective_n(n, lag1),
        normality_p=normality_p(x) if normality else math.nan,
    )


def summarize_simulated(samples, confidence: float, exact: bool) -> dict:
    """``summarize`` of a simulated cell's repetitions (``harness/simulate/bench.py``). A call
    simulated without delays takes the same time every time (``exact``): one repetition is the
    cell, with no spread and an interval of no width (``ci_method`` ``simulated``)."""
    s = summarize(samples, confidence, normality=False)
    if exact:
        s.update(std=0.0, ci_low=s["mean"], ci_high=s["mean"], rel_halfwidth=0.0,
                 median_ci_low=s["median"], median_ci_high=s["median"], ci_method="simulated",
                 effective_n=float(s["n"]))
    return s
