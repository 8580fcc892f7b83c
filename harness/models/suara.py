"""SUARA2 and SUARA-L of the SUARA paper: the cost of P processes as a grid of
sub-allreduces (eq. 9), Algorithm 2's choice of grid and combination (Sect. 4.2, eqs. 10-13)
with the tables that explain it, brute force to check it, padding a prime P, and SUARA-L's L
dimensions (Fig. 4). The single-algorithm models are ``harness/models/hockney.py``'s.

Source: E. Nuriyev, R. R. Manumachu, S. Aseeri, M. K. Verma, A. L. Lastovetsky, "SUARA: a
scalable universal allreduce communication algorithm for acceleration of parallel deep
learning applications", JPDC 2023 (references: ``docs/papers.md``).
Equation numbers below are the paper's.

Choices made where the paper is silent or ambiguous (see also ``docs/models.md``; those of
the single-algorithm models are in ``hockney.py``):

1. **SUARA2** (eq. 9): both stages reduce the *whole* message m over their sub-communicator:
   ``T = T_{a_r}(P_c, m) + T_{a_c}(P / P_c, m)`` (no message decomposition, Sect. 1/3).
   The worked example, eq. (11), writes the rs segment count as ``m/(m_s*P)`` in both stages
   whereas eq. (9) with eq. (7) gives ``m/(m_s*P_c)`` and ``m/(m_s*P/P_c)``; eq. (13) uses the
   latter (``m/(m_s*sqrt(P))``). We follow eq. (9)+(7)+(13); the stationary point is still
   ``sqrt(P)`` but the sign test ``A_1`` of eq. (11) becomes
   ``A_1' = 2*alpha + beta*m_s + gamma*m_s + (alpha + gamma*m_s) * m/(m_s*P) > 0`` (always).
2. **Grids** (Sect. 4.2, eq. 12): the paper rounds P_c* to floor/ceil and ignores whether
   the result divides P. We only accept P_c that divide P: for each stationary point P_c*
   we take the nearest divisors of P below and above it (the divisor floor/ceiling), and
   always compare them with the endpoints P_c = 1 and P_c = P (eq. 12's fallback). Because
   ``T`` is monotone between consecutive stationary points, this candidate set contains the
   minimum over all divisors (so the result equals brute force, see ``brute_force_suara2``).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .hockney import Params, basis, best_single, resolve_algorithms, stage_cost

# --------------------------------------------------------------------------- SUARA2


def suara2_cost(a_r: str, a_c: str, P: float, P_c: float, m: float, params: Params) -> float:
    """Eq. (9): ``T_{a_r}(P_c, m, m_s) + T_{a_c}(P / P_c, m, m_s)``. Rows of P_c processes
    run a_r on the whole message, then columns of P_r = P / P_c processes run a_c on the whole
    message. A one-process sub-allreduce costs 0, so P_c = P gives T_{a_r}(P) and P_c = 1
    gives T_{a_c}(P). ``P_c`` may be real-valued (continuous relaxation)."""
    if not 1 <= P_c <= P:
        raise ValueError(f"need 1 <= P_c <= P, got P_c={P_c}, P={P}")
    return stage_cost(a_r, P_c, P, m, params) + stage_cost(a_c, P / P_c, P, m, params)


def _relaxed_cost(a_r: str, a_c: str, P: float, x: float, m: float, params: Params) -> float:
    """Eq. (9) with the formulas of Table 1 applied for every real P_c in [1, P] (no P = 1
    special case), i.e. the continuous extension analysed in Sect. 4.2."""
    def T(a, n):
        c0, c1, c2, c3 = basis(a, P, m, params)
        n = max(float(n), 1.0)
        return c0 + c1 * n + c2 / n + c3 * math.log2(n)
    return T(a_r, x) + T(a_c, P / x)


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
    method: str  # "closed-form": the roots of eq. (10) as a quadratic in P_c
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


@lru_cache(maxsize=4096)
def _divisors(P: int) -> tuple[int, ...]:
    small, large = [], []
    d = 1
    while d * d <= P:
        if P % d == 0:
            small.append(d)
            if d != P // d:
                large.append(P // d)
        d += 1
    return tuple(small + large[::-1])


def divisors(P: int) -> list[int]:
    """All divisors of P, ascending (1 and P included)."""
    return list(_divisors(int(P)))


_LN2 = math.log(2.0)


def _suara2_core(P: int, m: float, params: Params, algs: tuple[str, ...]) -> dict:
    """Algorithm 2's arithmetic for all |A|^2 combinations at once (numpy, no Python loop over
    combinations): the whole selection costs tens of microseconds.

    With ``T_a(n) = c0 + c1 n + c2/n + c3 log2 n`` (``basis``), eq. (10) for
    ``T(x) = T_r(x) + T_c(P/x)`` is ``dT/dx = c1r - c2r/x^2 + c3r/(x ln2) - c1c P/x^2 + c2c/P
    - c3c/(x ln2)``; times x^2 it is the quadratic
    ``(c1r + c2c/P) x^2 + (c3r - c3c)/ln2 x - (c2r + c1c P) = 0``, so the stationary points
    P_c* are its roots in (1, P) (for a_r == a_c and the rs model: sqrt(P), eq. 11), and
    ``d2T/dx2 = (2 c2r + 2 c1c P)/x^3 + (c3c - c3r)/(x^2 ln2)`` is their curvature.

    Candidates per combination, in this order: P_c = P, P_c = 1 (eq. 12's endpoints), the
    largest and smallest proper divisors, then the divisor floor and ceiling of each
    stationary point. The relaxed model is monotone between consecutive points of
    {1, P_c*..., P}, so the cheapest candidate is the cheapest divisor (``brute_force_suara2``
    checks this). Costs are looked up in ``T[a, d]``, the true cost (0 for one process) of
    algorithm a on divisor d processes."""
    divs = _divisors(P)
    D = len(divs)
    n = np.asarray(divs, dtype=float)
    C = np.array([basis(a, P, m, params) for a in algs])  # k x 4
    c0, c1, c2, c3 = C[:, 0:1], C[:, 1:2], C[:, 2:3], C[:, 3:4]
    T = c0 + c1 * n + c2 / n + c3 * np.log2(n)  # k x D, relaxed
    T[:, 0] = 0.0  # a one-process sub-allreduce costs nothing
    # quadratic a x^2 + b x + c = 0 for every (a_r, a_c): rows a_r, columns a_c
    qa = c1 + (c2 / P).T
    qb = (c3 - c3.T) / _LN2
    qc = -(c2 + c1.T * P)
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = np.sqrt(np.where(qb * qb - 4 * qa * qc >= 0, qb * qb - 4 * qa * qc, np.nan))
        lin = np.abs(qa) <= 1e-300
        r1 = np.where(lin, -qc / qb, (-qb + disc) / (2 * qa))
        r2 = np.where(lin, np.nan, (-qb - disc) / (2 * qa))
        roots = np.stack([r1, r2], axis=-1)  # k x k x 2
        roots[~((roots > 1) & (roots < P))] = np.nan
        roots = np.sort(roots, axis=-1)  # nan last
        curv = ((2 * c2[:, :, None] + 2 * c1.T[:, :, None] * P) / roots ** 3
                + (c3.T[:, :, None] - c3[:, :, None]) / (roots ** 2 * _LN2))
    k = len(algs)
    fixed = np.array([D - 1, 0, max(D - 2, 0), min(1, D - 1)])
    tol = 1e-9 * np.nan_to_num(roots, nan=1.0)
    floor = np.searchsorted(n, (np.nan_to_num(roots, nan=P) + tol).ravel(), "right").reshape(roots.shape) - 1
    ceil = np.searchsorted(n, (np.nan_to_num(roots, nan=P) - tol).ravel(), "left").reshape(roots.shape)
    cand = np.concatenate([np.broadcast_to(fixed, (k, k, 4)),
                           np.stack([floor[..., 0], ceil[..., 0], floor[..., 1], ceil[..., 1]],
                                    axis=-1)], axis=-1)
    cand = np.clip(cand, 0, D - 1)
    # cost of (a_r, a_c) at P_c = n[t]: rows run a_r on n[t], columns a_c on n[D-1-t]
    cost_all = T[:, None, :] + T[None, :, ::-1]  # k x k x D
    costs = np.take_along_axis(cost_all, cand, axis=-1)
    best = np.argmin(costs, axis=-1)
    proper = (cand > 0) & (cand < D - 1)
    grid_costs = np.where(proper, costs, np.inf)
    gbest = np.argmin(grid_costs, axis=-1)
    return {"divs": divs, "T": T, "roots": roots, "curv": curv, "cand": cand, "costs": costs,
            "best": best, "grid_best": gbest, "grid_costs": grid_costs}


def decide_suara2(P: int, m: float, params: Params, algorithms: Sequence[str] | None = None,
                  grids_only: bool = False) -> tuple[str, str, int, int, float, str | None]:
    """The decision of ``select_suara2`` alone, without its explanation tables:
    ``(a_r, a_c, P_r, P_c, time, fallback)``. This is what an allreduce call needs, so it is
    written for speed (plain floats, no numpy: on arrays of a few elements numpy's per-call
    cost dominates). Same arithmetic as ``_suara2_core``: per combination the roots of the
    quadratic of eq. (10) in (1, P), their divisor floor and ceiling, and the smallest and
    largest proper divisors; the endpoints P_c = 1 and P_c = P are the single algorithms,
    compared at the end (Algorithm 2 with eq. 12); ``grids_only=True`` skips that comparison
    and returns the best proper grid (``select_suara2(...).best_grid``) whenever P has one.
    ``benchmarks/p2p_vs_native.py`` times it."""
    P = int(P)
    if P < 1:
        raise ValueError(f"P must be >= 1, got {P}")
    algs = resolve_algorithms(params, algorithms)
    divs = _divisors(P)
    D = len(divs)
    log2 = math.log2
    Ts, C = [], []
    for a in algs:
        c0, c1, c2, c3 = b = basis(a, P, m, params)
        C.append(b)
        Ts.append([0.0] + [c0 + c1 * n + c2 / n + c3 * log2(n) for n in divs[1:]])
    t_single, single = min((T[-1], i) for i, T in enumerate(Ts))
    if D <= 2:
        return algs[single], algs[single], 1, P, t_single, "no-grid"
    fixed = (1, D - 2)
    best = (math.inf, 0, 0, 0)
    lo_r, hi_r = 1.0, float(P)
    for i, (_, c1r, c2r, c3r) in enumerate(C):
        Tr = Ts[i]
        for j, (_, c1c, c2c, c3c) in enumerate(C):
            Tc = Ts[j]
            qa, qb, qc = c1r + c2c / P, (c3r - c3c) / _LN2, -(c2r + c1c * P)
            cands = list(fixed)
            if qa != 0.0:
                disc = qb * qb - 4 * qa * qc
                if disc >= 0:
                    sq = math.sqrt(disc)
                    roots = ((-qb + sq) / (2 * qa), (-qb - sq) / (2 * qa))
                else:
                    roots = ()
            elif qb != 0.0:
                roots = (-qc / qb,)
            else:
                roots = ()
            for r in roots:
                if lo_r < r < hi_r:
                    f = bisect_right(divs, r * (1 + 1e-9)) - 1
                    c = bisect_left(divs, r * (1 - 1e-9))
                    if 0 < f < D - 1:
                        cands.append(f)
                    if 0 < c < D - 1:
                        cands.append(c)
            for t in cands:
                v = Tr[t] + Tc[D - 1 - t]
                if v < best[0]:
                    best = (v, i, j, t)
    t, i, j, k = best
    if t >= t_single and not grids_only:
        return algs[single], algs[single], 1, P, t_single, "single"
    pc = divs[k]
    return algs[i], algs[j], P // pc, pc, t, None


def select_suara2(P: int, m: float, params: Params, algorithms: Sequence[str] | None = None) -> Choice:
    """Algorithm 2 (SUARA2_find_optimals): evaluate the analytical formula for all |A|^2
    combinations (a_r, a_c) and keep the fastest (first in iteration order on ties, as in the
    pseudocode), with the per-combination tables that explain the choice (``decide_suara2``
    gives the decision alone, faster). ``algorithms=None`` means those of ALL6 that ``params``
    has (all six for ``Params.paper()``).

    A prime P (or P < 4) has no grid: the result is the best single algorithm with
    ``fallback="no-grid"``. The paper's Note (Sect. 3) proposes padding to Q > P processes
    holding the identity element; ``padded_grid`` computes that alternative."""
    P = int(P)
    if P < 1:
        raise ValueError(f"P must be >= 1, got {P}")
    algs = resolve_algorithms(params, algorithms)
    core = _suara2_core(P, m, params, algs)
    divs, T = core["divs"], core["T"]
    single_i = int(np.argmin(T[:, -1]))
    single, t_single = algs[single_i], float(T[single_i, -1])
    table, grid_table = [], []
    for i, ar in enumerate(algs):
        for j, ac in enumerate(algs):
            pts = tuple(float(x) for x in core["roots"][i, j] if np.isfinite(x))
            curv = tuple(float(x) for x in core["curv"][i, j][:len(pts)])
            tried = tuple(dict.fromkeys(divs[t] for t in core["cand"][i, j]))
            b = core["best"][i, j]
            pc = divs[int(core["cand"][i, j, b])]
            table.append(Candidate(ar, ac, P // pc, pc, float(core["costs"][i, j, b]), pts, curv,
                                   "closed-form", tried))
            g = core["grid_best"][i, j]
            if np.isfinite(core["grid_costs"][i, j, g]):
                pc = divs[int(core["cand"][i, j, g])]
                grid_table.append(Candidate(ar, ac, P // pc, pc, float(core["grid_costs"][i, j, g]),
                                            pts, curv, "closed-form",
                                            tuple(d for d in tried if 1 < d < P)))
    table, grid_table = tuple(table), tuple(grid_table)
    best_grid = min(grid_table, key=lambda c: c.time) if grid_table else None
    if best_grid is None:
        return Choice(P=P, m=m, a_r=single, a_c=single, P_r=1, P_c=P, time=t_single,
                      best_single=single, best_single_time=t_single, speedup=1.0, table=table,
                      fallback="no-grid", best_grid=None, grid_table=grid_table)
    best = min(table, key=lambda c: c.time)  # Algorithm 2, lines 3-10 (first on ties)
    if not best.is_grid or best.time >= t_single:
        return Choice(P=P, m=m, a_r=single, a_c=single, P_r=1, P_c=P, time=t_single,
                      best_single=single, best_single_time=t_single, speedup=1.0, table=table,
                      fallback="single", best_grid=best_grid, grid_table=grid_table)
    return Choice(P=P, m=m, a_r=best.a_r, a_c=best.a_c, P_r=best.P_r, P_c=best.P_c,
                  time=best.time, best_single=single, best_single_time=t_single,
                  speedup=t_single / best.time, table=table, fallback=None, best_grid=best_grid,
                  grid_table=grid_table)


def analytical_formula(a_r: str, a_c: str, P: int, m: float, params: Params,
                       endpoints: bool = True) -> Candidate | None:
    """``AFormula`` of Algorithm 2 (Sect. 4.2, eqs. 10-12) for one combination: the
    candidate of ``select_suara2``'s table (``endpoints=False``: of its proper-grid table,
    None when P has no proper divisor)."""
    ch = select_suara2(P, m, params, tuple(dict.fromkeys((a_r, a_c))))
    for c in (ch.table if endpoints else ch.grid_table):
        if (c.a_r, c.a_c) == (a_r, a_c):
            return c
    return None


def brute_force_suara2(P: int, m: float, params: Params,
                       algorithms: Sequence[str] | None = None) -> list[tuple[float, str, str, int]]:
    """Every divisor P_c of P (1 and P included) x every combination: a list of
    ``(time, a_r, a_c, P_c)`` sorted by time. For checking ``select_suara2``."""
    algs = resolve_algorithms(params, algorithms)
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


# --------------------------------------------------------------------------- SUARA-L


def factorizations(P: int, L: int) -> list[tuple[int, ...]]:
    """Every way to write P as a product of L factors >= 2, in non-increasing order
    (the cost of SUARA-L does not depend on the order of the dimensions)."""
    out: list[tuple[int, ...]] = []

    def rec(rest, left, cap, acc):
        if left == 1:
            if 2 <= rest <= cap:
                out.append(tuple(acc + [rest]))
            return
        for d in _divisors(rest):
            if 2 <= d <= cap and rest // d >= 2:
                rec(rest // d, left - 1, d, acc + [d])

    rec(int(P), int(L), int(P), [])
    return out


@dataclass(frozen=True)
class LevelChoice:
    """SUARA-L's decision: ``dims`` (P_1 x ... x P_L, P_1 the first allreduced), ``algs``
    (one Table 1 algorithm per dimension), predicted ``time``; ``best_single`` and its time
    on all P processes; ``fallback`` "no-grid" when P has no factorisation into L factors."""

    P: int
    m: float
    L: int
    dims: tuple[int, ...]
    algs: tuple[str, ...]
    time: float
    best_single: str
    best_single_time: float
    fallback: str | None = None

    @property
    def speedup(self) -> float:
        return self.best_single_time / self.time


def select_suara_l(P: int, m: float, params: Params, L: int = 3,
                   algorithms: Sequence[str] | None = None) -> LevelChoice:
    """SUARA-L (Sect. 4, Fig. 4: R x C x K and beyond): P processes as an L-dimensional grid,
    an allreduce of the whole message along each dimension in turn, so
    ``T = sum_l T_{a_l}(P_l, m)`` (eq. 9 extended to L stages). The stages are independent,
    so each dimension takes its cheapest algorithm; the grid is the factorisation of P into L
    factors >= 2 with the least total (every one is evaluated: P has few). Without such a
    factorisation the best single algorithm is returned with ``fallback="no-grid"``."""
    algs = resolve_algorithms(params, algorithms)
    P = int(P)
    single, t_single = best_single(P, m, params, algs)
    best = None
    for dims in factorizations(P, L):
        picks = [min((stage_cost(a, d, P, m, params), a) for a in algs) for d in dims]
        t = sum(c for c, _ in picks)
        if best is None or t < best[0]:
            best = (t, dims, tuple(a for _, a in picks))
    if best is None:
        return LevelChoice(P, m, L, (P,) + (1,) * (L - 1), (single,) * L, t_single, single,
                           t_single, "no-grid")
    t, dims, chosen = best
    return LevelChoice(P, m, L, dims, chosen, t, single, t_single)
