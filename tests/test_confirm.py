"""The confirmation stage: AUTO and BEST measured again, alternately, in fresh launches; the
gain and its interval from those alone; resume after an interrupt."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from test_workflow import snakemake, write_config
from winners_support import FAST, SLOW, algorithm_of, expected_verdict, means_by_cell, run_docs, set_winners

from harness.campaign.confirm import gain_interval, groups, pick, pick_guidelines, schedule, verdict
from harness.cells import Cell, Run


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
    """The campaign's summary is set so that ring wins at 64 B, recursive doubling at 64 KiB
    and AUTO at 4 KiB: the stage then measures exactly A RD RING RING RD A, and resumes an
    interrupted pass with only the missing launch."""
    cfg = write_config(tmp_path, {"e": {
        "libraries": ["mpich"], "algorithms": ["native:auto", "native:ring", "native:recursive_doubling"],
        "procs": [2], "sizes": ["64B", "4KiB", "64KiB"]}}, confirm={"rounds": 1, "time_budget": "1s"})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    res = tmp_path / "results" / "wf"
    df = set_winners(res, {("mpich", 64): "native:ring", ("mpich", 4096): "native:auto",
                           ("mpich", 65536): "native:recursive_doubling"})
    cell = {(r.algorithm, r.size): r.cell_id for r in df.itertuples()}
    out = snakemake(tmp_path, cfg, "--until", "report_confirm")
    assert out.returncode == 0, out.stderr[-3000:]
    group = res / "confirm" / "mpich-p2-n1-single.json"
    doc = json.loads(group.read_text())
    docs = run_docs(res / "confirm" / "runs")
    assert [algorithm_of(d) for d in docs] == [
        "native:auto", "native:recursive_doubling", "native:ring", "native:ring",
        "native:recursive_doubling", "native:auto"]
    assert doc["launches"] == 6 and [d["launch"] for d in docs] == list(range(100, 106))
    # AUTO launches measure the two points where a forced algorithm won, not 4 KiB
    assert sorted(c["cell_id"] for c in docs[0]["cells"]) == sorted(
        [cell["native:auto", 64], cell["native:auto", 65536]])
    assert [c["cell_id"] for c in docs[1]["cells"]] == [cell["native:recursive_doubling", 65536]]
    assert [c["cell_id"] for c in docs[2]["cells"]] == [cell["native:ring", 64]]
    entries = {e["size"]: e for e in doc["entries"]}
    assert set(entries) == {64, 4096, 65536}
    assert entries[4096]["verdict"] == "AUTO is BEST" and "auto_means" not in entries[4096]
    means = means_by_cell(docs)
    for size, best in ((64, "native:ring"), (65536, "native:recursive_doubling")):
        e = entries[size]
        assert (e["best"], e["auto_cell"], e["best_cell"]) == (
            best, cell["native:auto", size], cell[best, size])
        assert e["campaign_gain"] == pytest.approx(SLOW / FAST)
        assert e["auto_means"] == means[e["auto_cell"]] and len(e["auto_means"]) == 2
        assert e["best_means"] == means[e["best_cell"]] and len(e["best_means"]) == 2
        g, lo, hi, v = expected_verdict(e["auto_means"], e["best_means"])
        assert (e["gain"], e["gain_ci_low"], e["gain_ci_high"], e["verdict"]) == (
            pytest.approx(g), pytest.approx(lo), pytest.approx(hi), v)
        # beside the t verdict, the exact Wilcoxon test of the launch medians: two pairs can
        # never reach 5 % (smallest p 2 / 2^2), and the entry says so instead of a tie
        assert e["verdict_test"].startswith("Student-t") and "Wilcoxon" in e["nonparametric_test"]
        assert len(e["auto_medians"]) == 2 and all(m > 0 for m in e["auto_medians"])
        assert e["smallest_p"] == 0.5 and e["nonparametric"] == "too few pairs"
        assert e["median_gain"] > 0 and e["wilcoxon_p"] >= 0.5
    table = pd.read_csv(res / "tables" / "auto_vs_best_confirmed.csv")
    assert sorted(table["size"]) == [64, 4096, 65536]
    assert dict(zip(table["size"], table.verdict)) == {s: e["verdict"] for s, e in entries.items()}
    assert "verdict" in (res / "tables" / "auto_vs_best_confirmed.md").read_text()
    for ext in ("png", "pdf"):
        assert (tmp_path / "figures" / "wf" / f"auto_vs_best_confirmed.{ext}").stat().st_size > 0

    launched = {d["launch"]: d for d in docs}
    paths = {json.loads(p.read_text())["launch"]: p for p in (res / "confirm" / "runs").glob("*.json")}
    # interrupted during the last launch: neither it nor anything after it exists
    paths[105].unlink()
    group.unlink()
    for ext in ("md", "tex", "csv"):
        (res / "tables" / f"auto_vs_best_confirmed.{ext}").unlink()
    out = snakemake(tmp_path, cfg, "--until", "report_confirm")
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert "launch 6/6 native:auto" in log and "launch 1/6" not in log, log[-3000:]
    again = run_docs(res / "confirm" / "runs")
    assert [d["launch"] for d in again] == list(range(100, 106))
    assert {d["launch"]: d["finished"] for d in again if d["launch"] != 105} == \
        {k: d["finished"] for k, d in launched.items() if k != 105}
    assert again[-1]["finished"] != launched[105]["finished"]
    redone = {e["size"]: e for e in json.loads(group.read_text())["entries"]}
    assert redone[64]["auto_means"][0] == entries[64]["auto_means"][0]
    assert redone[64]["auto_means"][1] == means_by_cell(again)[cell["native:auto", 64]][1]


def test_guideline_violations_are_measured_again_like_best():
    """A mock-up faster than AUTO in the campaign (intervals apart) is an entry to measure
    again, with the mock-up in BEST's place; a tie, a slower mock-up or AUTO on cold buffers
    (another cache state) is not."""
    def row(alg, cell, mean, size=1048576, buffers="reuse", hw=0.01):
        return {"algorithm": alg, "cell_id": cell, "status": "ok", "mean": mean, "size": size,
                "buffers": buffers, "ci_low": mean * (1 - hw), "ci_high": mean * (1 + hw),
                "params": "{}"}

    df = _summary([row("native:auto", "a", 688e-6), row("native:auto", "a-cold", 809e-6,
                                                       buffers="rotate"),
                   row("reduce_scatter_allgather", "m", 482e-6),  # faster: a violation
                   row("allreduce_halves", "h", 690e-6),  # a tie
                   row("reduce_bcast", "b", 970e-6),  # slower: holds
                   row("native:auto", "a4", 8e-6, size=4096),
                   row("reduce_bcast", "b4", 16e-6, size=4096)])
    (e,) = pick_guidelines(df, "mpich", 2, 1, "single")
    assert (e["role"], e["best"], e["auto_cell"], e["best_cell"]) == (
        "guideline", "reduce_scatter_allgather", "a", "m")
    assert e["campaign_gain"] == pytest.approx(688 / 482) and "verdict" not in e
    assert (e["size"], e["buffers"], e["timing"]) == (1048576, "reuse", "percall")
    assert pick_guidelines(df, "mpich", 4, 1, "single") == []
    assert schedule([e], 1) == ["native:auto", "reduce_scatter_allgather",
                                "reduce_scatter_allgather", "native:auto"]
    # a group of AUTO and mock-ups alone is confirmable; AUTO alone is not
    cells = (Cell("mpich", "native:auto", 2, 64, "float64", "sum"),
             Cell("mpich", "reduce_bcast", 2, 64, "float64", "sum"))
    runs = [Run(library="mpich", env=(), procs=2, nodes=1, cells=(c,)) for c in cells]
    assert groups(runs) == {"mpich-p2-n1-single": ("mpich", 2, 1, "single")}
    assert groups(runs[:1]) == {}


def test_a_guideline_violation_confirmed_end_to_end(tmp_path):
    """AUTO and Reduce_scatter+Allgather at two sizes; the summary is set so that the mock-up
    wins at 1 KiB (a violation) and ties at 4 KiB: the stage measures A M M A at 1 KiB only and
    writes the guidelines_confirmed table, which the findings read."""
    from harness.report.findings import findings

    cfg = write_config(tmp_path, {"e": {
        "libraries": ["mpich"], "algorithms": ["native:auto", "reduce_scatter_allgather"],
        "procs": [2], "sizes": ["1KiB", "4KiB"]}}, confirm={"rounds": 1, "time_budget": "1s"})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    res = tmp_path / "results" / "wf"
    df = pd.read_csv(res / "summary.csv")
    mock = df.algorithm == "reduce_scatter_allgather"
    at = {1024: (SLOW, FAST), 4096: (FAST, FAST)}  # (AUTO, mock-up)
    df["mean"] = [at[s][1] if m else at[s][0] for s, m in zip(df["size"], mock)]
    df["ci_low"], df["ci_high"] = df["mean"] * 0.99, df["mean"] * 1.01
    df["status"], df["oversubscribed"] = "ok", False
    df.to_csv(res / "summary.csv", index=False)
    cell = {(r.algorithm, r.size): r.cell_id for r in df.itertuples()}
    out = snakemake(tmp_path, cfg, "--until", "report_confirm")
    assert out.returncode == 0, out.stderr[-3000:]
    docs = run_docs(res / "confirm" / "runs")
    assert [algorithm_of(d) for d in docs] == ["native:auto", "reduce_scatter_allgather",
                                               "reduce_scatter_allgather", "native:auto"]
    assert [c["cell_id"] for c in docs[1]["cells"]] == [cell["reduce_scatter_allgather", 1024]]
    doc = json.loads((res / "confirm" / "mpich-p2-n1-single.json").read_text())
    (e,) = [e for e in doc["entries"] if e.get("role") == "guideline"]
    assert (e["size"], e["auto_cell"], e["pairs"]) == (1024, cell["native:auto", 1024], 2)
    g, lo, hi, v = expected_verdict(e["auto_means"], e["best_means"])
    assert (e["gain"], e["verdict"]) == (pytest.approx(g), v)
    table = pd.read_csv(res / "tables" / "guidelines_confirmed.csv")
    assert list(table["size"]) == [1024] and table["role"].tolist() == ["guideline"]
    shown = {"BEST faster": "violation confirmed", "AUTO faster": "holds",
             "tie": "not confirmed (tie)"}[v]
    assert table["verdict"].tolist() == [shown]
    claims, _ = findings(res / "tables")
    assert [c.table.name for c in claims] == (["guidelines_confirmed.csv"]
                                              if v == "BEST faster" else [])
