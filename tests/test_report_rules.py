"""Every report rule of the workflow that is made from the summary runs, through Snakemake and
off Slurm, on a small summary: the default campaign's plan (which gets every report of the
registry) with one synthetic row per planned cell. One rule failing names itself here, not
inside the Slurm paper campaign, where one failure hid the others. The reports made from a
stage's documents (confirm, tuned, sgd) run in the workflow tests of those stages
(tests/test_confirm.py, tests/test_tune_workflow.py, tests/test_sgd_workflow.py)."""

import json
import shutil
import subprocess
import zlib
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO
from test_workflow import SNAKEMAKE, env_for

from harness.campaign.workflow import Campaign
from harness.report.registry import REPORTS, Facts
from harness.results.store import SUMMARY_COLUMNS
from harness.simulate import loader

CONFIG = REPO / "config" / "experiments.yaml"
GOLDEN_PARAMS = REPO / "tests" / "data" / "golden" / "model_params.json"
# the reports that read a stage's documents, and the test that runs each one's rule
FROM_DOCUMENTS = {"confirm": "test_confirm.py", "tuned": "test_tune_workflow.py",
                  "sgd": "test_sgd_workflow.py"}


SIMGRID_MISSING = loader.available()  # SimGrid is optional outside CI
SIMULATED = {"platforms": {"laptop": {"kind": "simulated", "nodes": 1, "cores_per_node": 2}},
             "experiments": {"simulated": {"platform": "laptop", "libraries": ["openmpi"],
                                           "algorithms": ["native:auto", "native:ring"],
                                           "procs": [2], "sizes": ["4KiB", "64KiB"]}}}


def _seconds(cell) -> float:
    """A time that grows with P and size and differs by algorithm, the same every run."""
    spread = 1 + (zlib.crc32(cell.algorithm.encode()) % 7) / 10
    return (2e-6 * (1 + cell.procs / 4) + cell.size * 1e-9) * spread


def _row(campaign, run, cell) -> dict:
    mean = _seconds(cell)
    params = dict(cell.params)
    record = ({"level": params.get("layout", "socket"), "pairs": int(params.get("pairs", 1))}
              if cell.algorithm == "pingpong" else {})
    return {**{c: None for c in SUMMARY_COLUMNS},
            "campaign": campaign, "cell_id": cell.cell_id, "run_id": run.run_id,
            "library": run.library, "library_version": f"{run.library} synthetic",
            "algorithm": cell.algorithm, "procs": cell.procs, "nodes": cell.nodes,
            "size": cell.size, "count": cell.count, "dtype": cell.dtype, "op": cell.op,
            "delay": cell.delay, "max_delay": cell.max_delay, "late_rank": cell.late_rank,
            "params": json.dumps(params, sort_keys=True), "thread_level": cell.thread_level,
            "timing": cell.timing, "buffers": cell.buffers, "oversubscribed": False,
            "shared_cpu": False, "metric": "mean", "n": 20, "mean": mean,
            "ci_low": 0.98 * mean, "ci_high": 1.02 * mean, "rel_halfwidth": 0.02,
            "std": 0.03 * mean, "median": mean, "median_ci_low": 0.98 * mean,
            "median_ci_high": 1.02 * mean, "min": 0.9 * mean, "max": 1.2 * mean,
            "ci_method": "t", "converged": True, "status": "ok", "record": json.dumps(record),
            "finished": "2026-11-28T00:00:00.000+00:00", "launches": 1,
            "simulated": bool(cell.platform), "platform": cell.platform or None}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """The default campaign planned (not measured) under a temporary results root, its
    summary written from the plan, and the model parameters of the golden reports."""
    root = tmp_path_factory.mktemp("rules")
    doc = yaml.safe_load(CONFIG.read_text())
    # and the default campaign's Open MPI cells at P = 2 simulated too, for the report that
    # sets simulated beside measured (SimGrid is optional: the default campaign has none)
    if not SIMGRID_MISSING:
        doc["platforms"] = SIMULATED["platforms"]
        doc["experiments"].update(SIMULATED["experiments"])
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env_for(root).items():
            if key.startswith("HARNESS_"):
                mp.setenv(key, value)
        campaign = Campaign(doc, source=str(CONFIG))
        facts = Facts.of(campaign.runs.values(), confirm_groups=campaign.confirm_groups(),
                         auto_ran=bool(campaign.auto_ran_groups()),
                         tune_libraries=campaign.tune_libraries(),
                         sgd_experiments=sorted(campaign.cfg.sgd or {}))
        res, fig = Path(campaign.store.dir), Path(campaign.figures)
    rows = [_row(campaign.cfg.campaign, r, c) for r in campaign.runs.values() for c in r.cells]
    res.mkdir(parents=True)
    pd.DataFrame(rows, columns=SUMMARY_COLUMNS).to_csv(res / "summary.csv", index=False)
    shutil.copy(GOLDEN_PARAMS, res / "model_params.json")
    (root / "simulated.yaml").write_text(yaml.safe_dump({} if SIMGRID_MISSING else SIMULATED))
    return root, res, fig, facts


def test_every_report_rule_runs_off_slurm(planned):
    root, res, fig, facts = planned
    reports = [r for r in REPORTS.values() if not r.reads]
    # the default campaign (with the simulated experiment) gets every report: none is left out
    # of this test (without SimGrid, all but the simulation's, which the CI's run covers)
    left_out = {"simulation"} if SIMGRID_MISSING else set()
    assert {r.name for r in reports if r.applies(facts)} == {r.name for r in reports} - left_out
    reports = [r for r in reports if r.name not in left_out]
    assert {r.name for r in REPORTS.values() if r.reads} == set(FROM_DOCUMENTS)
    for name, test in FROM_DOCUMENTS.items():
        assert REPORTS[name].rule_name in (REPO / "tests" / test).read_text() or name in (
            REPO / "tests" / test).read_text(), (name, test)
    rules = [r.rule_name for r in reports]
    targets = [p for r in reports for p in r.outputs(str(res / "tables"), str(fig), facts)]
    out = subprocess.run(
        SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory", str(root / "work"),
                     "--configfile", str(CONFIG), str(root / "simulated.yaml"), "--cores", "2",
                     "--allowed-rules", *rules,
                     "--", *targets],
        env=env_for(root), capture_output=True, text=True, timeout=1500, cwd=REPO)
    assert out.returncode == 0, out.stderr[-4000:]
    ran = {line.split("rule ", 1)[1].rstrip(":").strip() for line in out.stderr.splitlines()
           if line.startswith(("rule ", "localrule "))}
    assert set(rules) <= ran, f"rules that did not run: {sorted(set(rules) - ran)}"
    missing = [t for t in targets if not Path(t).is_file() or Path(t).stat().st_size == 0]
    assert not missing, missing
    # nothing was measured: the summary is the synthetic one, and no run document was made
    assert not (res / "runs").exists()
