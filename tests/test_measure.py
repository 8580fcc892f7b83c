"""The measurement engine with real MPI launches at small P."""

import hashlib
import json
import os
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import FAST, PLUGIN, execute_run, fast_settings, harness

from harness.cells import Cell
from harness.verify import DTYPES, OPS

LIBRARIES = ["mpich", "openmpi", "impi"]


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_dtype_and_op_is_correct(results_root, library):
    """P=3 (not a power of two), counts 1, 7 (not divisible by P) and 1 MiB, all dtypes and ops."""
    cells = [Cell(library, "native:auto", 3, n * np.dtype(dt).itemsize, dt, op)
             for dt in DTYPES for op in OPS for n in (1, 7)]
    cells.append(Cell(library, "native:auto", 3, 2**20, "float64", "sum"))
    outcome, doc, store = execute_run(results_root, library, cells)
    assert outcome == "complete"
    assert doc["status"] == "complete"
    statuses = {c["cell_id"]: c["status"] for c in doc["cells"]}
    assert len(statuses) == len(cells)
    assert set(statuses.values()) <= {"ok", "not-converged"}, doc["cells"]
    raw = pq.read_table(store.raw(doc["run_id"])).to_pandas()
    assert set(raw.cell_id) == {c.cell_id for c in cells}
    assert all(len(a) == 3 for a in raw.arrival)


@pytest.mark.parametrize("algorithm", ["test:wrong", "test:noop"])
def test_wrong_result_is_recorded_wrong(results_root, algorithm):
    out = harness("run", "--library", "mpich", "--algorithm", algorithm, "--plugin", PLUGIN,
                  "--procs", "3", "--size", "1KiB", *FAST)
    assert out.returncode == 1, out.stderr
    assert "status=wrong" in out.stdout
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert list(df.status) == ["wrong"]
    assert "differs from the reference" in df.error[0]


def test_one_late_rank_arrives_late_and_the_mean_reflects_it(results_root):
    delay = 0.040  # far above how a loaded machine scatters the others' arrivals (~1 ms)
    out = harness("run", "--library", "openmpi", "--algorithm", "native:ring", "--procs", "4",
                  "--size", "4MiB", "--delay", "one-late", "--max-delay", f"{delay * 1e3:g}ms",
                  "--min-reps", "10", "--max-reps", "10", "--warmup", "1")
    assert out.returncode == 0, out.stderr + out.stdout
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    row = df.iloc[0]
    assert row.delay == "one-late" and row.max_delay == pytest.approx(delay)
    raw = pq.read_table(results_root / "adhoc" / "raw" / f"{row.run_id}.parquet").to_pandas()
    assert all(np.asarray(d)[1] == pytest.approx(delay) and np.delete(np.asarray(d), 1).max() == 0
               for d in raw.delay)
    # a rank that got the common start time too late (a loaded machine) widens the window;
    # those repetitions are flagged and the arrival claim is checked on the others
    clean = raw[raw.late_starts == 0]
    assert len(clean) >= 3, raw.late_starts.tolist()
    arrivals = np.stack(clean.arrival.map(np.asarray))  # (repetitions, ranks), one clock
    after_first = arrivals - arrivals.min(axis=1, keepdims=True)
    # rank 1 is the one recorded late: the latest rank in the median repetition, ahead of
    # the latest other rank by at least half the injected delay (a rank descheduled past the
    # start can reach the call late in a single repetition: the median, not every one)
    assert int(np.argmax(np.median(after_first, axis=0))) == 1, after_first.tolist()
    over_latest = arrivals[:, 1] - np.delete(arrivals, 1, axis=1).max(axis=1)
    assert np.median(over_latest) >= 0.5 * delay, over_latest.tolist()
    # ranks 0, 2, 3 wait for rank 1 inside the allreduce: 3/4 of the ranks wait at least
    # that lead, so the mean elapsed is at least 3/4 of it
    assert row["mean"] >= 0.75 * 0.5 * delay, row["mean"]


def test_rand_late_delays_are_seeded_per_repetition(results_root):
    args = ["run", "--library", "mpich", "--procs", "3", "--size", "8B", "--delay", "rand-late",
            "--max-delay", "2ms", "--min-reps", "3", "--max-reps", "3", "--warmup", "0"]
    assert harness(*args).returncode == 0
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    raw = pq.read_table(results_root / "adhoc" / "raw" / f"{df.run_id[0]}.parquet").to_pandas()
    delays = np.stack(raw.delay.map(np.asarray))
    assert delays.shape == (3, 3) and (delays >= 0).all() and (delays <= 0.002).all()
    assert len({tuple(d) for d in delays}) == 3  # a new draw every repetition
    assert harness(*args).returncode == 0  # the rerun replays the same delays
    raw2 = pq.read_table(results_root / "adhoc" / "raw" / f"{df.run_id[0]}.parquet").to_pandas()
    assert np.array_equal(np.stack(raw2.delay.map(np.asarray)), delays)


def test_rerun_replaces_the_cells_row(results_root):
    args = ["run", "--library", "mpich", "--procs", "2", "--size", "64KiB", *FAST]
    assert harness(*args).returncode == 0
    first = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert harness(*args).returncode == 0
    assert harness(*args[:-len(FAST)], "--size", "8B", *FAST).returncode == 0
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert len(df) == 2
    again = df[df.cell_id == first.cell_id[0]].iloc[0]
    assert again.finished > first.finished[0]


def test_run_that_dies_keeps_finished_cells(results_root):
    cells = [Cell("mpich", "native:auto", 2, 1024), Cell("mpich", "test:crash", 2, 1024),
             Cell("mpich", "native:auto", 2, 2048)]
    outcome, doc, _ = execute_run(results_root, "mpich", cells, plugins=[PLUGIN],
                                  algorithm_env={})
    assert outcome == "failed"
    by_id = {c["cell_id"]: c for c in doc["cells"]}
    assert by_id[cells[0].cell_id]["status"] in ("ok", "not-converged")
    assert by_id[cells[0].cell_id]["stats"]["n"] >= 3
    assert by_id[cells[1].cell_id]["status"] == "failed"
    assert by_id[cells[2].cell_id]["status"] == "failed"
    assert "exited with status" in by_id[cells[2].cell_id]["error"]
    # the record keeps the run's last error output: why it died
    assert "rank 0 leaves with status 17" in by_id[cells[2].cell_id]["error"], by_id[cells[2].cell_id]["error"]


def test_launch_dying_in_start_up_is_launched_again(results_root, monkeypatch, capfd):
    """A launch whose rank is killed before MPI_Init (a transient start-up fault) measured
    nothing: the runner launches it again, says so, and the run completes; the run's error
    output of both launches is kept in logs/<run>.log."""
    marker = results_root.parent / "died-in-init"
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent / "plugins" / "hang_init"))
    monkeypatch.setenv("HARNESS_TEST_DIE_INIT", str(marker))
    cells = [Cell("mpich", "native:auto", 2, 64)]
    outcome, doc, store = execute_run(results_root, "mpich", cells)
    assert marker.exists()  # the fault happened
    assert outcome == "complete" and doc["cells"][0]["status"] in ("ok", "not-converged")
    assert "the launch died before measuring" in capfd.readouterr().err
    assert store.log(doc["run_id"]).read_text().count("== attempt started") == 2


def test_run_past_its_wall_time_is_killed_and_marked_timeout(results_root):
    out = harness("run", "--library", "mpich", "--algorithm", "test:hang", "--plugin", PLUGIN,
                  "--procs", "2", "--size", "8B", "--timeout", "5s", *FAST)
    assert out.returncode == 1
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert list(df.status) == ["timeout"]


def test_provenance_and_job_script(results_root):
    out = harness("run", "--library", "openmpi", "--algorithm", "native:ring", "--procs", "2",
                  "--size", "8KiB", "--campaign", "prov", *FAST)
    assert out.returncode == 0, out.stderr
    df = pd.read_csv(results_root / "prov" / "summary.csv")
    run_id = df.run_id[0]
    doc = json.loads((results_root / "prov" / "runs" / f"{run_id}.json").read_text())
    prov = doc["provenance"]
    assert prov["library_version"].startswith("Open MPI v5")
    assert prov["env"]["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "1"
    assert prov["env"]["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "4"
    assert len(prov["hosts"]) == 2 and prov["mpi4py"] and prov["wtick"] > 0
    assert prov["thread_level"] == "single"  # the lowest level the cell needs
    assert prov["cores"] == [os.cpu_count()] * 2
    script = results_root / "prov" / "jobs" / f"{run_id}.sh"
    assert prov["jobscript_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    row = df.iloc[0]
    assert row.library_version.startswith("Open MPI") and row.procs == 2 and row["size"] == 8192
    assert row.busbw == pytest.approx(row.algbw * 2 * (2 - 1) / 2)
    assert row.algbw == pytest.approx(8192 / row["mean"])


def test_normality_comes_from_the_raw_repetitions(results_root):
    """The bench leaves Shapiro-Wilk's p out of the run document (scipy.stats would cost rank
    0 a second of every launch); the summary computes it from the raw repetitions of the
    cell's metric, and `harness check` finds the two consistent."""
    from harness.stats import normality_p

    out = harness("run", "--library", "mpich", "--algorithm", "native:ring", "--procs", "2",
                  "--size", "4KiB", "--campaign", "sw", "--min-reps", "8", "--max-reps", "8",
                  "--precision", "1e-9", "--warmup", "1")
    assert out.returncode == 0, out.stderr
    row = pd.read_csv(results_root / "sw" / "summary.csv").iloc[0]
    doc = json.loads((results_root / "sw" / "runs" / f"{row.run_id}.json").read_text())
    (entry,) = doc["cells"]
    assert entry["stats"]["n"] == 8 and entry["stats"]["normality_p"] is None
    raw = pq.read_table(results_root / "sw" / "raw" / f"{row.run_id}.parquet").to_pandas()
    want = normality_p(raw[raw.cell_id == row.cell_id][f"{row.metric}_elapsed"].to_numpy(float))
    assert 0 < want <= 1 and row.normality_p == pytest.approx(want, rel=1e-12)
    check = harness("check", "sw")
    assert check.returncode == 0 and "consistent" in check.stdout, check.stdout + check.stderr


def test_dry_run_prints_a_quoted_script_and_writes_nothing(tmp_path, monkeypatch):
    # a results directory whose path has a space, ';' and '$(...)': every path in the job
    # script carries it, and none may split a word or end a command
    odd = tmp_path / "odd root;touch x $(name)"
    monkeypatch.setenv("HARNESS_RESULTS", str(odd))
    out = harness("run", "--library", "mpich", "--campaign", "dry", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("#!/usr/bin/env bash")
    commands = [l for l in out.stdout.splitlines() if l.strip() and not l.startswith("#")]
    for line in commands:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        assert ";" not in words and "touch" not in words, (line, words)
    (launch,) = [l for l in commands if l.startswith("exec ")]
    spec = Path(shlex.split(launch)[-1])  # the bench's spec: one word, the odd path inside it
    assert spec.parent == odd / "dry" / "jobs" and spec.suffix == ".json", launch
    assert not odd.exists()


def test_campaign_name_that_is_no_name_is_refused_before_anything(results_root):
    # a campaign name names a directory and appears in job scripts: one that is not a plain
    # name is refused by the config's validation, which `harness run` goes through
    out = harness("run", "--library", "mpich", "--campaign", "odd $(name);x", "--procs", "2",
                  "--size", "8B", *FAST)
    assert out.returncode == 2
    assert "argument --campaign: 'odd $(name);x' is not a valid name" in out.stderr
    assert not results_root.exists()


def test_results_path_is_never_pasted_unquoted(tmp_path, monkeypatch):
    odd = tmp_path / "odd $(name);x"
    monkeypatch.setenv("HARNESS_RESULTS", str(odd))
    out = harness("run", "--library", "mpich", "--campaign", "q", "--procs", "2",
                  "--size", "8B", *FAST)
    assert out.returncode == 0, out.stderr
    assert (odd / "q" / "summary.csv").is_file()
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("library", ["mpich", "impi", "openmpi"])
def test_rank_that_cannot_read_the_spec_ends_the_launch(results_root, library):
    """One rank of a launch whose job spec it cannot read (a second workflow rewriting it, a
    file system hiccup) fails before MPI starts; its peer, already in MPI, must not wait for it
    for ever: the whole launch ends, non-zero, naming the missing file. (MPICH's launcher
    once kept such a peer, and the test machine's launch turn, for 30 minutes.)"""
    import signal
    import subprocess

    from harness import libraries
    from harness.campaign import runner
    from harness.cells import Run
    from harness.results import store as results

    cell = Cell(library, "native:auto", 2, 64, "float64", "sum", "none", 0.0, 0, 1, ())
    run = Run(library=library, env=(), procs=2, nodes=1, cells=(cell,), thread_level="single")
    store = results.CampaignStore(results_root, "t")
    script, spec = runner.prepare(run, libraries.get_library(library), store, fast_settings())
    runner.write(store, script, spec)
    good = str(store.job_spec(run.run_id))
    missing = str(results_root / "no-such-spec.json")
    # the job script's own launch, as MPMD: rank 0 reads the spec, rank 1 a missing file
    text = store.job_script(run.run_id).read_text()
    launch = shlex.split(text.strip().splitlines()[-1])
    n = launch.index("-n")
    assert launch[0] == "exec" and launch[-1] == good and launch[n + 1] == "2", launch
    launcher, program = launch[1:n], launch[n + 2:-1]  # mpiexec [options], python -m ...bench
    mpmd = [*launcher, "-n", "1", *program, good, ":", "-n", "1", *program, missing]
    script_path = store.job_script(run.run_id)
    script_path.write_text(text.replace(text.strip().splitlines()[-1], shlex.join(["exec", *mpmd])))
    proc = subprocess.Popen(["bash", str(script_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the launch still ran 120 s after one rank could not read its spec:\n{out[-3000:]}")
    assert proc.returncode != 0, out[-3000:]
    assert "no-such-spec.json" in out, out[-3000:]
