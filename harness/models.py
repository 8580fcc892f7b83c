"""Hockney cost models of the six Open MPI allreduce algorithms and the SUARA2 selector.

Source: E. Nuriyev, R. R. Manumachu, S. Aseeri, M. K. Verma, A. L. Lastovetsky, "SUARA: a
scalable universal allreduce communication algorithm for acceleration of parallel deep
learning applications", JPDC 2023 (``/work/shared/papers/suara-nuriyev-2023.md``).
Equation numbers below are the paper's.

Every model is linear in its parameters: ``T_a(P, m) = alpha_a*A + beta_a*B + gamma*G`` with
coefficients ``(A, B, G) = coefficients(a, P, m, m_s)``; ``cost`` evaluates it and the fitters
regress on it.

Choices made where the paper is silent or ambiguous (see also ``docs/models.md``):

1. **nono** (eq. 4): the paper gives no formula (30 reduce x bcast variants, Table 1). We model
   it as a binomial-tree reduce followed by a binomial-tree broadcast of the whole message,
   ``log2 P * (alpha + beta*m + gamma*m) + log2 P * (alpha + beta*m)``, i.e. the same shape as
   the linear algorithm (eqs. 1-3) with ``P - 1`` sequential steps replaced by ``log2 P`` tree
   levels.
2. **log2 P** for rd (eq. 5), rab (eq. 8) and nono is the real-valued ``log2 P`` for every
   ``P``, as in Table 1 (the paper derives rd/rab for powers of two only; Open MPI's extra
   fold-in steps for other ``P`` are not modelled). This also keeps the models smooth for the
   continuous relaxation in P_c (Sect. 4.2).
3. **rs** (eq. 7): the segment count ``m / (m_s * P)`` is real-valued (no ceiling), as printed.
4. **P = 1** costs 0 for every algorithm (the formula of rs, eq. 7, would otherwise give
   ``(m/m_s - 1)(...)``); a one-process sub-allreduce in SUARA2 therefore costs nothing.
5. **SUARA2** (eq. 9): both stages reduce the *whole* message m over their sub-communicator:
   ``T = T_{a_r}(P_c, m) + T_{a_c}(P / P_c, m)`` (no message decomposition, Sect. 1/3).
   The worked example, eq. (11), writes the rs segment count as ``m/(m_s*P)`` in both stages
   whereas eq. (9) with eq. (7) gives ``m/(m_s*P_c)`` and ``m/(m_s*P/P_c)``; eq. (13) uses the
   latter (``m/(m_s*sqrt(P))``). We follow eq. (9)+(7)+(13); the stationary point is still
   ``sqrt(P)`` but the sign test ``A_1`` of eq. (11) becomes
   ``A_1' = 2*alpha + beta*m_s + gamma*m_s + (alpha + gamma*m_s) * m/(m_s*P) > 0`` (always).
6. **Parameters**: Table 4 gives one (alpha, beta) pair, for rs only, plus gamma; the paper
   does *not* say that the other algorithms share it (it stresses algorithm-specific pairs,
   Sect. 4.4). ``Params.paper()`` nevertheless uses the rs pair for all six algorithms as a
   stand-in and says so in its provenance. m_s = "8 KB" (Sect. 5) is taken as 8192 B.
7. **Grids** (Sect. 4.2, eq. 12): the paper rounds P_c* to floor/ceil and ignores whether
   the result divides P. We only accept P_c that divide P: for each stationary point P_c*
   we take the nearest divisors of P below and above it (the divisor floor/ceiling), and
   always compare them with the endpoints P_c = 1 and P_c = P (eq. 12's fallback). Because
   ``T`` is monotone between consecutive stationary points, this candidate set contains the
   minimum over all divisors (so the result equals brute force, see ``brute_force_suara2``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

ALL6: tuple[str, ...] = ("linear", "nono", "rd", "rnos", "rs", "rab")

# Table 4 (Shaheen-II, Cray XC40), ring with segmentation, and Sect. 5 (m_s = 8 KB).
PAPER_ALPHA_RS = 1.5e-6  # s
PAPER_BETA_RS = 6.25e-11  # s/B
PAPER_GAMMA = 2e-10  # s/B
PAPER_MS = 8192  # B


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Params:
    """Hockney parameters: ``ab[name] = (alpha [s], beta [s/B])`` per algorithm, the
    algorithm-independent reduction cost ``gamma`` [s/B] and the rs segment size ``m_s`` [B].
    ``provenance`` is free-form (source, date, campaign, fit quality, ...)."""

    ab: Mapping[str, tuple[float, float]]
    gamma: float
    m_s: float = PAPER_MS
    provenance: Mapping = field(default_factory=dict, compare=False)

    @classmethod
    def paper(cls) -> Params:
        """Table 4 of the paper: alpha_rs = 1.5e-6 s, beta_rs = 6.25e-11 s/B, gamma = 2e-10
        s/B, and m_s = 8 KB (Sect. 5, taken as 8192 B). The paper gives (alpha, beta) for rs
        only and does not state that the other algorithms share it; they get the rs pair here
        as an explicit assumption (see ``provenance``)."""
        ab = {a: (PAPER_ALPHA_RS, PAPER_BETA_RS) for a in ALL6}
        return cls(ab=ab, gamma=PAPER_GAMMA, m_s=PAPER_MS, provenance={
            "source": "Nuriyev et al., JPDC 2023, Table 4 (Shaheen-II, Cray XC40)",
            "measured": ["rs", "gamma"],
            "assumed": "alpha, beta of linear, nono, rd, rnos, rab copied from rs "
                       "(the paper publishes only the rs pair)",
            "m_s": "8 KB in Sect. 5, taken as 8192 B",
        })

    def alpha(self, algorithm: str) -> float:
        return float(self._pair(algorithm)[0])

    def beta(self, algorithm: str) -> float:
        return float(self._pair(algorithm)[1])

    def _pair(self, algorithm: str) -> tuple[float, float]:
        try:
            return self.ab[algorithm]
        except KeyError:
            raise KeyError(f"no (alpha, beta) for algorithm {algorithm!r}; have {sorted(self.ab)}") from None

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithms with parameters, in ALL6 order first."""
        return tuple(a for a in ALL6 if a in self.ab) + tuple(sorted(a for a in self.ab if a not in ALL6))

    def to_dict(self) -> dict:
        return {
            "ab": {a: {"alpha": float(al), "beta": float(be)} for a, (al, be) in self.ab.items()},
            "gamma": float(self.gamma),
            "m_s": float(self.m_s),
            "provenance": _plain(dict(self.provenance)),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Params:
        ab = {}
        for a, v in d["ab"].items():
            if isinstance(v, Mapping):
                ab[a] = (float(v["alpha"]), float(v["beta"]))
            else:
                ab[a] = (float(v[0]), float(v[1]))
        return cls(ab=ab, gamma=float(d["gamma"]), m_s=float(d.get("m_s", PAPER_MS)),
                   provenance=dict(d.get("provenance", {})))


def _plain(x):
    """JSON-friendly copy (numpy scalars -> Python, tuples -> lists)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


# --------------------------------------------------------------------------- cost models


def coefficients(algorithm: str, P: float, m: float, m_s: float = PAPER_MS) -> tuple[float, float, float]:
    """``(A, B, G)`` such that ``T_a(P, m) = alpha_a*A + beta_a*B + gamma*G`` (Table 1).
    ``P`` may be real-valued (continuous relaxation); ``P == 1`` gives zeros."""
    P = float(P)
    m = float(m)
    if P < 1:
        raise ValueError(f"P must be >= 1, got {P}")
    if P == 1:
        return 0.0, 0.0, 0.0
    L = math.log2(P)
    if algorithm == "linear":
        # eq. (3) = (1) + (2): (P-1) * (2*(alpha + beta*m) + gamma*m)
        return 2 * (P - 1), 2 * (P - 1) * m, (P - 1) * m
    if algorithm == "nono":
        # eq. (4), our choice: binomial reduce + binomial bcast of the whole message:
        # log2 P * (alpha + beta*m + gamma*m) + log2 P * (alpha + beta*m)
        return 2 * L, 2 * L * m, L * m
    if algorithm == "rd":
        # eq. (5): log2 P * (alpha + beta*m + gamma*m)
        return L, L * m, L * m
    if algorithm == "rnos":
        # eq. (6): 2(P-1) alpha + 2 (P-1)/P beta m + (P-1)/P gamma m
        return 2 * (P - 1), 2 * (P - 1) / P * m, (P - 1) / P * m
    if algorithm == "rs":
        # eq. (7): (P + m/(m_s P) - 2) (alpha + beta m_s + gamma m_s) + (P-1)(alpha + beta m/P)
        k = P + m / (m_s * P) - 2
        return k + (P - 1), k * m_s + (P - 1) * m / P, k * m_s
    if algorithm == "rab":
        # eq. (8): 2 log2 P alpha + 2 (P-1)/P beta m + (P-1)/P gamma m
        return 2 * L, 2 * (P - 1) / P * m, (P - 1) / P * m
    raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALL6}")


def cost(algorithm: str, P: float, m_bytes: float, params: Params) -> float:
    """Predicted time [s] of ``algorithm`` on ``P`` processes for ``m_bytes`` per process
    (Table 1, eqs. 3-8; nono is our choice, see the module docstring). P = 1 costs 0."""
    A, B, G = coefficients(algorithm, P, m_bytes, params.m_s)
    return params.alpha(algorithm) * A + params.beta(algorithm) * B + params.gamma * G


def best_single(P: int, m: float, params: Params, algorithms: Sequence[str] | None = None) -> tuple[str, float]:
    """The fastest single (native) algorithm on all P processes: ``(name, time)``."""
    algs = _algs(params, algorithms)
    times = [(cost(a, P, m, params), i, a) for i, a in enumerate(algs)]
    t, _, a = min(times)
    return a, t


# --------------------------------------------------------------------------- SUARA2


def suara2_cost(a_r: str, a_c: str, P: float, P_c: float, m: float, params: Params) -> float:
    """Eq. (9): ``T_{a_r}(P_c, m, m_s) + T_{a_c}(P / P_c, m, m_s)``. Rows of P_c processes
    run a_r on the whole message, then columns of P_r = P / P_c processes run a_c on the whole
    message. A one-process sub-allreduce costs 0, so P_c = P gives T_{a_r}(P) and P_c = 1
    gives T_{a_c}(P). ``P_c`` may be real-valued (continuous relaxation)."""
    if not 1 <= P_c <= P:
        raise ValueError(f"need 1 <= P_c <= P, got P_c={P_c}, P={P}")
    return cost(a_r, P_c, m, params) + cost(a_c, P / P_c, m, params)


def _relaxed_cost(a_r: str, a_c: str, P: float, x: float, m: float, params: Params) -> float:
    """Eq. (9) with the formulas of Table 1 applied for every real P_c in [1, P] (no P = 1
    special case), i.e. the continuous extension analysed in Sect. 4.2."""
    def T(a, n):
        n = max(float(n), 1.0)
        A, B, G = _raw_coefficients(a, n, m, params.m_s)
        return params.alpha(a) * A + params.beta(a) * B + params.gamma * G
    return T(a_r, x) + T(a_c, P / x)


def _raw_coefficients(algorithm: str, P: float, m: float, m_s: float) -> tuple[float, float, float]:
    if P == 1.0:
        # Table 1 formulas at P = 1 (only rs is non-zero there)
        if algorithm == "rs":
            k = m / m_s - 1
            return k, k * m_s, k * m_s
        return 0.0, 0.0, 0.0
    return coefficients(algorithm, P, m, m_s)


@dataclass(frozen=True)
class Candidate:
    """The outcome of the analytical formula (Algorithm 2, line 5) for one (a_r, a_c)."""

    a_r: str
    a_c: str
    P_r: int
    P_c: int
    time: float
    stationary: tuple[float, ...]  # stationary points P_c* of the relaxed model in (1, P)
    curvature: tuple[float, ...]  # d2T/dP_c2 at each stationary point
    method: str  # "closed-form" (a_r == a_c: P_c* = sqrt(P)) or "numeric"
    tried: tuple[int, ...]  # the P_c values evaluated (divisor floor/ceil + endpoints)

    @property
    def is_grid(self) -> bool:
        return 1 < self.P_c < self.P_r * self.P_c

    def as_row(self) -> dict:
        return {"a_r": self.a_r, "a_c": self.a_c, "P_r": self.P_r, "P_c": self.P_c,
                "time": self.time, "grid": self.is_grid, "method": self.method,
                "stationary": ";".join(f"{s:.4g}" for s in self.stationary),
                "curvature": ";".join(f"{c:.3g}" for c in self.curvature),
                "tried": ";".join(str(t) for t in self.tried)}


@dataclass(frozen=True)
class Choice:
    """SUARA2's decision (Algorithm 2) for one (P, m).

    ``a_r, a_c, P_r, P_c, time``: the chosen combination and grid (``P_r * P_c == P``).
    If no proper grid beats every single algorithm (or none exists), the choice is the best
    single algorithm on all P processes, written ``a_r = a_c = best``, ``(P_r, P_c) = (1, P)``,
    and ``fallback`` says why: ``"no-grid"`` (P has no divisor 1 < P_c < P: P = 1, 2, 3 or
    prime) or ``"single"`` (a grid exists but is predicted slower). ``fallback is None``
    means a proper grid was chosen. ``table`` holds the per-combination answers of the
    analytical formula (endpoints included, as in the paper); ``grid_table`` the same
    restricted to proper grids, and ``best_grid`` the best of those whatever the outcome
    (None for ``"no-grid"``); ``speedup = best_single_time / time``."""

    P: int
    m: float
    a_r: str
    a_c: str
    P_r: int
    P_c: int
    time: float
    best_single: str
    best_single_time: float
    speedup: float
    table: tuple[Candidate, ...]
    fallback: str | None = None
    best_grid: Candidate | None = None
    grid_table: tuple[Candidate, ...] = ()

    @property
    def grid_speedup(self) -> float | None:
        """best single time / best proper grid time (None without a grid)."""
        return None if self.best_grid is None else self.best_single_time / self.best_grid.time

    def table_frame(self, grids_only: bool = False):
        """The candidate table (or ``grid_table``) as a pandas DataFrame, fastest first."""
        import pandas as pd
        df = pd.DataFrame([c.as_row() for c in (self.grid_table if grids_only else self.table)])
        return df.sort_values("time", kind="stable").reset_index(drop=True)


def divisors(P: int) -> list[int]:
    """All divisors of P, ascending (1 and P included)."""
    P = int(P)
    small, large = [], []
    d = 1
    while d * d <= P:
        if P % d == 0:
            small.append(d)
            if d != P // d:
                large.append(P // d)
        d += 1
    return small + large[::-1]


def _stationary_points(a_r: str, a_c: str, P: int, m: float, params: Params) -> tuple[list[float], str]:
    """Stationary points of the relaxed eq. (9) in the open interval (1, P), from eq. (10).

    a_r == a_c: the model is symmetric under P_c -> P/P_c, so dT/dP_c = T'(P_c) - T'(P/P_c)
    P/P_c^2 vanishes at P_c* = sqrt(P) for every algorithm (closed form, as eq. 11 for rs).
    Other stationary points (possible for algorithms whose T is not convex in log P_c) and
    every mixed combination are found numerically: sign changes of a central-difference
    dT/dP_c on a 257-point log-spaced grid, refined with scipy.optimize.brentq."""
    from scipy.optimize import brentq

    if P <= 2:
        return [], "closed-form" if a_r == a_c else "numeric"
    lo, hi = math.log(1.0), math.log(float(P))

    def dT(u):  # derivative with respect to P_c, evaluated at P_c = e^u
        x = math.exp(u)
        h = 1e-6 * x
        return (_relaxed_cost(a_r, a_c, P, x + h, m, params)
                - _relaxed_cost(a_r, a_c, P, x - h, m, params)) / (2 * h)

    pts: list[float] = []
    method = "numeric"
    if a_r == a_c:
        pts.append(math.sqrt(P))
        method = "closed-form"
    eps = 1e-9 * (hi - lo)
    us = np.linspace(lo + eps, hi - eps, 257)
    ds = [dT(u) for u in us]
    scale = max(abs(d) for d in ds) or 1.0
    for u0, u1, d0, d1 in zip(us[:-1], us[1:], ds[:-1], ds[1:]):
        if abs(d0) <= 1e-12 * scale and abs(d1) <= 1e-12 * scale:
            continue  # (locally) constant function: no isolated stationary point
        if d0 == 0.0:
            r = u0
        elif d0 * d1 < 0:
            r = brentq(dT, u0, u1, xtol=1e-12)
        else:
            continue
        x = math.exp(r)
        if all(abs(x - p) > 1e-6 * p for p in pts):
            pts.append(x)
    return sorted(pts), method


def _curvature(a_r: str, a_c: str, P: int, x: float, m: float, params: Params) -> float:
    """d2T/dP_c2 of the relaxed model at x (eq. 10), by central differences."""
    h = 1e-4 * x
    f = lambda y: _relaxed_cost(a_r, a_c, P, y, m, params)
    return (f(x + h) - 2 * f(x) + f(x - h)) / (h * h)


def analytical_formula(a_r: str, a_c: str, P: int, m: float, params: Params,
                       endpoints: bool = True, _stationary=None) -> Candidate | None:
    """``AFormula`` of Algorithm 2 (Sect. 4.2, eqs. 10-12) for one combination.

    For every stationary point P_c* of the relaxed model (closed form sqrt(P) when a_r ==
    a_c, numerical otherwise) the nearest divisors of P below and above P_c* are evaluated
    (the paper's floor/ceiling, restricted to grids that exist), together with the endpoints
    P_c = P and P_c = 1 (eq. 12's fallback when d2T/dP_c2 <= 0) and the smallest and largest
    proper divisors (the divisor ceiling of 1 and floor of P: the relaxed model is monotone
    between consecutive points of {1, P_c*..., P}, so this set contains the best divisor,
    whatever the sign of the second derivative). The cheapest wins; ties are broken towards
    the endpoint (1, P) first, as in eq. 12, then in the order tried.

    ``endpoints=False`` restricts the answer to proper grids (1 < P_c < P). Returns None if P
    has no proper divisor."""
    P = int(P)
    divs = divisors(P)
    if not endpoints:
        divs = [d for d in divs if 1 < d < P]
        if not divs:
            return None
    if _stationary is None:
        pts, method = _stationary_points(a_r, a_c, P, m, params)
        curv = tuple(_curvature(a_r, a_c, P, x, m, params) for x in pts)
    else:
        pts, method, curv = _stationary
    proper = [d for d in divs if 1 < d < P]
    tried = [P, 1] if endpoints and P > 1 else ([1] if endpoints else [])
    # the relaxed model is monotone between consecutive points of {1, P_c*..., P}: the best
    # divisor of each monotone piece is the divisor floor/ceiling of one of these points.
    # For the endpoints 1 and P that is the smallest / largest proper divisor (the true
    # endpoints differ from the relaxed model there, since a 1-process allreduce costs 0).
    for d in (proper[-1:] + proper[:1]):
        if d not in tried:
            tried.append(d)
    for x in pts:
        below = [d for d in divs if d <= x + 1e-9]
        above = [d for d in divs if d >= x - 1e-9]
        for d in (below[-1] if below else None, above[0] if above else None):
            if d is not None and d not in tried:
                tried.append(d)
    best = None
    for pc in tried:
        t = suara2_cost(a_r, a_c, P, pc, m, params)
        if best is None or t < best[0] * (1 - 1e-12):
            best = (t, pc)
    t, pc = best
    return Candidate(a_r=a_r, a_c=a_c, P_r=P // pc, P_c=pc, time=t, stationary=tuple(pts),
                     curvature=curv, method=method, tried=tuple(tried))


def _algs(params: Params, algorithms: Sequence[str] | None) -> tuple[str, ...]:
    if algorithms is None:
        algs = tuple(a for a in ALL6 if a in params.ab)
    else:
        algs = tuple(algorithms)
    if not algs:
        raise ValueError("no algorithms to choose from")
    for a in algs:
        params._pair(a)
    return algs


def select_suara2(P: int, m: float, params: Params, algorithms: Sequence[str] | None = None) -> Choice:
    """Algorithm 2 (SUARA2_find_optimals): evaluate ``analytical_formula`` for all |A|^2
    combinations (a_r, a_c) and keep the fastest (strict ``<``, first in iteration order on
    ties, as in the pseudocode). ``algorithms=None`` means those of ALL6 that ``params`` has
    (all six for ``Params.paper()``).

    A prime P (or P < 4) has no grid: the result is the best single algorithm with
    ``fallback="no-grid"``. The paper's Note (Sect. 3) proposes padding to Q > P processes
    holding the identity element; ``padded_grid`` computes that alternative."""
    P = int(P)
    if P < 1:
        raise ValueError(f"P must be >= 1, got {P}")
    algs = _algs(params, algorithms)
    single, t_single = best_single(P, m, params, algs)
    table, grid_table = [], []
    for ar in algs:
        for ac in algs:
            c = analytical_formula(ar, ac, P, m, params)
            table.append(c)
            g = analytical_formula(ar, ac, P, m, params, endpoints=False,
                                   _stationary=(c.stationary, c.method, c.curvature))
            if g is not None:
                grid_table.append(g)
    table, grid_table = tuple(table), tuple(grid_table)
    best_grid = None
    for c in grid_table:
        if best_grid is None or c.time < best_grid.time:
            best_grid = c
    if best_grid is None:
        return Choice(P=P, m=m, a_r=single, a_c=single, P_r=1, P_c=P, time=t_single,
                      best_single=single, best_single_time=t_single, speedup=1.0, table=table,
                      fallback="no-grid", best_grid=None, grid_table=grid_table)
    best = None
    for c in table:  # Algorithm 2, lines 3-10
        if best is None or c.time < best.time:
            best = c
    if not best.is_grid or best.time >= t_single:
        return Choice(P=P, m=m, a_r=single, a_c=single, P_r=1, P_c=P, time=t_single,
                      best_single=single, best_single_time=t_single, speedup=1.0, table=table,
                      fallback="single", best_grid=best_grid, grid_table=grid_table)
    return Choice(P=P, m=m, a_r=best.a_r, a_c=best.a_c, P_r=best.P_r, P_c=best.P_c,
                  time=best.time, best_single=single, best_single_time=t_single,
                  speedup=t_single / best.time, table=table, fallback=None, best_grid=best_grid,
                  grid_table=grid_table)


def brute_force_suara2(P: int, m: float, params: Params,
                       algorithms: Sequence[str] | None = None) -> list[tuple[float, str, str, int]]:
    """Every divisor P_c of P (1 and P included) x every combination: a list of
    ``(time, a_r, a_c, P_c)`` sorted by time. For checking ``select_suara2``."""
    algs = _algs(params, algorithms)
    rows = [(suara2_cost(ar, ac, P, pc, m, params), ar, ac, pc)
            for pc in divisors(P) for ar in algs for ac in algs]
    return sorted(rows, key=lambda r: r[0])


@dataclass(frozen=True)
class PaddedGrid:
    """Padding P processes to Q > P (extra ranks contribute the reduction's identity
    element, Note in Sect. 3). ``choice`` is ``select_suara2(Q, ...)``; ``time`` its best
    proper-grid time; ``useful`` whether that beats the best single algorithm on P."""

    P: int
    Q: int
    choice: Choice
    time: float
    useful: bool


def padded_grid(P: int, m: float, params: Params, algorithms: Sequence[str] | None = None,
                max_Q: int | None = None) -> PaddedGrid:
    """The smallest Q > P (up to ``max_Q``, default 2P) whose best proper grid is predicted
    faster than the best single algorithm on the original P processes. If none is, the
    smallest composite Q > P is returned with ``useful=False``. The model charges the padded
    run as a full Q-process SUARA2 (the identity-element ranks communicate like any other)."""
    P = int(P)
    max_Q = int(max_Q) if max_Q is not None else max(2 * P, 4)
    _, t_single = best_single(P, m, params, algorithms)
    first = None
    for Q in range(max(P + 1, 4), max_Q + 1):
        if len(divisors(Q)) <= 2:
            continue
        ch = select_suara2(Q, m, params, algorithms)
        g = ch.best_grid
        if first is None:
            first = PaddedGrid(P=P, Q=Q, choice=ch, time=g.time, useful=g.time < t_single)
        if g.time < t_single:
            return PaddedGrid(P=P, Q=Q, choice=ch, time=g.time, useful=True)
    if first is None:
        raise ValueError(f"no composite Q in ({P}, {max_Q}]")
    return first


# --------------------------------------------------------------------------- fitting


def _r2(y: np.ndarray, yhat: np.ndarray) -> float:
    ss_res = float(np.sum((y - yhat) ** 2))
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


def fit(df, algorithm: str, gamma: float = PAPER_GAMMA, m_s: float = PAPER_MS,
        weighting: str = "relative") -> tuple[float, float, float, int]:
    """Fit (alpha, beta) of ``algorithm`` (a model name, e.g. "rs") to measured means.

    ``df`` has columns ``procs``, ``size`` (bytes per process) and ``mean`` (s); if it has a
    ``status`` column only ``ok`` / ``not-converged`` rows are used; rows with procs < 2 are
    dropped (they carry no information). For each cell, with ``(A, B, G) = coefficients(...)``:
    ``mean - gamma*G ~= alpha*A + beta*B``, solved by non-negative least squares
    (scipy.optimize.nnls). ``weighting="relative"`` (default) divides every row by its
    measured mean, i.e. minimises relative errors: times span orders of magnitude and an
    unweighted fit would let the largest messages decide alpha. ``"none"`` is plain NNLS.

    Returns ``(alpha, beta, r2, n)``: r2 is the coefficient of determination of the fitted
    communication part (mean - gamma*G) against its prediction, unweighted; n the rows used."""
    from scipy.optimize import nnls

    d = df
    if "status" in d.columns:
        d = d[d["status"].isin(["ok", "not-converged"])]
    d = d[(d["procs"] >= 2) & np.isfinite(d["mean"].astype(float))]
    n = len(d)
    if n < 2:
        raise ValueError(f"need at least 2 usable cells to fit {algorithm!r}, got {n}")
    coef = np.array([coefficients(algorithm, int(p), float(s), m_s)
                     for p, s in zip(d["procs"], d["size"])], dtype=float)
    t = d["mean"].to_numpy(dtype=float)
    y = t - gamma * coef[:, 2]
    X = coef[:, :2]
    if weighting == "relative":
        w = 1.0 / np.where(t > 0, t, np.nan)
        if not np.all(np.isfinite(w)):
            raise ValueError("relative weighting needs positive mean times")
    elif weighting == "none":
        w = np.ones_like(t)
    else:
        raise ValueError(f"weighting must be 'relative' or 'none', got {weighting!r}")
    # scale columns so that nnls is well conditioned (alpha ~ 1e-6, beta ~ 1e-10)
    Xw = X * w[:, None]
    scale = np.linalg.norm(Xw, axis=0)
    scale[scale == 0] = 1.0
    sol, _ = nnls(Xw / scale, y * w)
    alpha, beta = (sol / scale).tolist()
    r2 = _r2(y, X @ np.array([alpha, beta]))
    return float(alpha), float(beta), float(r2), int(n)


def fit_gamma(sizes: Sequence[float], times: Sequence[float]) -> float:
    """gamma [s/B]: least-squares slope of local reduction time against bytes."""
    x = np.asarray(sizes, dtype=float)
    y = np.asarray(times, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        raise ValueError("need at least two distinct sizes")
    slope, _intercept = np.polyfit(x, y, 1)
    return float(slope)


def fit_all(summary_df, algorithm_map: Mapping[str, str], gamma: float, m_s: float = PAPER_MS,
            provenance: Mapping | None = None, weighting: str = "relative",
            library: str | None = None) -> Params:
    """Fit every model algorithm named in ``algorithm_map`` (summary name -> model name, e.g.
    ``{"native:ring": "rnos", "native:segmented_ring": "rs"}``; several summary names may map
    to one model name and are then pooled) from a ``summary.csv`` frame (columns
    ``algorithm, procs, size, mean, status``; only ``ok`` / ``not-converged`` rows; if a
    ``delay`` column exists only undelayed rows: delay mode "none"/empty, or max_delay 0).
    ``library`` (optional) keeps only rows of that ``library`` column value; otherwise rows of
    all libraries with a mapped name are pooled. Model algorithms without usable rows are
    left out of the result. Fit quality goes to ``provenance["fits"]``."""
    import datetime as _dt

    d = summary_df
    if "status" in d.columns:
        d = d[d["status"].isin(["ok", "not-converged"])]
    if library is not None:
        d = d[d["library"] == library]
    if "delay" in d.columns:
        d = d[d["delay"].isna() | d["delay"].astype(str).isin(["none", "", "0", "0.0"])
              | (d["max_delay"].fillna(0).astype(float) == 0 if "max_delay" in d.columns else False)]
    by_model: dict[str, list[str]] = {}
    for name, model in algorithm_map.items():
        if model not in ALL6:
            raise ValueError(f"{name!r} maps to unknown model algorithm {model!r}")
        by_model.setdefault(model, []).append(name)
    ab, fits = {}, {}
    for model, names in by_model.items():
        rows = d[d["algorithm"].isin(names)]
        try:
            alpha, beta, r2, n = fit(rows, model, gamma=gamma, m_s=m_s, weighting=weighting)
        except ValueError as e:
            fits[model] = {"summary_names": names, "error": str(e)}
            continue
        ab[model] = (alpha, beta)
        fits[model] = {"summary_names": names, "alpha": alpha, "beta": beta, "r2": r2, "n": n}
    prov = {"source": "fit_all", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "weighting": weighting, "gamma": gamma, "library": library, "fits": fits}
    prov.update(dict(provenance or {}))
    return Params(ab=ab, gamma=gamma, m_s=m_s, provenance=prov)


def measure_gamma(sizes: Iterable[int] = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24),
                  reps: int = 20, dtype=np.float64) -> float:
    """gamma [s/B] on this machine, without MPI: for each size (bytes of one operand) time
    ``np.add(a, b, out=a)`` ``reps`` times (after one warm-up) and keep the minimum, then
    return the slope of those minima against bytes (``fit_gamma``)."""
    xs, ts = [], []
    itemsize = np.dtype(dtype).itemsize
    for size in sizes:
        n = max(1, int(size) // itemsize)
        a = np.ones(n, dtype=dtype)
        b = np.ones(n, dtype=dtype)
        np.add(a, b, out=a)
        best = math.inf
        for _ in range(int(reps)):
            t0 = time.perf_counter()
            np.add(a, b, out=a)
            best = min(best, time.perf_counter() - t0)
        xs.append(a.nbytes)
        ts.append(best)
    return fit_gamma(xs, ts)
