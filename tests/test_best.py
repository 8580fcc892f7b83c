"""BEST defined once (harness/analysis/best.py): the lowest timed mean, ties to the first
algorithm name, never a wrong, failed or timed-out cell; the AUTO-vs-BEST table and the
confirmation stage pick the same algorithm from the same rows."""

import math

import pandas as pd

from harness.analysis.best import fastest, timed_mask
from harness.campaign.confirm import pick
from harness.report.tables import auto_vs_best


def rows(*cells):
    base = {"library": "mpich", "library_version": "5", "procs": 4, "nodes": 1, "size": 4096,
            "dtype": "float64", "op": "sum", "delay": "none", "max_delay": 0.0, "late_rank": 0,
            "metric": "mean", "timing": "percall", "thread_level": "single", "params": "{}",
            "ci_low": math.nan, "ci_high": math.nan, "n": 10, "oversubscribed": False}
    out = []
    for i, (alg, status, mean) in enumerate(cells):
        out.append({**base, "cell_id": f"c{i}", "algorithm": alg, "status": status,
                    "mean": mean, "ci_low": mean * 0.99 if mean else mean,
                    "ci_high": mean * 1.01 if mean else mean, "finished": f"2026-01-01T00:00:0{i}"})
    return pd.DataFrame(out)


def test_lowest_timed_mean_ties_to_the_first_name():
    d = rows(("native:ring", "ok", 2e-6), ("native:tree", "not-converged", 1e-6),
             ("native:bcast", "ok", 1e-6), ("native:k", "wrong", 1e-9),
             ("native:f", "failed", math.nan), ("native:z", "ok", 0.0))
    assert list(timed_mask(d)) == [True, True, True, False, False, False]
    assert fastest(d)["algorithm"] == "native:bcast"
    assert fastest(d.iloc[3:]) is None


def test_table_and_confirmation_pick_the_same_best():
    d = rows(("native:auto", "ok", 5e-6), ("native:tree", "ok", 2e-6),
             ("native:ring", "ok", 2e-6), ("native:rd", "wrong", 1e-7))
    (row,) = auto_vs_best(d).itertuples()
    (entry,) = pick(d, "mpich", 4, 1, "single")
    assert row.best_algorithm == entry["best"] == "native:ring"
    assert row.verdict == "BEST faster" and "verdict" not in entry


def test_auto_fastest_is_auto_is_best_in_both():
    d = rows(("native:auto", "ok", 1e-6), ("native:tree", "ok", 2e-6))
    (row,) = auto_vs_best(d).itertuples()
    (entry,) = pick(d, "mpich", 4, 1, "single")
    assert row.best_algorithm == "native:auto" and row.verdict == "AUTO is BEST"
    assert entry["best"] == "native:tree" and entry["verdict"] == "AUTO is BEST"
