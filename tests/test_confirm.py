"""The confirmation stage: AUTO and BEST measured again, alternately, in fresh launches; the
gain and its interval from those alone; resume after an interrupt."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from harness.confirm import gain_interval, pick, schedule, verdict
from test_workflow import snakemake, write_config


def test_gain_interval_is_the_t_interval_of_the_log_ratios():
    a, b = [10.0, 11.0, 10.5, 9.8], [5.0, 5.6, 5.1, 5.2]
    g, lo, hi = gain_interval(a, b)
    logs = np.log(np.array(a) / np.array(b))
    l, h = st.t.interval(0.95, 3, loc=logs.mean(), scale=st.sem(logs))
    assert g == pytest.approx(math.exp(logs.mean()))
    assert (lo, hi) == (pytest.approx(math.exp(l)), pytest.approx(math.exp(h)))
    assert verdict(lo, hi) == "BEST faster"
    g, lo, hi = gain_interval([10.0, 5.0], [5.0, 10.0])
    assert lo < 1 < hi and verdict(lo, hi) == "tie"
    assert verdict(0.5, 0.9) == "AUTO faster"


def _summary(rows):
    base = {"library": "mpich", "procs": 2, "nodes": 1, "thread_level": "single", "size": 4096,
            "dtype": "float64", "op": "sum", "timing": "percall", "delay": "none",
            "oversubscribed": False}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_best_ignores_auto_wrong_and_failed_and_oversubscribed_makes_no_claim():
    df = _summary([
        {"algorithm": "native:auto", "cell_id": "a", "status": "ok", "mean": 10.0},
        {"algorithm": "native:ring", "cell_id": "r", "status": "wrong", "mean": float("nan")},
        {"algorithm": "native:tree", "cell_id": "t", "status": "failed", "mean": float("nan")},
        {"algorithm": "native:nb", "cell_id": "n", "status": "not-converged", "mean": 8.0},
        {"algorithm": "native:smp", "cell_id": "s", "status": "ok", "mean": 9.0}])
    (e,) = pick(df, "mpich", 2, 1, "single")
    assert e["best"] == "native:nb" and "verdict" not in e and e["campaign_gain"] == 1.25
    (e,) = pick(df.assign(oversubscribed=True), "mpich", 2, 1, "single")
    assert e["verdict"] == "oversubscribed"
    (e,) = pick(df.assign(mean=[1.0, 2, 2, 2, 2]), "mpich", 2, 1, "single")
    assert e["verdict"] == "AUTO is BEST"
    assert schedule([{"best": "native:x"}, {"best": "native:y"}], 2) == [
        "native:auto", "native:x", "native:y", "native:y", "native:x", "native:auto"] * 2


def test_confirmation_stage_end_to_end_and_resume(tmp_path):
    cfg = write_config(tmp_path, {"e": {
        "libraries": ["mpich"], "algorithms": ["native:auto", "native:ring", "native:recursive_doubling"],
        "procs": [2], "sizes": ["64B", "64KiB"]}}, confirm={"rounds": 1, "time_budget": "1s"})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    res = tmp_path / "results" / "wf"
    doc = json.loads((res / "confirm" / "mpich-p2-n1-single.json").read_text())
    assert {e["verdict"] for e in doc["entries"]} <= {
        "BEST faster", "AUTO faster", "tie", "AUTO is BEST"}
    table = pd.read_csv(res / "tables" / "auto_vs_best_confirmed.csv")
    assert len(table) == 2 and table.verdict.notna().all()
    assert "verdict" in (res / "tables" / "auto_vs_best_confirmed.md").read_text()
    for ext in ("png", "pdf"):
        assert (tmp_path / "figures" / "wf" / f"auto_vs_best_confirmed.{ext}").stat().st_size > 0
    launched = sorted((res / "confirm" / "runs").glob("*.json"))
    if not launched:  # AUTO won every size in the campaign: nothing to measure again
        return
    assert len(launched) == doc["launches"]
    kept = {p: json.loads(p.read_text())["finished"] for p in launched[:-1]}
    # interrupted during the last launch: neither it nor anything after it exists
    launched[-1].unlink()
    (res / "confirm" / "mpich-p2-n1-single.json").unlink()
    for ext in ("md", "tex", "csv"):
        (res / "tables" / f"auto_vs_best_confirmed.{ext}").unlink()
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    assert launched[-1].is_file()
    assert {p: json.loads(p.read_text())["finished"] for p in kept} == kept
