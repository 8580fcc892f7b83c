"""Hockney cost models of the six Open MPI allreduce algorithms and the SUARA2 selector.

Source: E. Nuriyev, R. R. Manumachu, S. Aseeri, M. K. Verma, A. L. Lastovetsky, "SUARA: a
scalable universal allreduce communication algorithm for acceleration of parallel deep
learning applications", JPDC 2023 (references: ``docs/papers.md``).
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
from bisect import bisect_left, bisect_right
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

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
    # segment count of an rs sub-allreduce on n of the P processes: "stage" = m/(m_s n), as
    # eqs. (7), (9) and (13) give it (default); "global" = m/(m_s P) in both stages, as the
    # derivation of eq. (11) writes it, whose sign test is A_1 = 2a + b m_s + g m_s - b m/P
    rs_segments: str = "stage"

    def __post_init__(self):
        if self.rs_segments not in ("stage", "global"):
            raise ValueError(f"rs_segments: expected 'stage' or 'global', got {self.rs_segments!r}")

    @classmethod
    def paper(cls, rs_segments: str = "stage") -> Params:
        """Table 4 of the paper: alpha_rs = 1.5e-6 s, beta_rs = 6.25e-11 s/B, gamma = 2e-10
        s/B, and m_s = 8 KB (Sect. 5, taken as 8192 B). The paper gives (alpha, beta) for rs
        only and does not state that the other algorithms share it; they get the rs pair here
        as an explicit assumption (see ``provenance``)."""
        ab = {a: (PAPER_ALPHA_RS, PAPER_BETA_RS) for a in ALL6}
        return cls(ab=ab, gamma=PAPER_GAMMA, m_s=PAPER_MS, rs_segments=rs_segments, provenance={
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
            "rs_segments": self.rs_segments,
            "provenance": plain_json(dict(self.provenance)),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Params:
        """Parameters from ``to_dict``'s layout; a ``model_params.json`` of ``harness fit`` has
        that layout plus ``"pingpong"`` and ``"maxrate"`` sections, which are not read here."""
        if "ab" not in d or "gamma" not in d:
            raise ValueError("expected the keys 'ab' and 'gamma' of a Hockney parameter file "
                             f"(harness fit), got keys {sorted(d)}")
        ab = {}
        for a, v in d["ab"].items():
            if isinstance(v, Mapping):
                ab[a] = (float(v["alpha"]), float(v["beta"]))
            else:
                ab[a] = (float(v[0]), float(v[1]))
        return cls(ab=ab, gamma=float(d["gamma"]), m_s=float(d.get("m_s", PAPER_MS)),
                   provenance=dict(d.get("provenance", {})),
                   rs_segments=str(d.get("rs_segments", "stage")))


def plain_json(x):
    """JSON-friendly copy (numpy scalars -> Python, tuples -> lists)."""
    if isinstance(x, Mapping):
        return {str(k): plain_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain_json(v) for v in x]
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
    if float(P) < 1:
        raise ValueError(f"P must be >= 1, got {P}")
    return stage_cost(algorithm, float(P), float(P), m_bytes, params)


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
    return stage_cost(a_r, P_c, P, m, params) + stage_cost(a_c, P / P_c, P, m, params)


def stage_cost(algorithm: str, n: float, P: float, m: float, params: Params) -> float:
    """Cost of one sub-allreduce of ``algorithm`` over ``n`` of the ``P`` processes for the
    whole message ``m`` (0 for n = 1): ``cost(algorithm, n, m)``, except that an rs stage
    counts its segments over all P processes when ``params.rs_segments == "global"``."""
    if n == 1:
        return 0.0
    c0, c1, c2, c3 = basis(algorithm, P, m, params)
    return c0 + c1 * n + c2 / n + c3 * math.log2(n)


def basis(algorithm: str, P: float, m: float, params: "Params") -> tuple[float, float, float, float]:
    """``(c0, c1, c2, c3)`` with ``T_a(n) = c0 + c1*n + c2/n + c3*log2(n)``: the cost of
    ``algorithm`` on a sub-communicator of ``n`` processes (1 <= n <= P) for the whole message
    ``m``, from Table 1, as a function of n alone. Every model of Table 1 has this shape, which
    makes the stationary points of eq. (9) the roots of a quadratic (see ``_suara2_core``).
    At n = 1 the formulas give 0 except rs, whose ``(m/m_s - 1)(...)`` term stays: this is the
    continuous extension analysed in Sect. 4.2 (a real one-process sub-allreduce costs 0,
    which ``cost`` and ``suara2_cost`` apply). ``P`` matters only for rs with
    ``params.rs_segments == "global"`` (the paper's eq. 11, see ``Params``)."""
    if algorithm not in ALL6:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALL6}")
    al, be, ga, ms = params.alpha(algorithm), params.beta(algorithm), params.gamma, params.m_s
    m = float(m)
    if algorithm == "linear":  # (n-1)(2 alpha + 2 beta m + gamma m)
        k = 2 * al + 2 * be * m + ga * m
        return -k, k, 0.0, 0.0
    if algorithm == "nono":  # log2 n (2 alpha + 2 beta m + gamma m)
        return 0.0, 0.0, 0.0, 2 * al + 2 * be * m + ga * m
    if algorithm == "rd":  # log2 n (alpha + beta m + gamma m)
        return 0.0, 0.0, 0.0, al + be * m + ga * m
    if algorithm == "rnos":  # 2(n-1) alpha + (1 - 1/n)(2 beta m + gamma m)
        v = 2 * be * m + ga * m
        return -2 * al + v, 2 * al, -v, 0.0
    if algorithm == "rs":  # (n + m/(m_s s) - 2) K + (n-1)(alpha + beta m/n), s = n or P
        K = al + be * ms + ga * ms
        if params.rs_segments == "global":
            return (m / (ms * float(P)) - 2) * K - al + be * m, K + al, -be * m, 0.0
        return -2 * K - al + be * m, K + al, (m / ms) * K - be * m, 0.0
    if algorithm == "rab":  # 2 log2 n alpha + (1 - 1/n)(2 beta m + gamma m)
        v = 2 * be * m + ga * m
        return v, 0.0, -v, 2 * al
    raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALL6}")


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
    algs = _algs(params, algorithms)
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
    algs = _algs(params, algorithms)
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


def r_squared(y: np.ndarray, yhat: np.ndarray) -> float:
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
    r2 = r_squared(y, X @ np.array([alpha, beta]))
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


# --------------------------------------------------------------------------- campaign fit

# summary.csv algorithm name -> model algorithm, per source: Open MPI's six forcible
# algorithms (the ones Table 1 models) and the harness's own versions of them
NATIVE_OPENMPI = {"native:basic_linear": "linear", "native:nonoverlapping": "nono",
                  "native:recursive_doubling": "rd", "native:ring": "rnos",
                  "native:segmented_ring": "rs", "native:rabenseifner": "rab"}
HARNESS = {"linear": "linear", "nonoverlapping": "nono", "recursive_doubling": "rd",
           "ring": "rnos", "segmented_ring": "rs", "rabenseifner": "rab"}


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
    algs = _algs(params, algorithms)
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
