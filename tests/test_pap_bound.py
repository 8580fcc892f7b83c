"""The Sect. 3 bound of the PAP paper (Proficz 2018) from raw per-rank arrivals and exits
(``harness/report/pap.py``: ``raw_metrics``, ``bounds``, Table 3), and the Rabenseifner row:
in the default ``pap`` experiment with the ring's delays and compute, placed as in Table 3."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from harness.campaign import config, plan
from harness.analysis import pap as pap_data
from harness.report import pap
from harness.report.inputs import Inputs

MS = 1e-3
SIZE = 524288


def _row(alg, delay, max_delay, mean, procs=4):
    params = {"compute": "20ms"}
    return {"campaign": "t", "cell_id": f"c{alg}-{delay}-{max_delay}", "library": "openmpi",
            "library_version": "Open MPI v5.0.8", "algorithm": alg, "procs": procs, "nodes": 1,
            "size": SIZE, "count": SIZE // 8, "dtype": "float64", "op": "sum", "delay": delay,
            "max_delay": max_delay, "late_rank": 1 if delay == "one-late" else 0,
            "params": json.dumps(params), "metric": "mean", "n": 2, "mean": mean,
            "ci_low": mean * 0.98, "ci_high": mean * 1.02, "status": "ok",
            "finished": "2026-01-01T00:00:00"}


# per cell: two repetitions of (arrivals, exits) in ms, P = 4, rank 1 late
RAW = {
    "cring-none-0.0": [([0, 0, 0, 0], [4, 4, 4, 4]), ([1, 1, 1, 1], [5, 5, 5, 5])],
    "cring-one-late-0.01": [([0, 10, 0, 0], [14, 14, 14, 14]), ([0, 12, 0, 0], [16, 16, 16, 16])],
    "cprr-none-0.0": [([0, 0, 0, 0], [4.2] * 4), ([0, 0, 0, 0], [4.2] * 4)],
    "cprr-one-late-0.01": [([0, 10, 0, 0], [11.5] * 4), ([0, 10, 0, 0], [11.5] * 4)],
    "crabenseifner-none-0.0": [([0, 0, 0, 0], [4.5] * 4), ([0, 0, 0, 0], [4.5] * 4)],
    "crabenseifner-one-late-0.01": [([0, 10, 0, 0], [13.0] * 4), ([0, 10, 0, 0], [13.0] * 4)],
    "cother": [([0, 0], [1, 1])],  # a cell of another experiment in the same run file
}


@pytest.fixture
def campaign(tmp_path):
    rows = []
    for cell, reps in RAW.items():
        for i, (a, f) in enumerate(reps):
            rows.append({"cell_id": cell, "rep": i, "arrival": np.array(a) * MS + 100.0,
                         "finish": np.array(f) * MS + 100.0})
    (tmp_path / "raw").mkdir()
    pd.DataFrame(rows[:6]).to_parquet(tmp_path / "raw" / "r000000000001.parquet")
    pd.DataFrame(rows[6:]).to_parquet(tmp_path / "raw" / "r000000000002.parquet")
    summary = pd.DataFrame([
        _row("ring", "none", 0.0, 4.0 * MS), _row("ring", "one-late", 0.01, 10.5 * MS),
        _row("prr", "none", 0.0, 4.2 * MS), _row("prr", "one-late", 0.01, 9.0 * MS),
        _row("rabenseifner", "none", 0.0, 4.5 * MS),
        _row("rabenseifner", "one-late", 0.01, 10.8 * MS)])
    summary.to_csv(tmp_path / "summary.csv", index=False)
    return tmp_path, summary


def test_raw_metrics_lateness_tail_elapsed(campaign):
    root, _ = campaign
    m = pap_data.raw_metrics(root / "raw", ["cring-none-0.0", "cring-one-late-0.01", "cprr-one-late-0.01"])
    m = m.set_index("cell_id")
    assert list(m.index) == ["cprr-one-late-0.01", "cring-none-0.0", "cring-one-late-0.01"]
    # ring one-late: rank 1 arrives 10 and 12 ms after the others; all exit 4 ms later
    assert m.loc["cring-one-late-0.01", "lateness"] == pytest.approx(11 * MS)
    assert m.loc["cring-one-late-0.01", "tail"] == pytest.approx(4 * MS)
    # elapsed: mean over ranks of exit - arrival = (3 x 14 + 4) / 4 and (3 x 16 + 4) / 4
    assert m.loc["cring-one-late-0.01", "elapsed"] == pytest.approx((11.5 + 13.0) / 2 * MS)
    assert m.loc["cring-none-0.0", "elapsed"] == pytest.approx(4 * MS)
    assert m.loc["cprr-one-late-0.01", "tail"] == pytest.approx(1.5 * MS)
    assert pap_data.raw_metrics(root / "missing", ["cring-none-0.0"]).empty


def test_bound_from_shortest_tail_then_from_pingpong(campaign):
    root, summary = campaign
    t3 = pap_data.table3(summary, raw_dir=root / "raw")
    assert t3["Delta"].unique() == pytest.approx([4 * MS])  # the balanced ring's elapsed
    assert t3["delta"].unique() == pytest.approx([1.5 * MS])  # PRR's tail after the late rank
    assert set(t3["delta_source"]) == {"shortest tail"}
    assert t3["bound"].unique() == pytest.approx([2.5 * MS])
    ring = t3[(t3["label"] == "ring") & (t3["max_delay"] == 0.01)].iloc[0]
    assert (ring["lateness"], ring["tail"]) == pytest.approx((11 * MS, 4 * MS))
    # a one-pair ping-pong cell of the library and size is the paper's delta itself
    probe = dict(_row("pingpong", "none", 0.0, 1.0 * MS, procs=2), params="{}",
                 cell_id="cpp")
    t3 = pap_data.table3(pd.concat([summary, pd.DataFrame([probe])]), raw_dir=root / "raw")
    assert set(t3["delta_source"]) == {"pingpong"}
    assert t3["bound"].unique() == pytest.approx([3 * MS])
    # without the raw directory the table has no bound columns
    assert "bound" not in pap_data.table3(summary).columns


def test_table3_files_show_the_bound_and_the_rabenseifner_row(campaign):
    root, _ = campaign
    pap.make(Inputs.of(root / "summary.csv", root / "tables", root / "fig"))
    md = (root / "tables" / "pap_table3.md").read_text()
    assert "one-late; bound (Δ − δ) 2.5 ms (Δ 4.0 ms, δ 1.5 ms: shortest tail)" in md
    rows = [line.split("|")[1].strip() for line in md.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip()]
    assert rows[1:] == ["ring", "rabenseifner", "prr"]  # the paper's order, after the header
    tex = (root / "tables" / "pap_table3.tex").read_text()
    assert r"bound ($\Delta$ - $\delta$) 2.5 ms ($\Delta$ 4.0 ms, $\delta$ 1.5 ms" in tex
    assert "Δ" not in tex and "δ" not in tex
    csv = pd.read_csv(root / "tables" / "pap_table3.csv")
    assert csv["bound"].dropna().unique() == pytest.approx([2.5 * MS])
    assert {"lateness", "tail", "Delta", "delta", "delta_source"} <= set(csv.columns)


def test_default_pap_experiment_runs_rabenseifner_like_the_ring():
    cfg = config.load(REPO / "config/experiments.yaml")
    cells = [c for r in plan.expand(cfg) for c in r.cells if "compute" in dict(c.params)
             and c.library == "openmpi" and "knowledge" not in dict(c.params)]

    def conditions(alg):
        return sorted((c.procs, c.size, c.delay, c.max_delay, tuple(sorted(c.params)))
                      for c in cells if c.algorithm == alg)

    assert conditions("rabenseifner") == conditions("ring") != []
    assert len(conditions("rabenseifner")) == 18  # 2 sizes x (none + 2 modes x 4 delays)
