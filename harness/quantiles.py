"""The two distributions the stopping rule and the median's interval need, in numpy alone:
every rank of every launch decides the stopping rule, and importing scipy.special cost each
rank about 0.3 s of start-up (on a 2-core machine with P = 2, a quarter of a short launch).
Both agree with scipy to 1e-12 (tests/test_stats.py compares them over every degree of
freedom up to 5,000 and beyond).

- ``t_critical``: the two-sided Student-t critical value t((1+c)/2, dof), the ``t`` of the
  confidence interval ``mean +- t s / sqrt(n)``. Up to ``EXACT_DOF`` degrees of freedom it
  solves A(t | dof) = c by Newton's method, with A the closed-form finite series of
  Abramowitz & Stegun 26.7.3 (odd dof) and 26.7.4 (even dof); above, the Cornish-Fisher
  expansion of A&S 26.7.5, whose error there is below 1e-13.
- ``binomial_half_cdf``: P(B <= i) for B ~ Binomial(n, 1/2), i = 0..n.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

EXACT_DOF = 1000


def _cornish_fisher(z: float, dof: np.ndarray) -> np.ndarray:
    """A&S 26.7.5: t ~ z + g1/v + g2/v^2 + g3/v^3 + g4/v^4."""
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    v = dof
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def _coverage(t: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """A(t | dof) = P(|T| <= t), dof integers >= 1, by the finite series of A&S 26.7.3/4."""
    theta = np.arctan(t / np.sqrt(dof))
    s, c2 = np.sin(theta), np.cos(theta) ** 2
    odd = dof % 2 == 1
    # odd: (2/pi)(theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), k up to (dof-3)/2
    # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), k up to (dof-2)/2
    terms = np.where(odd, (dof - 3) // 2, (dof - 2) // 2)
    term = np.ones_like(t)
    total = np.ones_like(t)
    for k in range(1, int(terms.max(initial=0)) + 1):
        ratio = np.where(odd, (2 * k) / (2 * k + 1), (2 * k - 1) / (2 * k))
        term = np.where(k <= terms, term * ratio * c2, 0.0)
        total += term
    odd_value = np.where(dof == 1, 2 * theta / math.pi,
                         2 / math.pi * (theta + s * np.sqrt(c2) * total))
    return np.where(odd, odd_value, s * total)


def _density_twice(t: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """dA/dt = 2 f(t), f the Student-t density."""
    log_norm = np.array([math.lgamma((v + 1) / 2) - math.lgamma(v / 2) for v in dof])
    log_norm -= 0.5 * np.log(dof * math.pi)
    return 2 * np.exp(log_norm - (dof + 1) / 2 * np.log1p(t * t / dof))


def t_critical(confidence: float, dof) -> np.ndarray:
    """t((1+confidence)/2, dof) for each integer ``dof`` >= 1 (an array; NaN where dof < 1)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    dof = np.asarray(dof, dtype=float)
    out = np.full(dof.shape, np.nan)
    valid = dof >= 1
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    large = valid & (dof > EXACT_DOF)
    out[large] = _cornish_fisher(z, dof[large])
    small = valid & (dof <= EXACT_DOF)
    if small.any():
        out[small] = _solve(confidence, z, dof[small])
    return out


def _solve(confidence: float, z: float, dof: np.ndarray) -> np.ndarray:
    """Newton's method on A(t | dof) = confidence: A is concave in t > 0, so from below the
    iterates rise to the root; a step past zero is halved instead."""
    t = np.where(dof == 1, math.tan(math.pi * confidence / 2), _cornish_fisher(z, dof))
    t = np.where(dof == 2, confidence * math.sqrt(2 / (1 - confidence**2)), t).astype(float)
    todo, last = np.arange(t.size), np.full(t.size, np.inf)
    for _ in range(60):
        tt, dd = t[todo], dof[todo]
        step = (_coverage(tt, dd) - confidence) / _density_twice(tt, dd)
        new = np.where(tt - step > 0, tt - step, tt / 2)
        t[todo] = new
        # done when the step is below 1e-12 of t, or no longer shrinks: the series' rounding
        # (about 1e-13 of A) is reached
        moving = (np.abs(step) > 1e-12 * new) & (np.abs(step) < 0.5 * last[todo])
        last[todo] = np.abs(step)
        todo = todo[moving]
        if not todo.size:
            break
    return t


def binomial_half_cdf(n: int) -> np.ndarray:
    """``cdf[i] = P(B <= i)``, B ~ Binomial(n, 1/2), i = 0..n: log C(n, j) summed term by term
    in extended precision (its rounding grows with n: 1e-9 at n = 1e5 in doubles, 1e-12 in
    x86's 80-bit long double)."""
    j = np.arange(1, n + 1, dtype=np.longdouble)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log((n - j + 1) / j))))
    pmf = np.exp(log_choose - n * np.log(np.longdouble(2)))
    return np.minimum(np.cumsum(pmf), 1.0).astype(float)
