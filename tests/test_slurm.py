"""`snakemake --profile slurm` on a real Slurm: the local two-node cluster of .ci/slurm.

Opt-in: set HARNESS_SLURM_TESTS=1 (CI does, see .ci/run). The tests then bring the cluster
up with `bash .ci/slurm/up.sh` (Debian packages, root) and fail if that fails; without the
variable they are skipped. The campaign checks read the cut-down paper campaign that
tests/test_paper_configs.py checks too (tests/slurm_support.py: run once per process); every
test here is in the xdist group "slurm" (one worker: one job at a time on the one cluster)."""

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest
import slurm_support
import yaml

from harness.campaign import auto_ran
from conftest import FAST_STOP, REPO, SITE_VARS, SNAKEMAKE, snakemake_slurm

pytestmark = pytest.mark.xdist_group("slurm")


@pytest.fixture(scope="module", autouse=True)
def local_slurm(local_slurm_cluster):
    """Every test here runs on the local Slurm (conftest.local_slurm_cluster: opt-in)."""


@pytest.fixture(scope="module")
def paper_campaign(local_slurm, tmp_path_factory):
    return slurm_support.paper_campaign(tmp_path_factory)


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


def planned_runs(config_path):
    from harness.campaign.config import load
    from harness.campaign.plan import expand

    return {r.run_id: r for r in expand(load(config_path))}


@pytest.mark.timeout(slurm_support.CAMPAIGN_TIMEOUT + 300)
def test_campaign_runs_on_slurm_across_both_nodes(paper_campaign):
    """The cut-down paper campaign (MPICH, Open MPI, Intel MPI; one and two nodes) under a
    directory whose name would run commands if a shell expanded it: every run's ranks sit on
    the Slurm nodes the run asked for, MPICH and Intel MPI start with srun, Slurm's
    accounting has every job, and nothing was executed from the name."""
    camp = paper_campaign
    df = camp.summary()
    assert set(df.status) <= {"ok", "not-converged"}, df[["algorithm", "status", "error"]]
    runs = planned_runs(camp.config_path)
    docs = camp.run_docs()
    assert set(docs) == set(runs)
    assert {r.nodes for r in runs.values()} == {1, 2}
    for run_id, run in runs.items():
        nodes = docs[run_id]["provenance"]["nodes"]
        # P ranks, P / nodes on each of the run's nodes (the rule asks for tasks per node)
        assert len(nodes) == run.procs and set(nodes) <= {"n1", "n2"}, (run_id, nodes)
        assert len(set(nodes)) == run.nodes, (run_id, run.library, nodes)
        assert all(nodes.count(n) == run.procs // run.nodes for n in set(nodes)), nodes
    srun = {rid: r for rid, r in runs.items() if r.library in ("mpich", "impi")}
    assert {(r.procs, r.nodes) for r in srun.values()} >= {(4, 2), (2, 2), (4, 1)}
    for run_id, run in srun.items():
        script = (camp.results / "jobs" / f"{run_id}.sh").read_text()
        assert f"srun --mpi=pmi2 --nodes={run.nodes} --ntasks={run.procs}" in script, run_id
    assert (camp.figures / "auto_vs_best_mpich.png").stat().st_size > 0

    # Slurm's accounting knows every job, named after the workflow's run, finished in the
    # partition asked for, on both nodes where the run has two
    acct = subprocess.run(["sacct", "-X", "-n", "-P", "--name", camp.slurm_run_id(), "-o",
                           "JobID,State,NodeList,Partition"],
                          capture_output=True, text=True, timeout=60)
    rows = [line.split("|") for line in acct.stdout.split()]
    # and one pre-flight job per installation (2 tasks on one node), before any run
    checked = [p for p in (camp.results / "installations").glob("*.json")
               if not p.name.endswith(".decl.json")]
    assert sorted(p.stem for p in checked) == sorted({r.library for r in runs.values()})
    assert all(json.loads(p.read_text())["launched"] for p in checked)
    # and one job per group of AUTO cells that sees what AUTO ran (rank 0 under gdb)
    seen = [p for p in (camp.results / "auto_ran").glob("*.json") if not p.name.endswith(".spec.json")]
    assert len(seen) == len(auto_ran.groups(runs.values())) > 0
    said = pd.read_csv(camp.results / "summary.csv")
    auto = said[(said.algorithm == "native:auto") & said.auto_ran.notna()]
    assert len(auto) and not auto.auto_ran.str.contains("failed|unverifiable").any(), \
        auto[["library", "procs", "nodes", "size", "auto_ran"]]
    assert len(rows) == len(runs) + len(checked) + len(seen), acct.stdout + acct.stderr
    assert all(r[1] == "COMPLETED" and r[3] == "debug" for r in rows), rows
    two = sum(r.nodes == 2 for r in runs.values()) + sum(
        g["nodes"] == 2 for g in auto_ran.groups(runs.values()).values())
    assert sorted(r[2] for r in rows if r[2] not in ("n1", "n2")) == ["n[1-2]"] * two, rows

    assert not list(camp.root.rglob("pwned*")) and not list(REPO.glob("pwned*"))


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


@pytest.mark.timeout(slurm_support.CAMPAIGN_TIMEOUT + 300)
def test_nap_and_smp_on_both_slurm_nodes(paper_campaign):
    """NAP and SMP with the real layout under Slurm (paper-nap's cut-down: P = 4 on 2 nodes):
    the two nodes (both slurmd on this host) are told apart by Slurm's node names; results
    are correct, the record names both nodes and NAP sends one inter-node message per rank
    (2 nodes x 2 ranks)."""
    camp = paper_campaign
    df = camp.summary()
    rows = df[df.algorithm.isin(["nap", "smp"])]
    assert sorted(rows.algorithm) == ["nap", "smp"], rows[["algorithm", "procs", "nodes"]]
    assert set(rows.status) <= {"ok", "not-converged"}, \
        "\n".join(f"{r.algorithm} {r.size} {r.status}: {r.error}" for r in rows.itertuples())
    assert set(rows.host) == {"n1,n2"} and set(rows.procs) == {4} and set(rows.nodes) == {2}
    for _, row in rows.iterrows():
        rec = json.loads(row["record"])
        assert rec["layout"] == "real" and rec["layout_source"] == "slurm", rec
        assert rec["n_nodes"] == 2 and rec["ppn"] == 2 and sorted(rec["node_names"]) == ["n1", "n2"]
        assert rec["inter_msgs"] == 1, rec
    (run_id,) = set(rows.run_id)
    prov = camp.run_docs()[run_id]["provenance"]
    assert sorted(prov["nodes"]) == ["n1", "n1", "n2", "n2"]
    assert (camp.figures / "node_aware_vs_size.png").stat().st_size > 0


def test_node_set_down_mid_run_then_back_and_rerun(tmp_path):
    """A Slurm node goes DOWN while a two-node run measures (Slurm kills or requeues the job);
    the node comes back, the campaign is rerun: the cells the run had finished are kept (its
    journal), nothing is measured twice, and the report is built."""
    import time

    from harness.campaign.runner import START_RETRIES

    base = tmp_path / "down"
    base.mkdir()
    cfg = base / "config.yaml"
    # three slow cells of five calls (warm-up, three repetitions, the counting call) of 0.3 s:
    # the node goes down once the first is in the journal, while the second measures
    cfg.write_text(yaml.safe_dump({
        "campaign": "dn", "stopping": FAST_STOP, "run_walltime": "3min",
        "confirm": {"enabled": False}, "plugins": [str(REPO / "tests" / "plugins" / "faults.py")],
        "experiments": {
            "slow": {"libraries": ["mpich"], "algorithms": ["test:slow"], "procs": [4],
                     "nodes": 2, "sizes": ["8B", "64B", "1KiB"], "params": {"sleep": 0.3}}}}))
    res = base / "results" / "dn"
    env = {k: v for k, v in os.environ.items() if k not in SITE_VARS}
    env.update(HARNESS_RESULTS=str(base / "results"), HARNESS_FIGURES=str(base / "figures"),
               HARNESS_SLURM_PARTITION="debug")
    cmd = SNAKEMAKE + ["--profile", "slurm", "--snakefile", str(REPO / "Snakefile"),
                       "--directory", str(base / "work"), "--configfile", str(cfg),
                       "--slurm-init-seconds-before-status-checks", "1"]
    # --slurm-no-requeue: Slurm ends the job on the node (NODE_FAIL) instead of queueing it
    # again after a hold of minutes; the rerun below resumes the run from its journal
    proc = subprocess.Popen(cmd + ["--slurm-no-requeue"], env=env, cwd=REPO, stdout=subprocess.PIPE,
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

    def running_on_n2():
        q = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-w", "n2", "-o", "%i"],
                           capture_output=True, text=True, timeout=60)
        return q.stdout.split()

    deadline = time.time() + 300
    while time.time() < deadline and not measuring() and proc.poll() is None:
        time.sleep(0.1)
    if not measuring():
        proc.kill()
        raise AssertionError("the slow run never started measuring; the workflow printed:\n"
                             + proc.communicate(timeout=60)[0][-4000:])
    try:
        down = subprocess.run(["scontrol", "update", "nodename=n2", "state=down",
                               "reason=harness fault test"], capture_output=True, text=True)
        assert down.returncode == 0, down.stderr
        deadline = time.time() + 60  # until Slurm has ended the job on the node
        while time.time() < deadline and running_on_n2():
            time.sleep(0.2)
        assert not running_on_n2()
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=resume"],
                       capture_output=True, text=True)
    first_log = proc.communicate(timeout=600)[0]
    assert proc.returncode != 0, first_log[-3000:]  # its one job failed
    # the fault happened: Slurm ended the job that ran on the node
    acct = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "--name", run_uuid(first_log), "-o",
                           "State"], capture_output=True, text=True, timeout=60)
    assert {"NODE_FAIL", "FAILED", "CANCELLED"} & set(acct.stdout.split()), \
        acct.stdout + first_log[-3000:]
    before = {(c["cell_id"], c["finished"])
              for p in (res / "progress").glob("*.json")
              for c in json.loads(p.read_text())["cells"] if c["status"] not in ("failed", "timeout")}
    assert before, "no cell finished before the node went down"
    # once: a launch that dies in MPI's start-up is launched again by the runner itself
    out = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, first_log[-2000:] + (out.stdout + out.stderr)[-4000:]
    df = pd.read_csv(res / "summary.csv")
    assert len(df) == 3 and set(df.status) <= {"ok", "not-converged"}, \
        df[["algorithm", "status", "error"]]
    docs = {p.stem: json.loads(p.read_text()) for p in (res / "runs").glob("*.json")}
    slurm_support.assert_start_attempts(docs, res / "logs", START_RETRIES)
    after = {(c["cell_id"], c["finished"]) for doc in docs.values() for c in doc["cells"]}
    assert before <= after  # the journal's cells kept, not measured again
    assert len(before) < len(after)  # and the others measured by the rerun
    assert (res / "report" / "index.html").stat().st_size > 0
    check = subprocess.run([sys.executable, "-m", "harness.cli", "check", "dn", "--configfile",
                            str(cfg)], env=env, cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0, check.stdout[-3000:]
