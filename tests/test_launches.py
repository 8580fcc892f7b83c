"""Launch replication (stopping.launches, --launches): R independent MPI launches of every
run, one summary row per cell over its launch means, and resume that keeps finished
launches."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import FAST, harness
from scipy import stats as st
from test_workflow import snakemake, summary, write_config

from harness.campaign import plan
from harness.campaign.config import validate
from harness.results.launches import combine


def row(launch, mean, status="ok", hw=0.01, n=100, **over):
    r = {"cell_id": "c1", "launch": launch, "status": status, "mean": mean, "procs": 2,
         "size": 4096, "ci_low": mean - hw, "ci_high": mean + hw, "rel_halfwidth": hw / mean,
         "n": n, "median": mean, "min": mean / 2, "max": mean * 2, "finished": f"t{launch}"}
    r.update(over)
    return r


def test_one_launch_is_the_row_itself():
    r = row(0, 1.0)
    assert combine([r]) == {**r, "launches": 1}


def test_between_launch_interval_is_students_t_over_the_launch_means():
    means = [1.0, 1.1, 0.95]
    got = combine([row(k, m) for k, m in enumerate(means)], precision=0.5)
    lo, hi = st.t.interval(0.95, 2, loc=np.mean(means), scale=st.sem(means))
    assert got["mean"] == pytest.approx(np.mean(means))
    assert (got["ci_low"], got["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert got["launches"] == 3 and json.loads(got["launch_means"]) == means
    assert got["within_n"] == 300 and got["n"] == 3
    assert got["status"] == "ok" and not got["launches_disagree"]
    assert got["algbw"] == pytest.approx(4096 / np.mean(means))


def test_launches_that_disagree_beyond_the_precision_are_flagged():
    got = combine([row(0, 1.0), row(1, 2.0)], precision=0.025)
    assert got["launches_disagree"] and got["status"] == "not-converged"
    assert "disagree" in got["error"]


def test_a_failed_launch_leaves_the_others_and_a_wrong_one_wins():
    got = combine([row(0, 1.0), row(1, math.nan, status="failed"), row(2, 1.0)], precision=0.5)
    assert got["launches"] == 2 and got["status"] == "not-converged"
    assert combine([row(0, 1.0), row(1, math.nan, status="wrong")])["status"] == "wrong"
    assert combine([row(0, math.nan, status="timeout"), row(1, math.nan, status="failed")])[
        "status"] == "timeout"


def test_plan_replicates_runs_with_distinct_ids_and_seeded_orders():
    doc = {"campaign": "t", "stopping": {"launches": 3}, "experiments": {"e": {
        "libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2],
        "sizes": ["8B", "64B", "512B", "4KiB", "32KiB", "256KiB"]}}}
    runs = plan.expand(validate(doc))
    assert [r.launch for r in runs] == [0, 1, 2]
    assert len({r.run_id for r in runs}) == 3
    one = plan.expand(validate({**doc, "stopping": {"launches": 1}}))
    assert runs[0].run_id == one[0].run_id  # raising R keeps what launch 0 measured
    orders = [[c.cell_id for c in r.cells] for r in runs]
    assert len({tuple(o) for o in orders}) > 1 and all(sorted(o) == sorted(orders[0]) for o in orders)
    assert orders == [[c.cell_id for c in r.cells] for r in plan.expand(validate(doc))]


def test_harness_run_with_launches(results_root):
    out = harness("run", "--library", "mpich", "--procs", "2", "--size", "1KiB", "--launches", "2",
                  *FAST)
    assert out.returncode == 0, out.stderr
    assert "launch 2 of 2" in out.stdout and "over 2 launches" in out.stdout
    assert len(list((results_root / "adhoc" / "runs").glob("*.json"))) == 2
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert len(df) == 1 and int(df.launches[0]) == 2 and len(json.loads(df.launch_means[0])) == 2
    out = harness("run", "--library", "mpich", "--procs", "2", "--size", "1KiB", *FAST)
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert len(df) == 1 and int(df.launches[0]) == 1  # the newer single launch replaces both


def test_workflow_resume_keeps_finished_launches(tmp_path):
    cfg = write_config(tmp_path, {"e": {"libraries": ["mpich"], "algorithms": ["native:auto"],
                                        "procs": [2], "sizes": ["64B", "4KiB"]}},
                       stopping={"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1,
                                 "launches": 2})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = sorted((tmp_path / "results" / "wf" / "runs").glob("*.json"))
    assert len(runs) == 2
    kept, lost = runs
    before = json.loads(kept.read_text())
    # as if the campaign had been interrupted during the second launch: no run document of
    # it, no summary yet
    lost.unlink()
    (tmp_path / "results" / "wf" / "summary.csv").unlink()
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(kept.read_text())["finished"] == before["finished"]  # not measured again
    assert lost.is_file()
    df = summary(tmp_path)
    assert len(df) == 2 and set(df.launches) == {2}


def test_bus_bandwidth_of_an_allreduce_and_of_a_point_to_point_row():
    from harness.results.launches import bus_bandwidth

    assert bus_bandwidth("native:ring", 100.0, 4) == 150.0  # 2(P-1)/P of the message per link
    assert bus_bandwidth("pingpong", 100.0, 4) == 100.0  # one link, once
    assert bus_bandwidth("reduce_local", 100.0, 2) == 100.0
    assert bus_bandwidth("native:ring", None, 4) is None
