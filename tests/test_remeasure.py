"""A changed config re-measures exactly the runs whose identity changed (harness/campaign/plan.py: a
run is its library, forcing environment, P, nodes and cells): adding a size to one
experiment measures that experiment's new run and nothing else; renaming an experiment
measures nothing."""

import json
import re

import yaml
from test_workflow import snakemake, summary, write_config

A = {"libraries": ["mpich"], "algorithms": ["native:ring"], "procs": [2], "sizes": ["8B"]}
B = {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2], "sizes": ["8B"]}


def measured(log: str) -> list[str]:
    """Run ids of the measure jobs Snakemake ran, from its log."""
    return re.findall(r"rule measure:\n(?:\s+\S.*\n)*?\s+wildcards: run=(r[0-9a-f]{12})", log)


def finished(runs_dir) -> dict:
    return {p.stem: json.loads(p.read_text())["finished"] for p in runs_dir.glob("*.json")}


def test_changed_setting_remeasures_only_the_runs_it_changes(tmp_path):
    cfg = write_config(tmp_path, {"a": A, "b": B})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    runs_dir = tmp_path / "results" / "wf" / "runs"
    first = finished(runs_dir)
    assert sorted(measured(out.stdout + out.stderr)) == sorted(first) and len(first) == 2
    before = summary(tmp_path).set_index("algorithm")
    ring_run = before.loc["native:ring", "run_id"]
    auto_run = before.loc["native:auto", "run_id"]

    # experiment a gets a second size: its run (all of a's cells, one launch) is a new one
    cfg = write_config(tmp_path, {"a": {**A, "sizes": ["8B", "64B"]}, "b": B})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    (new_run,) = measured(out.stdout + out.stderr)
    assert new_run not in first
    after = finished(runs_dir)
    assert {k: after[k] for k in first} == first  # neither earlier run was measured again
    df = summary(tmp_path)
    assert len(df) == 3
    assert set(df[df.algorithm == "native:ring"].run_id) == {new_run}
    assert set(df[df.algorithm == "native:ring"]["size"]) == {8, 64}
    # the 8 B ring cell keeps its id (cells are the same point), measured in the new run
    assert before.loc["native:ring", "cell_id"] in set(df.cell_id)
    assert list(df[df.algorithm == "native:auto"].run_id) == [auto_run] != [ring_run]

    # a new name for an experiment changes no cell and no run: nothing is measured
    doc = yaml.safe_load(cfg.read_text())
    doc["experiments"]["b-renamed"] = doc["experiments"].pop("b")
    cfg.write_text(yaml.safe_dump(doc))
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert measured(log) == [] and "rule jobscript:" not in log, log[-3000:]
    assert finished(runs_dir) == after
