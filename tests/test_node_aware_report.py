"""The node-aware stage of the workflow: a small campaign of RD, SMP and NAP on emulated nodes
gives the Figs. 12-15 style figures and the message-count table (``report_node_aware``)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from conftest import REPO

from harness.analysis import node_aware as node_aware_data

SNAKEMAKE = [str(Path(sys.executable).parent / "snakemake")]
FAST_STOP = {"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1, "time_budget": "20s"}


def test_node_aware_campaign_figures_and_counts(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"campaign": "na", "stopping": FAST_STOP, "experiments": {
        "node-aware": {"libraries": ["openmpi"], "algorithms": ["recursive_doubling", "smp", "nap"],
                       "procs": [4], "sizes": ["8B", "64B"],
                       "params": {"layout": "emulated", "ppn": [1, 2]}}}}))
    env = {**os.environ, "HARNESS_RESULTS": str(tmp_path / "results"),
           "HARNESS_FIGURES": str(tmp_path / "figures")}
    out = subprocess.run(SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory",
                                      str(tmp_path / "work"), "--configfile", str(cfg)],
                         env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    res, fig = tmp_path / "results" / "na", tmp_path / "figures" / "na"
    df = pd.read_csv(res / "summary.csv")
    assert len(df) == 12 and set(df.status) <= {"ok", "not-converged"}
    for name in ("vs_procs", "vs_size", "model"):
        for ext in ("png", "pdf"):
            assert (fig / f"node_aware_{name}.{ext}").stat().st_size > 0
    # no native cells: no AUTO-vs-BEST figure is asked for
    assert not list(fig.glob("auto_vs_best_*"))

    counts = pd.read_csv(res / "tables" / "node_aware_counts.csv")
    assert len(counts) == 6 and set(counts["size"]) == {8}
    by = counts.set_index(["ppn", "algorithm"])
    # 2 nodes of 2: every algorithm crosses once; 4 nodes of 1: log2 4 = 2 for all (NAP falls
    # back to recursive doubling with one process per node)
    assert (by.loc[2, "inter_msgs"] == 1).all() and (by.loc[1, "inter_msgs"] == 2).all()
    assert (by.loc[1, "intra_msgs"] == 0).all()
    assert by.loc[(2, "nap"), "log_ppn_n"] == 1 and by.loc[(2, "recursive_doubling"), "log2_n"] == 1
    md = (res / "tables" / "node_aware_counts.md").read_text()
    assert "| 2 | 2 | 4 | 8B | NAP | 1 | 2 |" in md

    times = pd.read_csv(res / "tables" / "node_aware_times.csv")
    assert len(times) == 4
    ratio = times["recursive_doubling_mean"] / times["nap_mean"]
    assert (times["speedup_vs_rd"] - ratio).abs().max() < 1e-12


def test_load_ignores_rows_without_a_layout(tmp_path):
    csv = tmp_path / "s.csv"
    pd.DataFrame([
        {"library": "openmpi", "algorithm": "nap", "procs": 4, "size": 8, "status": "ok",
         "mean": 1e-5, "ci_low": 9e-6, "ci_high": 1.1e-5, "record": '{"layout": "emulated", "ppn": 2, "n_nodes": 2, "inter_msgs": 1}'},
        {"library": "openmpi", "algorithm": "recursive_doubling", "procs": 4, "size": 8,
         "status": "ok", "mean": 2e-5, "ci_low": 1e-5, "ci_high": 3e-5, "record": None},
        {"library": "openmpi", "algorithm": "native:auto", "procs": 4, "size": 8, "status": "ok",
         "mean": 2e-5, "ci_low": 1e-5, "ci_high": 3e-5, "record": None},
    ]).to_csv(csv, index=False)
    d = node_aware_data.load(csv)
    assert list(d["algorithm"]) == ["nap"] and int(d["ppn"].iloc[0]) == 2
