"""The distributed-SGD stage in the workflow (rules sgd_jobscript, sgd_train, report_sgd):
a config with an `sgd:` experiment trains for real, one MPI launch per execution in the
interleaved order, and writes Table 5 and the loss figure; a rerun does nothing."""

import json
import re

from requirements_support import require_module
from test_workflow import snakemake, write_config

SGD = {"library": "openmpi", "procs": 2, "algorithms": ["ring", "prr"], "iterations": 4,
       "batch": 2, "executions": 2, "test_images": 8, "straggler": 0}


def test_sgd_stage_trains_and_reports(tmp_path):
    require_module("torch")
    cfg = write_config(tmp_path, {
        "e": {"libraries": ["openmpi"], "algorithms": ["native:auto"], "procs": [2],
              "sizes": ["8B"]}}, sgd={"t5": SGD})
    out = snakemake(tmp_path, cfg, "--until", "report_sgd")
    assert out.returncode == 0, out.stderr[-4000:]
    log = out.stdout + out.stderr
    assert (log.count("rule sgd_jobscript:"), log.count("rule sgd_train:"),
            log.count("rule report_sgd:"), log.count("rule measure:")) == (4, 4, 1, 0), log[-3000:]
    res = tmp_path / "results" / "wf"
    exe = res / "sgd" / "t5"
    order = ["ring-0", "prr-0", "prr-1", "ring-1"]  # ring prr, then reversed
    assert sorted(p.stem for p in exe.glob("*.json")) == sorted(order)
    assert sorted(p.name for p in (exe / "jobs").iterdir()) == sorted(
        f"{n}.{ext}" for n in order for ext in ("json", "sh"))
    docs = [json.loads((exe / f"{n}.json").read_text()) for n in order]
    for n, d in zip(order, docs):
        alg, k = n.split("-")
        assert (d["kind"], d["experiment"], d["algorithm"], d["execution"]) == (
            "sgd-execution", "t5", alg, int(k))
        assert (d["library"], d["procs"], d["model"]["parameters"]) == ("openmpi", 2, 145578)
        assert len(d["loss"]) == len(d["allreduce_per_iteration"]) == 4
        assert d["data"]["images_per_rank"] == 8 and d["verification"]["ranks_identical"]
    # each execution ran after the one before it in the order (its input)
    for before, after in zip(order, order[1:]):
        assert (exe / before).with_suffix(".json").stat().st_mtime <= \
            (exe / after).with_suffix(".json").stat().st_mtime
    csv = (res / "tables" / "sgd_t5.csv").read_text().splitlines()
    assert len(csv) == 3 and csv[0].startswith("algorithm,executions,allreduce_mean"), csv
    assert {line.split(",")[:2][1] for line in csv[1:]} == {"2"}
    md = (res / "tables" / "sgd_t5.md").read_text()
    for text in ("P = 2", "Ring", "PRR"):
        assert text in md, md
    assert "SLT" not in md
    assert (res / "tables" / "sgd_t5.tex").stat().st_size > 0
    for ext in ("png", "pdf"):
        assert (tmp_path / "figures" / "wf" / f"sgd_t5_loss.{ext}").stat().st_size > 0
    again = snakemake(tmp_path, cfg, "--until", "report_sgd")
    log = again.stdout + again.stderr
    assert again.returncode == 0 and re.search(r"^total\s+0$", log, re.M), log[-3000:]
