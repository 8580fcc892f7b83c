"""The workload experiment kind: a training iteration's fused gradient calls as one cell
(harness/dnn/workload.py), planned from the config, measured under real MPI, reported."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import FAST, PLUGIN, harness

from harness.campaign import config, plan
from harness.dnn import fusion, traces, workload

BASE = {"campaign": "w", "experiments": {}}


def _cfg(**experiment):
    doc = {**BASE, "experiments": {"dnn": {"libraries": ["mpich"], "algorithms": ["native:auto"],
                                           "procs": [2], "dtypes": ["float32"], **experiment}}}
    return config.validate(doc)


def test_a_workload_experiment_plans_one_cell_per_model_policy_and_precision():
    cfg = _cfg(workload={"models": ["resnet110", "alexnet"], "fusion": ["ddp", "horovod"],
                         "precision": ["fp32", "fp16"], "batch": 16, "compute": "40ms"})
    cells = [c for r in plan.expand(cfg) for c in r.cells]
    assert len(cells) == 8
    for c in cells:
        p = dict(c.params)
        assert p["batch"] == 16 and p["iteration_compute"] == pytest.approx(0.040)
        numels = traces.load(p["workload"]).numels
        calls = fusion.calls(numels, p["fusion"], p["precision"])
        # the cell's buffer is every call's bytes as whole float32 elements, end to end
        assert c.size == sum(-(-b // 4) for b in calls) * 4
        assert c.size >= sum(numels) * fusion.PRECISIONS[p["precision"]]
    fp32 = {dict(c.params)["workload"]: c.size for c in cells
            if dict(c.params)["precision"] == "fp32"}
    assert fp32["alexnet"] == traces.load("alexnet").parameters * 4


def test_workload_counts_tile_the_buffer_in_call_order():
    p = {"workload": "resnet50", "fusion": "ddp", "precision": "fp32"}
    s = workload.slices(p, "float32")
    assert s[0].start == 0 and all(a.stop == b.start for a, b in zip(s, s[1:]))
    assert s[-1].stop * 4 == workload.size(p, "float32")
    # DDP's first bucket closes at 1 MiB: the classifier's bias and weight (7.8 MiB), the
    # first two gradients ready; the later buckets close at 25 MiB
    sizes = [(x.stop - x.start) * 4 for x in s]
    assert sizes[0] == sum(traces.load("resnet50").numels[:2]) * 4
    assert all(b >= 25 * 2**20 for b in sizes[1:-1])


@pytest.mark.parametrize("experiment, message", [
    ({"workload": {"models": ["resnet50"]}, "sizes": ["1MiB"]},
     "experiments.dnn.sizes: a workload experiment takes its sizes from the model traces"),
    ({"workload": {"models": ["resnet51"]}}, "experiments.dnn.workload.models[0]"),
    ({"workload": {"models": ["resnet50"], "fusion": ["nccl"]}},
     "'nccl' is not one of horovod, ddp"),
    ({"workload": {"models": ["resnet50"]}, "params": {"fusion": "ddp"}},
     "experiments.dnn.params: fusion belong(s) under experiments.dnn.workload"),
    ({"workload": {"models": ["resnet50"], "compute": "fast"}}, "experiments.dnn.workload.compute"),
    ({}, "experiments.dnn: 'sizes' is missing (required unless the experiment has a workload)"),
])
def test_bad_workload_config_names_the_key(experiment, message):
    with pytest.raises(config.ConfigError, match=re.escape(message)) as exc:
        _cfg(**experiment)
    assert message in str(exc.value)


def test_workload_rows_stay_out_of_the_single_call_reports():
    from harness.report import tables

    df = pd.DataFrame([
        {"library": "mpich", "algorithm": "native:auto", "procs": 2, "size": 1024,
         "params": "{}", "mean": 1e-5, "status": "ok", "n": 10},
        {"library": "mpich", "algorithm": "native:auto", "procs": 2, "size": 1024,
         "params": json.dumps({"workload": "resnet110"}), "mean": 1e-3, "status": "ok", "n": 10},
    ])
    assert len(tables.prepare(df)) == 1
    assert len(tables.prepare(df, workloads=True)) == 2
    assert workload.rows(df).tolist() == [False, True]


def test_bad_workload_parameter_on_the_command_line_is_named(results_root):
    r = harness("run", "--library", "mpich", "--algorithm", "native:auto", "--procs", "2",
                "--param", "workload=lenet", "--dtype", "float32")
    assert r.returncode == 2
    assert "argument --param: parameter workload: expected one of alexnet" in r.stderr
    assert not results_root.exists() or not any(results_root.rglob("summary.csv"))


def _run(*args):
    r = harness("run", "--procs", "2", "--dtype", "float32", "--param", "workload=resnet110",
                *FAST, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def _summary(results_root):
    return pd.read_csv(results_root / "adhoc" / "summary.csv")


@pytest.mark.parametrize("library", ["mpich", "openmpi", "impi"])
def test_an_iteration_is_measured_and_verified_under_every_library(results_root, library):
    _run("--library", library, "--algorithm", "native:auto", "--param", "fusion=ddp")
    row = _summary(results_root).iloc[-1]
    assert row.status in ("ok", "not-converged")
    p = json.loads(row.params)
    assert (p["workload"], p["fusion"]) == ("resnet110", "ddp")
    assert row["size"] == workload.size(p, "float32")
    rec = json.loads(row.record)
    assert rec["calls"] == len(workload.counts(p, "float32")) == 2
    assert rec["largest_call"] == max(workload.counts(p, "float32")) * 4
    assert row["mean"] > 0


def test_a_harness_algorithm_replays_the_iteration_with_a_context_per_call(results_root):
    _run("--library", "mpich", "--algorithm", "ring", "--param", "fusion=horovod",
         "--param", "precision=fp16")
    row = _summary(results_root).iloc[-1]
    assert row.status in ("ok", "not-converged"), row.error
    assert json.loads(row.record)["calls"] == 1
    assert row["size"] == -(-traces.load("resnet110").parameters * 2 // 4) * 4


def test_a_wrong_call_in_the_iteration_is_recorded_wrong(results_root):
    r = harness("run", "--library", "mpich", "--algorithm", "test:wrong", "--plugin", PLUGIN,
                "--procs", "2", "--dtype", "float32", "--param", "workload=resnet110", *FAST)
    assert r.returncode != 0 or "wrong" in r.stdout
    row = _summary(results_root).iloc[-1]
    assert row.status == "wrong" and np.isnan(row["mean"])


def test_report_projects_images_per_second_from_a_real_iteration(results_root, tmp_path):
    from harness.report import workload as report
    from harness.report.inputs import Inputs

    for alg in ("native:auto", "native:ring"):
        _run("--library", "mpich", "--algorithm", alg, "--param", "batch=8",
             "--param", "iteration_compute=20ms")
    df = _summary(results_root)
    t = report.table(df)
    assert len(t) == 1
    r = t.iloc[0]
    assert r.best_algorithm in ("native:auto", "native:ring")
    assert r.best_mean == min(df["mean"])
    assert r.auto_images == pytest.approx(8 * 2 / (0.020 + r.auto_mean))
    assert r.best_images_overlap == pytest.approx(8 * 2 / max(0.020, r.best_mean))
    written = report.make(Inputs.of(results_root / "adhoc" / "summary.csv", tmp_path / "t",
                                    tmp_path / "f"))
    names = {p.name for p in written}
    assert {"workload.md", "workload.csv", "workload_normalised.tex", "workload_fig9.png",
            "workload_fig10.pdf"} <= names
    md = (tmp_path / "t" / "workload.md").read_text()
    assert "resnet110 ddp fp32 b=8" in md and "MPICH" in md


def test_workload_campaign_end_to_end(tmp_path):
    """A workload experiment through Snakemake: measured, kept out of AUTO vs BEST, reported
    as Figs. 7, 9 and 10 and on the report page."""
    from test_workflow import snakemake, summary, write_config

    cfg = write_config(tmp_path, {
        "dnn": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring"],
                "procs": [2], "dtypes": ["float32"],
                "workload": {"models": ["resnet110"], "fusion": ["ddp"], "batch": 16,
                             "compute": "10ms"}}})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    df = summary(tmp_path)
    assert len(df) == 2 and set(df.status) <= {"ok", "not-converged"}
    res, fig = tmp_path / "results" / "wf", tmp_path / "figures" / "wf"
    for name in ("workload", "workload_normalised", "dnn_models"):
        assert (res / "tables" / f"{name}.md").stat().st_size > 0
    for name in ("workload_fig9", "workload_fig10", "dnn_fig7"):
        assert (fig / f"{name}.png").stat().st_size > 0
    table = pd.read_csv(res / "tables" / "workload.csv")
    assert len(table) == 1 and table.iloc[0].best_algorithm in ("native:auto", "native:ring")
    assert not (fig / "auto_vs_best_mpich.png").exists()  # no single-call cells
    page = (res / "report" / "index.html").read_text()
    assert "Fig. 9: images/s with AUTO and BEST" in page
