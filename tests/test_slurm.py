"""`snakemake --profile slurm` on a real Slurm: the local two-node cluster of .ci/slurm.

Opt-in: set HARNESS_SLURM_TESTS=1 (CI does, see .ci/run). The tests then bring the cluster
up with `bash .ci/slurm/up.sh` (Debian packages, root) and fail if that fails; without the
variable they are skipped."""

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import FAST_STOP, REPO, SITE_VARS, SNAKEMAKE, snakemake_slurm  # noqa: F401


@pytest.fixture(scope="module", autouse=True)
def local_slurm(local_slurm_cluster):
    """Every test here runs on the local Slurm (conftest.local_slurm_cluster: opt-in)."""


def write_config(base, campaign="sl"):
    base.mkdir(parents=True, exist_ok=True)
    # the confirmation stage is left out: these tests count the campaign's own Slurm jobs
    doc = {"campaign": campaign, "stopping": FAST_STOP, "run_walltime": "3min",
           "confirm": {"enabled": False}, "experiments": {
        "two": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring"],
                "procs": [4], "nodes": 2, "sizes": ["8B", "4KiB"]}}}
    path = base / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run_uuid(log):
    m = re.search(r"SLURM run ID: (\S+)", log)
    assert m, log[-3000:]
    return m.group(1)


def test_campaign_runs_on_slurm_across_both_nodes(tmp_path):
    # Everything lives under a directory whose name would run commands if a shell expanded
    # it: the plugin's `sbatch --wrap="..."` would (the profile feeds the command on stdin).
    marker = f"pwned-{uuid.uuid4().hex[:8]}"
    # pip MPICH's start-up over Slurm's pmi2 with two slurmd on one host fails now and then
    # (garbled pmi2 requests, then a UCX shared-memory error in MPI_Init): such a run is
    # recorded `failed` within seconds (srun --kill-on-bad-exit), and the campaign is run
    # once more from scratch; a second failure fails the test.
    for attempt in range(2):
        base = tmp_path / f"a{attempt}" / f"w$(touch {marker})`touch {marker}-bt`"
        cfg = write_config(base)
        out = snakemake_slurm(base, cfg, site={"HARNESS_SLURM_PARTITION": "debug"})
        log = out.stdout + out.stderr
        assert out.returncode == 0, log[-4000:]
        df = pd.read_csv(base / "results" / "sl" / "summary.csv")
        if set(df.status) <= {"ok", "not-converged"}:
            break
    assert len(df) == 4 and df.cell_id.is_unique
    assert set(df.status) <= {"ok", "not-converged"}
    assert set(df.algorithm) == {"native:auto", "native:ring"}
    assert set(df["size"]) == {8, 4096} and set(df.procs) == {4} and set(df.nodes) == {2}
    assert (base / "figures" / "sl" / "auto_vs_best_mpich.png").stat().st_size > 0

    runs = sorted((base / "results" / "sl" / "runs").glob("*.json"))
    assert len(runs) == 2
    for path in runs:
        doc = json.loads(path.read_text())
        nodes = doc["provenance"]["nodes"]
        # four ranks, two on each node (the rule asks for tasks per node when P splits evenly)
        assert sorted(nodes) == ["n1", "n1", "n2", "n2"], (path.name, nodes)
    for script in (base / "results" / "sl" / "jobs").glob("*.sh"):
        assert "srun --mpi=pmi2 --nodes=2 --ntasks=4" in script.read_text()

    # Slurm's accounting knows both jobs, named after the run, finished on both nodes
    acct = subprocess.run(["sacct", "-X", "-n", "-P", "--name", run_uuid(log), "-o",
                           "JobID,State,NodeList,Partition"],
                          capture_output=True, text=True, timeout=60)
    rows = [line.split("|") for line in acct.stdout.split()]
    assert len(rows) == 2, acct.stdout + acct.stderr
    assert all(r[1] == "COMPLETED" and r[2] == "n[1-2]" and r[3] == "debug" for r in rows), rows

    assert not list(tmp_path.rglob("pwned*")) and not list(REPO.glob("pwned*"))


@pytest.mark.parametrize("var", ["HARNESS_SLURM_PARTITION", "HARNESS_SLURM_ACCOUNT"])
def test_site_values_reach_slurm_as_literals(tmp_path, var):
    """A site value with shell metacharacters is handed to Slurm as one literal word: Slurm
    (or the plugin's account check) rejects it, nothing is executed, snakemake returns."""
    marker = Path("/tmp") / f"harness-pwned-{uuid.uuid4().hex}"
    evil = f"debug; touch {marker}; echo $(touch {marker}) `touch {marker}`"
    site = {var: evil}
    if var == "HARNESS_SLURM_PARTITION":
        site["HARNESS_SLURM_QOS"] = f"normal'$(touch {marker})"
    cfg = write_config(tmp_path)
    try:
        out = snakemake_slurm(tmp_path, cfg, "--until", "aggregate", site=site, timeout=300)
        log = out.stdout + out.stderr
        assert out.returncode != 0, log[-4000:]
        assert not marker.exists()
        assert not (tmp_path / "results" / "sl" / "runs").exists() or \
            not list((tmp_path / "results" / "sl" / "runs").glob("*.json"))
        if var == "HARNESS_SLURM_PARTITION":
            # the value got to sbatch shell-quoted, and sbatch refused the partition
            assert "-p 'debug; touch" in log, log[-4000:]
            assert "--qos='normal'\"'\"'$(touch" in log, log[-4000:]
            assert "invalid partition" in log.lower(), log[-4000:]
        else:
            assert "appears to be invalid" in log, log[-4000:]
        assert "has been submitted with SLURM jobid" not in log
    finally:
        marker.unlink(missing_ok=True)


def test_nap_and_smp_on_both_slurm_nodes(tmp_path):
    """NAP and SMP with the real layout under Slurm: the two nodes (both slurmd on this host)
    are told apart by Slurm's node names; results are correct, the record names both nodes
    and NAP sends one inter-node message per rank (2 nodes x 2 ranks)."""
    stop = {**FAST_STOP, "max_reps": 4}
    for attempt in range(3):  # pip MPICH's start-up under pmi2 fails now and then
        base = tmp_path / f"a{attempt}"
        base.mkdir(parents=True)
        cfg = base / "config.yaml"
        cfg.write_text(yaml.safe_dump({
            "campaign": "na", "stopping": stop, "run_walltime": "3min", "experiments": {
                "nodes": {"libraries": ["mpich"], "algorithms": ["nap", "smp"], "procs": [4],
                          "nodes": 2, "sizes": ["8B", "1KiB"], "params": {"layout": "real"}}}}))
        out = snakemake_slurm(base, cfg, site={"HARNESS_SLURM_PARTITION": "debug"})
        log = out.stdout + out.stderr
        assert out.returncode == 0, log[-4000:]
        df = pd.read_csv(base / "results" / "na" / "summary.csv")
        if set(df.status) <= {"ok", "not-converged"}:
            break
    assert len(df) == 4 and set(df.status) <= {"ok", "not-converged"}, \
        "\n".join(f"{r.algorithm} {r.size} {r.status}: {r.error}" for r in df.itertuples())
    assert set(df.host) == {"n1,n2"}
    for _, row in df.iterrows():
        rec = json.loads(row["record"])
        assert rec["layout"] == "real" and rec["layout_source"] == "slurm", rec
        assert rec["n_nodes"] == 2 and rec["ppn"] == 2 and sorted(rec["node_names"]) == ["n1", "n2"]
        assert rec["inter_msgs"] == 1, rec
    (run,) = (base / "results" / "na" / "runs").glob("*.json")
    assert sorted(json.loads(run.read_text())["provenance"]["nodes"]) == ["n1", "n1", "n2", "n2"]
    assert (base / "figures" / "na" / "node_aware_vs_size.png").stat().st_size > 0


def test_node_set_down_mid_run_then_back_and_rerun(tmp_path):
    """A Slurm node goes DOWN while a two-node run measures (Slurm kills or requeues the job);
    the node comes back, the campaign is rerun: the cells the run had finished are kept (its
    journal), nothing is measured twice, and the report is built."""
    import time

    base = tmp_path / "down"
    base.mkdir()
    cfg = base / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "campaign": "dn", "stopping": FAST_STOP, "run_walltime": "3min",
        "confirm": {"enabled": False}, "plugins": [str(REPO / "tests" / "plugins" / "faults.py")],
        "experiments": {
            "slow": {"libraries": ["mpich"], "algorithms": ["test:slow"], "procs": [4],
                     "nodes": 2, "sizes": ["8B", "64B", "1KiB", "4KiB"],
                     "params": {"sleep": 0.4}},
            "native": {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [4],
                       "nodes": 2, "sizes": ["8B"]}}}))
    res = base / "results" / "dn"
    env = {k: v for k, v in os.environ.items() if k not in SITE_VARS}
    env.update(HARNESS_RESULTS=str(base / "results"), HARNESS_FIGURES=str(base / "figures"),
               HARNESS_SLURM_PARTITION="debug")
    cmd = SNAKEMAKE + ["--profile", "slurm", "--snakefile", str(REPO / "Snakefile"),
                       "--directory", str(base / "work"), "--configfile", str(cfg),
                       "--slurm-init-seconds-before-status-checks", "2"]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)

    def measuring():
        for p in (res / "progress").glob("*.json") if (res / "progress").is_dir() else []:
            try:
                doc = json.loads(p.read_text())
            except ValueError:
                continue
            if any(c["cell"]["algorithm"] == "test:slow" for c in doc["cells"]) \
                    and not (res / "runs" / p.name).exists():
                return True
        return False

    deadline = time.time() + 300
    while time.time() < deadline and not measuring():
        time.sleep(0.2)
    assert measuring(), "the slow run never started measuring"
    try:
        down = subprocess.run(["scontrol", "update", "nodename=n2", "state=down",
                               "reason=harness fault test"], capture_output=True, text=True)
        assert down.returncode == 0, down.stderr
        time.sleep(5)
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=resume"],
                       capture_output=True, text=True)
    first_log = proc.communicate(timeout=600)[0]
    # the fault happened: Slurm ended (or requeued) the job that ran on the node
    acct = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "--name", run_uuid(first_log), "-o",
                           "State"], capture_output=True, text=True, timeout=60)
    assert {"NODE_FAIL", "REQUEUED", "FAILED", "CANCELLED"} & set(acct.stdout.split()), \
        acct.stdout + first_log[-3000:]
    before = {(c["cell_id"], c["finished"])
              for p in (res / "progress").glob("*.json")
              for c in json.loads(p.read_text())["cells"] if c["status"] not in ("failed", "timeout")}
    for attempt in range(3):  # pip MPICH's start-up under pmi2 fails now and then (see above)
        out = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, first_log[-2000:] + (out.stdout + out.stderr)[-4000:]
        df = pd.read_csv(res / "summary.csv")
        if set(df.status) <= {"ok", "not-converged"}:
            break
        r = subprocess.run([sys.executable, "-m", "harness.cli", "retry", "dn", "--configfile",
                            str(cfg), "--no-run"], env=env, cwd=REPO, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    assert len(df) == 5 and set(df.status) <= {"ok", "not-converged"}, df[["algorithm", "status", "error"]]
    after = {(c["cell_id"], c["finished"]) for p in (res / "runs").glob("*.json")
             for c in json.loads(p.read_text())["cells"]}
    assert before <= after  # the journal's cells kept, not measured again
    assert (base / "figures" / "dn" / "auto_vs_best_mpich.png").stat().st_size > 0
    check = subprocess.run([sys.executable, "-m", "harness.cli", "check", "dn", "--configfile",
                            str(cfg)], env=env, cwd=REPO, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-3000:]
