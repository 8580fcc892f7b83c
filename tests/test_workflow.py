"""The Snakemake workflow on this machine: end to end, resume after an interrupt, a hanging
run killed at its wall-time limit, config values never executed by the shell."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml
from conftest import PLUGIN, REPO

SNAKEMAKE = [str(Path(sys.executable).parent / "snakemake")]
FAST_STOP = {"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1, "time_budget": "20s"}


def write_config(tmp_path, experiments, **top):
    """The test's campaign config. The confirmation stage (on by default) is left out unless
    the test passes ``confirm=``: test_confirm.py and test_tune_workflow.py test it, and its
    launches doubled the time of every other workflow test. So is the auto_ran stage (a gdb
    launch per group of AUTO cells; tests/test_installations.py runs it)."""
    doc = {"campaign": "wf", "stopping": FAST_STOP, "confirm": {"enabled": False},
           "auto_ran": {"enabled": False},
           "experiments": experiments, **top}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def env_for(tmp_path):
    env = os.environ.copy()
    env["HARNESS_RESULTS"] = str(tmp_path / "results")
    env["HARNESS_FIGURES"] = str(tmp_path / "figures")
    return env


def snakemake(tmp_path, cfg, *extra, timeout=900):
    return subprocess.run(
        SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "work"),
                     "--configfile", str(cfg), *extra],
        env=env_for(tmp_path), capture_output=True, text=True, timeout=timeout, cwd=REPO)


def runs_dir(tmp_path):
    return tmp_path / "results" / "wf" / "runs"


def job_seconds(tmp_path, output: Path) -> float:
    """How long the Snakemake job that made ``output`` ran (Snakemake's metadata record)."""
    import base64

    meta = tmp_path / "work" / ".snakemake" / "metadata"
    rec = json.loads((meta / base64.b64encode(str(output).encode()).decode()).read_text())
    return rec["endtime"] - rec["starttime"]


def summary(tmp_path):
    return pd.read_csv(tmp_path / "results" / "wf" / "summary.csv")


def test_campaign_end_to_end(tmp_path):
    cfg = write_config(tmp_path, {
        "small": {"libraries": ["mpich", "openmpi"], "algorithms": ["native:auto", "native:ring"],
                  "procs": [2], "sizes": ["64B", "4KiB"]}})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    df = summary(tmp_path)
    assert len(df) == 8 and df.cell_id.is_unique
    assert set(df.status) <= {"ok", "not-converged"}
    assert set(df.library) == {"mpich", "openmpi"}
    for lib in ("mpich", "openmpi"):
        for ext in ("png", "pdf"):
            assert (tmp_path / "figures" / "wf" / f"auto_vs_best_{lib}.{ext}").stat().st_size > 0
    for ext in ("md", "tex", "csv"):
        assert (tmp_path / "results" / "wf" / "tables" / f"auto_vs_best.{ext}").is_file()
    scripts = list((tmp_path / "results" / "wf" / "jobs").glob("*.sh"))
    assert len(scripts) == 4
    again = snakemake(tmp_path, cfg)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def _ctrl_c_as_in_a_terminal():
    """SIGINT back to its default in the workflow started: a shell ignores it in the commands
    it starts in the background (`make test &`, `nohup`), the workflow would inherit that, and
    the Ctrl-C this test sends would then be ignored, as it was in such a run."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupted_campaign_resumes_with_only_missing_runs(tmp_path):
    cfg = write_config(tmp_path, {
        "many": {"libraries": ["mpich"], "algorithms": ["native:*"], "procs": [2],
                 "sizes": ["1KiB"]}})
    runs_dir = tmp_path / "results" / "wf" / "runs"
    log_path = tmp_path / "interrupted.log"
    with open(log_path, "w") as log_fh:
        proc = subprocess.Popen(
            SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory",
                         str(tmp_path / "work"), "--configfile", str(cfg)],
            env=env_for(tmp_path), stdout=log_fh, stderr=subprocess.STDOUT, cwd=REPO,
            start_new_session=True, preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.time() + 300
    while time.time() < deadline and len(list(runs_dir.glob("*.json"))) < 3:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
    proc.wait(timeout=120)
    assert "Terminating processes on user request" in log_path.read_text()
    finished = {p.stem: json.loads(p.read_text()) for p in runs_dir.glob("*.json")}
    assert 3 <= len(finished) < 10
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    # the runs that were over are not redone (one may have ended as the interrupt came, which
    # the workflow reruns: it then measures nothing)
    assert 10 - len(finished) <= log.count("rule measure:") <= 11 - len(finished)
    for run_id, doc in finished.items():
        after = json.loads((runs_dir / f"{run_id}.json").read_text())
        assert [(c["cell_id"], c["finished"]) for c in after["cells"]] == \
            [(c["cell_id"], c["finished"]) for c in doc["cells"]]
    df = summary(tmp_path)
    assert len(df) == 10 and df.cell_id.is_unique
    assert set(df.status) <= {"ok", "not-converged"}


def test_hanging_run_is_killed_and_the_campaign_completes(tmp_path):
    cfg = write_config(tmp_path, {
        "hang": {"libraries": ["mpich"], "algorithms": ["test:hang"], "procs": [2],
                 "sizes": ["8B"]},
        "fine": {"libraries": ["mpich"], "algorithms": ["native:ring"], "procs": [2],
                 "sizes": ["8B"]}},
        plugins=[PLUGIN], run_walltime="8s")
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    df = summary(tmp_path).set_index("algorithm")
    assert df.loc["test:hang", "status"] == "timeout"
    assert "wall-time limit of 8 s" in df.loc["test:hang", "error"]
    # killed at its wall-time: the hanging run's measure job lasted at least the limit (the
    # algorithm never returns, so the job ended only because the harness killed the launch)
    run = runs_dir(tmp_path) / f"{df.loc['test:hang', 'run_id']}.json"
    assert job_seconds(tmp_path, run) >= 8 * 0.95
    assert df.loc["native:ring", "status"] in ("ok", "not-converged")


def test_config_values_reach_the_job_as_literals(tmp_path):
    marker = tmp_path / "pwned"
    evil = f"x'; touch {marker}; echo '$(touch {marker})"
    mpich = REPO / ".mpi" / "mpich"
    cfg = write_config(tmp_path, {
        "e": {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2],
              "sizes": ["8B"]}},
        libraries={"mpich": {"launcher": [str(mpich / "bin" / "mpiexec"), "-n", "{procs}"],
                             "libmpi": str(mpich / "lib" / "libmpi.so.12"),
                             "env": {"HARNESS_PROBE": evil}}})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    assert not marker.exists()
    doc = json.loads(next((tmp_path / "results" / "wf" / "runs").glob("*.json")).read_text())
    assert doc["provenance"]["env"]["HARNESS_PROBE"] == evil
    assert summary(tmp_path).status[0] in ("ok", "not-converged")


def test_invalid_config_fails_before_any_job(tmp_path):
    cfg = write_config(tmp_path, {
        "e": {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2],
              "sizes": ["8B"], "dtypes": ["complex64"]}})
    out = snakemake(tmp_path, cfg)
    assert out.returncode != 0
    assert "experiments.e.dtypes[0]" in out.stderr + out.stdout
    assert not (tmp_path / "results").exists()


def test_own_config_file_is_not_merged_with_the_default(tmp_path):
    """`snakemake --configfile mine.yaml` runs mine.yaml's experiments only: none of
    config/experiments.yaml's (whose runs have 4 to 12 ranks) is planned."""
    cfg = write_config(tmp_path, {
        "mine": {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2],
                 "sizes": ["8B"]}})
    out = snakemake(tmp_path, cfg, "-n")
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert log.count("rule measure:") == 1, log[-3000:]
    # from the repository root too, where config/experiments.yaml is found: still not merged
    here = subprocess.run(SNAKEMAKE + ["--configfile", str(cfg), "-n"], env=env_for(tmp_path),
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert here.returncode == 0, here.stderr[-3000:]
    assert (here.stdout + here.stderr).count("rule measure:") == 1, here.stdout[-3000:]
    plan_out = subprocess.run([sys.executable, "-m", "harness.cli", "plan", "--config", str(cfg)],
                              capture_output=True, text=True, cwd=REPO)
    assert f"({cfg}," in plan_out.stdout and "mine" in plan_out.stdout
    assert "auto-vs-best" not in plan_out.stdout
