"""Hockney cost models of the six Open MPI allreduce algorithms (Table 1 of the SUARA paper):
their parameters, coefficients and costs, and the fastest single algorithm.

Source: E. Nuriyev, R. R. Manumachu, S. Aseeri, M. K. Verma, A. L. Lastovetsky, "SUARA: a
scalable universal allreduce communication algorithm for acceleration of parallel deep
learning applications", JPDC 2023 (references: ``docs/papers.md``).
Equation numbers below are the paper's.

Every model is linear in its parameters: ``T_a(P, m) = alpha_a*A + beta_a*B + gamma*G`` with
coefficients ``(A, B, G) = coefficients(a, P, m, m_s)``; ``cost`` evaluates it and the fitters
(``harness/models/fitting.py``) regress on it.

Choices made where the paper is silent or ambiguous (see also ``docs/models.md``; those of
SUARA2 are in ``harness/models/suara.py``):

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
5. **Parameters**: Table 4 gives one (alpha, beta) pair, for rs only, plus gamma; the paper
   does *not* say that the other algorithms share it (it stresses algorithm-specific pairs,
   Sect. 4.4). ``Params.paper()`` nevertheless uses the rs pair for all six algorithms as a
   stand-in and says so in its provenance. m_s = "8 KB" (Sect. 5) is taken as 8192 B.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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
    algs = resolve_algorithms(params, algorithms)
    times = [(cost(a, P, m, params), i, a) for i, a in enumerate(algs)]
    t, _, a = min(times)
    return a, t


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
    makes the stationary points of eq. (9) the roots of a quadratic (``harness/models/suara.py``).
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


def resolve_algorithms(params: Params, algorithms: Sequence[str] | None) -> tuple[str, ...]:
    """The algorithms to choose among: ``algorithms``, or those of ALL6 that ``params`` has
    when None; ValueError when there are none, KeyError when one has no (alpha, beta)."""
    if algorithms is None:
        algs = tuple(a for a in ALL6 if a in params.ab)
    else:
        algs = tuple(algorithms)
    if not algs:
        raise ValueError("no algorithms to choose from")
    for a in algs:
        params._pair(a)
    return algs
