"""Fitting the Hockney models of ``harness/models/hockney.py`` to measurements (SUARA paper,
Sect. 5): (alpha, beta) per algorithm by non-negative least squares over P and message size,
gamma from a timed local reduction, and the maps from ``summary.csv`` algorithm names to the
models' (``NATIVE_OPENMPI``, ``HARNESS``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .hockney import ALL6, PAPER_GAMMA, PAPER_MS, Params, coefficients

# --------------------------------------------------------------------------- fitting


def r_squared(y: np.ndarray, yhat: np.ndarray) -> float:
    ss_res = float(np.sum((y - yhat) ** 2))
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


def fit(df, algorithm: str, gamma: float = PAPER_GAMMA, m_s: float = PAPER_MS,
        weighting: str = "relative") -> tuple[float, float, float, int]:
    """Fit (alpha, beta) of ``algorithm`` (a model name, e.g. "rs") to measured means.

    ``df`` has columns ``procs``, ``size`` (bytes per process) and ``mean`` (s): rows that
    carry a time, chosen by the caller (``harness.analysis.vocabulary.timed_mask``, as
    ``harness.analysis.fit`` does); rows with procs < 2 or no finite mean are dropped (they
    carry no information). For each cell, with ``(A, B, G) = coefficients(...)``:
    ``mean - gamma*G ~= alpha*A + beta*B``, solved by non-negative least squares
    (scipy.optimize.nnls). ``weighting="relative"`` (default) divides every row by its
    measured mean, i.e. minimises relative errors: times span orders of magnitude and an
    unweighted fit would let the largest messages decide alpha. ``"none"`` is plain NNLS.

    Returns ``(alpha, beta, r2, n)``: r2 is the coefficient of determination of the fitted
    communication part (mean - gamma*G) against its prediction, unweighted; n the rows used."""
    from scipy.optimize import nnls

    d = df[(df["procs"] >= 2) & np.isfinite(df["mean"].astype(float))]
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
    to one model name and are then pooled) from the rows of a summary that carry a time
    (columns ``algorithm, procs, size, mean``; which rows, timed and undelayed, is the
    caller's choice: ``harness.analysis.fit``).
    ``library`` (optional) keeps only rows of that ``library`` column value; otherwise rows of
    all libraries with a mapped name are pooled. Model algorithms without usable rows are
    left out of the result. Fit quality goes to ``provenance["fits"]``."""
    import datetime as _dt

    d = summary_df
    if library is not None:
        d = d[d["library"] == library]
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
