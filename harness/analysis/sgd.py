"""Table 5 of Proficz 2018 (distributed SGD of the CNN, Sect. 6) as data, from the executions
of one ``sgd:`` experiment (``harness.measure.sgd``): per algorithm the all-reduce average
elapsed time (the mean over the executions of each execution's mean over iterations of the mean
over ranks) with its 95 % Student-t interval over executions, its speedup over the ring (ratio
of the means; the 95 % interval of the per-round ratios, the executions of one round being
neighbours in time), the training total time likewise, the final test accuracy, and the paper's
values beside them (``table5``). Written and drawn by ``harness/report/sgd.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..stats import half_width

PAPER = {  # Proficz 2018, Table 5: ms, speedup, ms, speedup
    "ring": (35.7, 1.000, 81_900, 1.000),
    "slt": (33.1, 1.079, 78_768, 1.040),
    "prr": (31.9, 1.121, 78_604, 1.042),
}
ORDER = ["ring", "slt", "prr"]


def _interval(x) -> tuple[float, float, float]:
    x = np.asarray(x, dtype=float)
    m = float(x.mean()) if x.size else math.nan
    hw = half_width(x, 0.95)
    return m, m - hw, m + hw


def order(algs) -> list[str]:
    """The algorithms in the paper's order (ring, SLT, PRR), others after them by name."""
    return sorted(set(algs), key=lambda a: (ORDER.index(a) if a in ORDER else len(ORDER), a))


def table5(docs: list[dict]) -> pd.DataFrame:
    """One row per algorithm (numbers in seconds); see the module doc."""
    rows = []
    by = {}
    for d in docs:
        by.setdefault(d["algorithm"], {})[d["execution"]] = d
    ref = by.get("ring", {})
    for alg in order(by):
        ex = by[alg]
        ar = [ex[k]["allreduce_mean"] for k in sorted(ex)]
        tt = [ex[k]["total_time"] for k in sorted(ex)]
        am, alo, ahi = _interval(ar)
        tm, tlo, thi = _interval(tt)
        paired = [k for k in sorted(ex) if k in ref]
        ra = [ref[k]["allreduce_mean"] / ex[k]["allreduce_mean"] for k in paired]
        rt = [ref[k]["total_time"] / ex[k]["total_time"] for k in paired]
        ring_a = np.mean([ref[k]["allreduce_mean"] for k in ref]) if ref else math.nan
        ring_t = np.mean([ref[k]["total_time"] for k in ref]) if ref else math.nan
        _, ralo, rahi = _interval(ra) if ra else (0, math.nan, math.nan)
        _, rtlo, rthi = _interval(rt) if rt else (0, math.nan, math.nan)
        p = PAPER.get(alg, (math.nan,) * 4)
        rows.append({
            "algorithm": alg, "executions": len(ex),
            "allreduce_mean": am, "allreduce_ci_low": alo, "allreduce_ci_high": ahi,
            "allreduce_speedup": ring_a / am, "allreduce_speedup_ci_low": ralo,
            "allreduce_speedup_ci_high": rahi,
            "total_mean": tm, "total_ci_low": tlo, "total_ci_high": thi,
            "total_speedup": ring_t / tm, "total_speedup_ci_low": rtlo, "total_speedup_ci_high": rthi,
            "test_accuracy": float(np.mean([ex[k]["final"]["test_accuracy"] for k in ex])),
            "final_train_loss": float(np.mean([ex[k]["final"]["train_loss_last20"] for k in ex])),
            "edge_fraction": float(np.mean([ex[k]["edge"]["measured_fraction_median"] for k in ex])),
            "arrival_spread": float(np.mean([ex[k]["arrival_spread_mean"] for k in ex])),
            "estimate_wait": float(np.mean([(ex[k]["arrival_estimate"] or {}).get("wait_mean", 0.0)
                                            for k in ex])),
            "paper_allreduce": p[0] / 1e3, "paper_allreduce_speedup": p[1],
            "paper_total": p[2] / 1e3, "paper_total_speedup": p[3],
        })
    return pd.DataFrame(rows)


def loss_curves(docs: list[dict], smooth: int) -> tuple[dict, bool]:
    """The training loss per algorithm (the paper's order): ``{algorithm: (executions, mean
    loss per iteration over them, its moving average over ``smooth`` iterations)}``, and
    whether every execution's loss is the same, bit for bit (P = 2: every algorithm adds the
    same two numbers)."""
    by: dict[str, list] = {}
    for d in docs:
        by.setdefault(d["algorithm"], []).append(np.asarray(d["loss"], dtype=float))
    identical = len({tuple(c) for cs in by.values() for c in cs}) == 1 and len(by) > 1
    out = {}
    for alg in order(by):
        n = min(len(c) for c in by[alg])
        mean = np.mean([c[:n] for c in by[alg]], axis=0)
        w = min(smooth, n)
        out[alg] = (len(by[alg]), mean, np.convolve(mean, np.ones(w) / w, mode="valid"))
    return out, identical
