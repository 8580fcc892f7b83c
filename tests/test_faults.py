"""A fault campaign: ranks killed in each stage of a run, a rank hanging in MPI_Init, the
workflow itself interrupted (SIGTERM, SIGKILL) in each stage, two workflows on one campaign,
damaged files, a full and a read-only file system. Each test asserts that the campaign
completes (after `harness retry` or a rerun where the fault needs one), that nothing finished
is lost or measured twice, that the report is built and that `harness check` holds."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import HARNESS, REPO
from test_workflow import SNAKEMAKE, env_for, job_seconds, snakemake, summary

FAULTS = str(REPO / "tests" / "plugins" / "faults.py")
HANG_INIT = str(REPO / "tests" / "plugins" / "hang_init")
STOP = {"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1, "time_budget": "20s"}


def config(tmp_path, experiments, name="config.yaml", **top):
    doc = {"campaign": "wf", "stopping": STOP, "plugins": [FAULTS],
           "confirm": {"enabled": False}, "auto_ran": {"enabled": False},
           "experiments": experiments, **top}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def store(tmp_path):
    return tmp_path / "results" / "wf"


def run_docs(tmp_path):
    return {p.stem: json.loads(p.read_text()) for p in (store(tmp_path) / "runs").glob("*.json")}


def finished_cells(tmp_path):
    """(cell, finished) of every cell a run finished: a cell measured again changes its stamp."""
    return {(c["cell_id"], c["finished"]) for d in run_docs(tmp_path).values()
            for c in d["cells"] if c["status"] not in ("failed", "timeout")}


def harness_cmd(tmp_path, *args, timeout=900):
    return subprocess.run(HARNESS + list(args), env=env_for(tmp_path), capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


def check_ok(tmp_path, cfg):
    out = harness_cmd(tmp_path, "check", "wf", "--configfile", str(cfg))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "consistent" in out.stdout


def report_built(tmp_path, libraries=("mpich",)):
    figs = tmp_path / "figures" / "wf"
    for lib in libraries:
        assert (figs / f"auto_vs_best_{lib}.png").stat().st_size > 0
    assert (store(tmp_path) / "tables" / "auto_vs_best.md").is_file()


def retry(tmp_path, cfg):
    return harness_cmd(tmp_path, "retry", "wf", "--configfile", str(cfg), "--",
                       "--directory", str(tmp_path / "work"))


# one run per stage: a run's launch ends at its first killed rank, so the four faults of one
# run would need four retries; runs differ by their MPI thread level (plan: one launch per
# library, environment, P, nodes and thread level)
DIE_RUNS = {stage: level for stage, level in zip(("prepare", "warmup", "measure", "count"),
                                                 ("single", "funneled", "serialized",
                                                  "multiple"))}
# 16 B (not 8 B): no AUTO cell of one double, so no node-aware report (nothing here needs it)
NATIVE = {"native": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring"],
                     "procs": [2], "sizes": ["16B"]}}


def test_ranks_killed_in_each_stage_then_retried(tmp_path):
    """Rank 1 is killed once in prepare, the warm-up, a measured repetition and the counting
    call (one run each; after prepare, a finished cell before the killed one); one `harness
    retry` measures the failed cells only, and a second finds nothing to retry."""
    cfg = config(tmp_path, {
        **{f"die_{stage}": {"libraries": ["mpich"], "algorithms": ["ring", "test:die"],
                            "procs": [2], "sizes": ["16B"], "params": {"die": [stage]},
                            "thread_level": level}
           for stage, level in DIE_RUNS.items()},
        **NATIVE})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    report_built(tmp_path)
    assert len(list((tmp_path / "results").glob(".died-*"))) == 4  # each fault happened once
    df = summary(tmp_path)
    assert len(df) == 10
    failed = df[df.status == "failed"]
    # exactly the killed cells failed, with the launch's status: the test:die cell of each
    # run, and every cell of the run killed in prepare (set-up, before any cell is measured;
    # native:auto shares that run: same library, no forcing environment, thread level single)
    prepare_run = df[df.params.str.contains('"prepare"')].run_id.iloc[0]
    expect = df[(df.algorithm == "test:die") | (df.run_id == prepare_run)]
    assert set(failed.cell_id) == set(expect.cell_id), df[["algorithm", "params", "status"]]
    assert len(failed) == 6 and failed.run_id.nunique() == 4
    assert failed.error.str.contains("status").all()
    assert set(df[df.status != "failed"].status) <= {"ok", "not-converged"}
    check_ok(tmp_path, cfg)
    before = finished_cells(tmp_path)
    out = retry(tmp_path, cfg)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "retrying 4 run(s) (6 failed cell(s))" in out.stdout, out.stdout[-3000:]
    after = finished_cells(tmp_path)
    assert before < after  # nothing finished was lost or measured again ...
    assert {c for c, _ in after - before} == set(failed.cell_id)  # ... and the killed ones were
    df = summary(tmp_path)
    assert len(df) == 10 and set(df.status) <= {"ok", "not-converged"}, \
        df[["algorithm", "params", "status"]]
    stages = {json.loads(p)["die"] for p in df[df.algorithm == "test:die"].params}
    assert stages == set(DIE_RUNS)
    assert len(list((tmp_path / "results").glob(".died-*"))) == 4  # no fault a second time
    assert len(list((store(tmp_path) / "retried").glob("r*.json"))) == 4
    again = harness_cmd(tmp_path, "retry", "wf", "--configfile", str(cfg), "--dry-run")
    assert again.returncode == 0 and "nothing to retry" in again.stdout, again.stdout
    report_built(tmp_path)
    check_ok(tmp_path, cfg)


WALLTIME = 15


def test_rank_hanging_in_mpi_init_times_out_then_retried(tmp_path):
    cfg = config(tmp_path, {
        "a": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring"],
              "procs": [2], "sizes": ["16B", "64B"]}}, run_walltime=f"{WALLTIME}s")
    env = env_for(tmp_path)
    env.update(PYTHONPATH=HANG_INIT, HARNESS_TEST_HANG_INIT="1")
    out = subprocess.run(SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory",
                                      str(tmp_path / "work"), "--configfile", str(cfg)],
                         env=env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    df = summary(tmp_path)
    assert len(df) == 4
    assert (df.status == "timeout").all()
    assert df.error.str.contains(f"wall-time limit of {WALLTIME} s").all(), df.error
    # each run was stopped at its wall-time: its measure job lasted at least the limit (rank
    # 0 waits in MPI_Init for ever, so the job ended only because the harness killed it)
    docs = sorted((store(tmp_path) / "runs").glob("*.json"))
    assert len(docs) == 2
    for doc in docs:
        assert json.loads(doc.read_text())["status"] == "timeout"
        assert job_seconds(tmp_path, doc) >= WALLTIME * 0.95, doc.name
    report_built(tmp_path)
    out = retry(tmp_path, cfg)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "retrying 2 run(s) (4 timeout cell(s))" in out.stdout, out.stdout[-3000:]
    df = summary(tmp_path)
    assert len(df) == 4 and set(df.status) <= {"ok", "not-converged"}
    check_ok(tmp_path, cfg)


SLOW_REPORT = str(REPO / "tests" / "plugins" / "slow_report")


def _start(tmp_path, cfg, env=None):
    return subprocess.Popen(
        SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "work"),
                     "--configfile", str(cfg)],
        env=env or env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, cwd=REPO, start_new_session=True)


def _wait_for(cond, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


SLOW = {"slow": {"libraries": ["mpich"], "algorithms": ["test:slow"], "procs": [2],
                 "sizes": ["8B", "64B", "1KiB"], "params": {"sleep": 0.3}},
        "native": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring",
                                                          "native:recursive_doubling"],
                   "procs": [2], "sizes": ["16B"]}}


def _slow_run_midway(res: Path):
    """The id of the run of the test:slow cells once it has finished a cell and not all its
    slow ones (at least one of >= 1 s left): the workflow is provably in the measure stage."""
    for p in (res / "progress").glob("*.json") if (res / "progress").is_dir() else ():
        try:
            cells = json.loads(p.read_text()).get("cells", [])
            spec = json.loads((res / "jobs" / p.name).read_text())
        except ValueError:  # being replaced
            continue
        slow = sum(c["algorithm"] == "test:slow" for c in spec["cells"])
        done = sum(c["cell"]["algorithm"] == "test:slow" for c in cells)
        if slow and cells and done < slow:
            return p.stem
    return None


def _report_outputs(tmp_path):
    return [store(tmp_path) / "tables" / f"auto_vs_best.{ext}" for ext in ("md", "tex", "csv")] \
        + [tmp_path / "figures" / "wf" / f"auto_vs_best_mpich.{ext}" for ext in ("png", "pdf")]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("stage", ["measure", "report"])
def test_workflow_killed_then_rerun(tmp_path, sig, stage):
    """The workflow killed (only its own process, as an out-of-memory killer would) while a
    run measures, or while the report is drawn; the rerun loses and repeats nothing."""
    cfg = config(tmp_path, SLOW)
    env = env_for(tmp_path)
    started = tmp_path / "report-started"
    if stage == "report":  # the report stage waits 20 s before drawing (a test plugin)
        env.update(PYTHONPATH=SLOW_REPORT, HARNESS_TEST_REPORT_STARTED=str(started))
    proc = _start(tmp_path, cfg, env)
    res = store(tmp_path)
    if stage == "measure":
        assert _wait_for(lambda: _slow_run_midway(res)), "the slow run was not seen measuring"
        midway = _slow_run_midway(res)
    else:
        assert _wait_for(started.is_file), "the report stage did not start"
    os.kill(proc.pid, getattr(signal, sig))
    # the signal came while the stage was running: its output is not there yet
    if stage == "measure":
        assert midway is not None and not (res / "runs" / f"{midway}.json").exists()
    else:
        assert not [p for p in _report_outputs(tmp_path) if p.exists()]
    proc.wait(timeout=300)
    if stage == "report":  # the report job the workflow left running: wait for its end
        pid = int(started.read_text())
        assert _wait_for(lambda: _gone(pid), timeout=300)
    before = finished_cells(tmp_path)
    # a run the killed workflow left running finishes on its own; the rerun waits for it
    first = snakemake(tmp_path, cfg)
    log = first.stdout + first.stderr
    if first.returncode != 0:
        assert "LockException" in log or "locked" in log, log[-3000:]
        unlock = snakemake(tmp_path, cfg, "--unlock")
        assert unlock.returncode == 0, unlock.stderr[-2000:]
        first = snakemake(tmp_path, cfg)
        log = first.stdout + first.stderr
    assert first.returncode == 0, log[-3000:]
    after = finished_cells(tmp_path)
    assert before <= after
    df = summary(tmp_path)
    assert len(df) == 6 and set(df.status) <= {"ok", "not-converged"}
    # no cell measured twice: one result per cell in the run documents
    ids = [c["cell_id"] for d in run_docs(tmp_path).values() for c in d["cells"]]
    assert len(ids) == len(set(ids)) == 6
    report_built(tmp_path)
    check_ok(tmp_path, cfg)


def test_two_workflows_on_one_campaign(tmp_path):
    """A second workflow in the same work directory is refused by Snakemake's lock; a third
    in another work directory (Snakemake's lock does not see it) measures beside the first:
    runs take turns (a lock per run) and nothing is measured twice. It measures only (its
    report would rewrite the first's summary and figures while the first reads them, which
    docs/troubleshooting.md lists); once the first is done, it runs to the end
    and measures nothing. The first's slow run waits at a gate file until the second has been
    refused, so the first is surely still running then."""
    held = {**SLOW, "slow": {**SLOW["slow"], "params": {"sleep": 0.3, "gate": "gate"}}}
    cfg = config(tmp_path, held)
    gate = tmp_path / "results" / "gate"  # under $HARNESS_RESULTS (env_for)
    gate.parent.mkdir(parents=True, exist_ok=True)
    gate.touch()
    try:
        first = _start(tmp_path, cfg)
        assert _wait_for(lambda: any((store(tmp_path) / "progress").glob("*.json"))
                         if (store(tmp_path) / "progress").is_dir() else False)
        same = snakemake(tmp_path, cfg)
    finally:
        gate.unlink()
    assert first.poll() is None  # the gate held it
    assert same.returncode != 0
    assert "LockException" in same.stdout + same.stderr
    w2 = ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "w2"),
          "--configfile", str(cfg)]
    other = subprocess.run(SNAKEMAKE + w2 + ["--until", "measure"], env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=900, cwd=REPO)
    log = first.communicate(timeout=900)[0]
    if first.returncode != 0:
        # the documented race (docs/troubleshooting.md): the second workflow ran a run's job
        # again (it measured nothing: the run's journal was complete), and Snakemake removes a
        # job's output first, so the first's aggregate found that run document missing. The
        # remedy is to run the first again, which measures nothing and finishes.
        assert "Missing files after" in log and "/runs/r" in log, log[-3000:]
        again = snakemake(tmp_path, cfg)
        assert again.returncode == 0, again.stderr[-3000:]
    assert other.returncode == 0, other.stderr[-3000:]
    measured = finished_cells(tmp_path)
    ids = [c["cell_id"] for d in run_docs(tmp_path).values() for c in d["cells"]]
    assert len(ids) == len(set(ids)) == 6
    other = subprocess.run(SNAKEMAKE + w2, env=env_for(tmp_path), capture_output=True,
                           text=True, timeout=900, cwd=REPO)
    assert other.returncode == 0, other.stderr[-3000:]
    assert finished_cells(tmp_path) == measured  # nothing measured again
    df = summary(tmp_path)
    assert len(df) == 6 and set(df.status) <= {"ok", "not-converged"}
    report_built(tmp_path)
    check_ok(tmp_path, cfg)


SMALL = {"a": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring"],
               "procs": [2], "sizes": ["16B"]}}
MORE = {**SMALL, "b": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring"],
                       "procs": [2], "sizes": ["4KiB"]}}


def _tree(root: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _intact(root: Path):
    """Every JSON and Parquet file parses, and no temporary file is left behind."""
    import pyarrow.parquet as pq

    for p in root.rglob("*"):
        assert not p.name.startswith("."), f"temporary file left: {p}"
        if p.suffix == ".json":
            json.loads(p.read_text())
        elif p.suffix == ".parquet":
            pq.read_table(p)


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    up = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(mnt)],
                        capture_output=True, text=True)
    assert up.returncode == 0, f"mount tmpfs (root is needed): {up.stderr}"
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _env_on(tmp_path, mnt):
    env = env_for(tmp_path)
    env["HARNESS_RESULTS"] = str(mnt / "results")
    return env


def _snakemake_on(tmp_path, mnt, cfg):
    return subprocess.run(SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory",
                                       str(tmp_path / "work"), "--configfile", str(cfg)],
                          env=_env_on(tmp_path, mnt), capture_output=True, text=True,
                          timeout=900, cwd=REPO)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_full_or_read_only_results_file_system(tmp_path, small_fs, fault):
    """The campaign ran; then its file system fills up (or turns read-only) and a larger
    config runs: a clear error naming the problem, nothing already written damaged, no
    half-written file."""
    first = _snakemake_on(tmp_path, small_fs, config(tmp_path, SMALL))
    assert first.returncode == 0, first.stderr[-3000:]
    res = small_fs / "results" / "wf"
    kept = _tree(res)
    if fault == "full":
        subprocess.run(["dd", "if=/dev/zero", f"of={small_fs / 'filler'}", "bs=64k"],
                       capture_output=True)
    else:
        ro = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True,
                            text=True)
        assert ro.returncode == 0, ro.stderr
    out = _snakemake_on(tmp_path, small_fs, config(tmp_path, MORE, name="more.yaml"))
    log = out.stdout + out.stderr
    assert out.returncode != 0
    if fault == "full":
        assert "No space left on device" in log and "cannot write" in log, log[-3000:]
    else:  # Snakemake refuses before any job, naming the files it could not write
        assert "Read-only file system" in log or "Write-protected output files" in log, log[-3000:]
    for path, data in kept.items():  # nothing written before is changed or gone
        assert path.read_bytes() == data, path
    _intact(res)


@pytest.fixture(scope="module")
def small_measured(tmp_path_factory):
    """The SMALL campaign measured and reported once per test worker, and a copy of it as it
    was then (modification times kept, so Snakemake finds it up to date)."""
    base = tmp_path_factory.mktemp("small")
    cfg = config(base, SMALL)
    out = snakemake(base, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    pristine = tmp_path_factory.mktemp("small-pristine") / "copy"
    shutil.copytree(base, pristine, symlinks=True)
    return base, pristine


@pytest.fixture
def small_campaign(small_measured):
    """The measured SMALL campaign, restored to its state just after the workflow (what an
    earlier test damaged is put back): (directory the tests use as their tmp_path, config)."""
    base, pristine = small_measured
    shutil.rmtree(base)
    shutil.copytree(pristine, base, symlinks=True)
    return base, base / "config.yaml"


# the tests that start from the measured SMALL campaign share one measurement per worker
on_small = pytest.mark.xdist_group("faults-small")


@on_small
def test_damaged_run_document_is_rebuilt_from_its_journal(small_campaign):
    tmp_path, cfg = small_campaign
    docs = sorted((store(tmp_path) / "runs").glob("*.json"))
    good = docs[0].read_text()
    docs[0].write_text(good[: len(good) // 2])  # truncated, as by a crash without rename
    out = harness_cmd(tmp_path, "check", "wf", "--configfile", str(cfg))
    assert out.returncode == 0, out.stdout
    assert f"recovered: {docs[0]}: unreadable" in out.stdout and "rebuilt from" in out.stdout
    assert json.loads(docs[0].read_text())["cells"] == json.loads(good)["cells"]
    # without the journal: one line naming the file and the remedy, in check and aggregate
    docs[0].write_text("{")
    (store(tmp_path) / "progress" / docs[0].name).unlink()
    out = harness_cmd(tmp_path, "check", "wf", "--configfile", str(cfg))
    assert out.returncode == 1
    assert f"{docs[0]}: unreadable" in out.stdout and "harness retry wf" in out.stdout
    agg = snakemake(tmp_path, cfg, "--forcerun", "aggregate")
    assert agg.returncode != 0
    assert f"{docs[0]}: unreadable" in agg.stderr and "Traceback" not in agg.stderr
    # the remedy: retry measures that run again
    out = retry(tmp_path, cfg)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert len(summary(tmp_path)) == 2
    check_ok(tmp_path, cfg)


@on_small
def test_check_names_every_inconsistency(small_campaign):
    tmp_path, cfg = small_campaign
    check_ok(tmp_path, cfg)
    res = store(tmp_path)
    s = pd.read_csv(res / "summary.csv")
    s.loc[0, "mean"] = s.loc[0, "mean"] * 1.5
    s = pd.concat([s, s.iloc[[1]]])
    s.to_csv(res / "summary.csv", index=False)
    doc_path = sorted((res / "runs").glob("*.json"))[0]
    doc = json.loads(doc_path.read_text())
    doc["cells"][0]["stats"]["ci_high"] *= 2
    doc["cells"][0]["status"] = "ok" if doc["cells"][0]["status"] != "ok" else "not-converged"
    doc["provenance"].pop("library_version")
    doc_path.write_text(json.dumps(doc))
    script = res / "jobs" / f"{doc_path.stem}.sh"
    script.write_text(script.read_text() + "\n# edited\n")
    out = harness_cmd(tmp_path, "check", "wf", "--configfile", str(cfg))
    assert out.returncode == 1
    text = out.stdout
    for needle in ("appears more than once", "mean", "ci_high", "stopping rule",
                   "provenance lacks library_version", "SHA-256 differs"):
        assert needle in text, f"{needle!r} not in:\n{text}"


@on_small
def test_damaged_raw_file_is_named_and_measured_again(small_campaign):
    tmp_path, cfg = small_campaign
    raw = sorted((store(tmp_path) / "raw").glob("*.parquet"))[0]
    raw.write_bytes(raw.read_bytes()[:100])
    out = harness_cmd(tmp_path, "check", "wf", "--configfile", str(cfg))
    assert out.returncode == 1
    assert f"{raw}: unreadable" in out.stdout and "harness retry wf" in out.stdout
    out = retry(tmp_path, cfg)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{raw}: unreadable" in out.stdout  # why the run was reset
    assert "measured again" in out.stdout + out.stderr  # the bench's one line
    df = summary(tmp_path)
    assert len(df) == 2 and set(df.status) <= {"ok", "not-converged"}
    check_ok(tmp_path, cfg)
