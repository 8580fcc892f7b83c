"""No silent defaults: a cell outside its native algorithm's catalogue condition is decided
`not-applicable` by the plan and never launched; a campaign with failed cells says so in its
last line and `harness status` exits 3 (unless allow_failures); a failed launch's cells keep
the decisive line of its error output (harness/campaign/plan.py, harness/results/outcome.py,
harness/campaign/runner.py)."""

import io
import json
from dataclasses import replace

import pandas as pd
import pytest
import yaml
from conftest import fast_settings, harness
from test_workflow import runs_dir, snakemake, summary, write_config

from harness import fileio, libraries
from harness.campaign import config, plan, runner
from harness.cells import Cell, Run
from harness.cli import main
from harness.results import store as results

CONDITION = "count >= procs * (65536 // itemsize)"  # Open MPI's segmented ring, in the catalogue


def test_cells_below_the_condition_are_not_applicable_and_never_launched(tmp_path, monkeypatch):
    """Open MPI's segmented ring at P=2 needs 2 x 64 KiB: 4 KiB is not applicable, 1 MiB is
    measured. The run at P=3 holds 4 KiB alone: no job script, no measure job."""
    cfg = write_config(tmp_path, {
        "seg": {"libraries": ["openmpi"], "algorithms": ["native:segmented_ring"],
                "procs": [2], "sizes": ["4KiB", "1MiB"]},
        "small": {"libraries": ["openmpi"], "algorithms": ["native:segmented_ring"],
                  "procs": [3], "sizes": ["4KiB"]}})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert log.count("rule measure:") == 1, log[-3000:]
    (spec,) = (tmp_path / "results" / "wf" / "jobs").glob("*.json")
    assert [c["size"] for c in json.loads(spec.read_text())["cells"]] == [2**20]
    assert len(list((tmp_path / "results" / "wf" / "jobs").glob("*.sh"))) == 1

    df = summary(tmp_path).set_index(["procs", "size"])
    assert len(df) == 3
    assert df.loc[(2, 2**20), "status"] in ("ok", "not-converged")
    for key in ((2, 4096), (3, 4096)):
        row = df.loc[key]
        assert row["status"] == "not-applicable" and CONDITION in row["error"], row["error"]
        assert f"procs={key[0]}" in row["error"] and pd.isna(row["mean"])
        doc = json.loads((runs_dir(tmp_path) / f"{row['run_id']}.json").read_text())
        assert doc["status"] == "not-applicable" and doc["provenance"]["launched"] is False
    # the workflow's last line: nothing failed (not-applicable is not a failure)
    assert out.stdout.strip().splitlines()[-1] == \
        "campaign wf: no cell failed, timed out or was wrong (3 cells)"

    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    status = harness("status", "wf", "--configfile", cfg)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "not-applicable" in status.stdout and "not launched" in status.stdout
    retry = harness("retry", "wf", "--configfile", cfg, "--dry-run")
    assert retry.returncode == 0 and "nothing to retry" in retry.stdout
    check = harness("check", "wf", "--configfile", cfg)
    assert check.returncode == 0, check.stdout


def test_a_workload_cell_is_not_applicable_when_any_of_its_calls_is():
    """AlexNet fused as Horovod does has a call of 4096 floats (below the segmented ring's
    2 x 16384 at P=2), though the iteration is 233 MB; fused as DDP every call is above."""
    cfg = config.validate({"campaign": "w", "experiments": {"dnn": {
        "libraries": ["openmpi"], "algorithms": ["native:segmented_ring", "native:ring"],
        "procs": [2], "dtypes": ["float32"],
        "workload": {"models": ["alexnet"], "fusion": ["ddp", "horovod"], "precision": ["fp32"]}}}})
    runs, unlaunched = plan.partition(cfg)
    launched = {(c.algorithm, dict(c.params)["fusion"]) for r in runs for c in r.cells}
    assert launched == {("native:segmented_ring", "ddp"), ("native:ring", "ddp"),
                        ("native:ring", "horovod")}
    (skipped,) = unlaunched
    (cell,) = skipped.run.cells
    assert (cell.algorithm, dict(cell.params)["fusion"]) == ("native:segmented_ring", "horovod")
    assert CONDITION in skipped.reasons[cell.cell_id] and "count=4096" in skipped.reasons[cell.cell_id]


# --- a campaign that ends with failed cells

def _failed_launch(results_root, library="openmpi"):
    """One real launch of a run whose MPI library does not exist (MPI4PY_LIBMPI): every rank
    dies loading it. Returns (outcome, run document, store)."""
    lib = replace(libraries.get_library(library), libmpi="/nonexistent/lib/libmpi.so.12")
    run = Run(library=library, env=(), procs=2, nodes=1, cells=(Cell(library, "native:auto", 2, 64),))
    store = results.CampaignStore(results_root, "t")
    script, spec = runner.prepare(run, lib, store, fast_settings())
    assert "export MPI4PY_LIBMPI=/nonexistent/lib/libmpi.so.12" in script
    runner.write(store, script, spec)
    outcome = runner.execute(store, spec, timeout=60)
    return outcome, fileio.read_json(store.run_doc(run.run_id)), store


def test_a_failed_launch_keeps_the_decisive_line_and_status_exits_3(results_root, tmp_path,
                                                                     monkeypatch, capsys):
    # a launch that dies before measuring is launched again (tests/test_measure.py): once here
    monkeypatch.setattr(runner, "START_RETRIES", 0)
    outcome, doc, store = _failed_launch(results_root)
    assert outcome == "failed"
    error = doc["cells"][0]["error"]
    said = error.split("): ", 1)[1]  # after "job script exited with status 1; its error output (<log>)"
    assert said.startswith("RuntimeError: cannot load MPI library | /nonexistent/lib/libmpi.so.12: "
                           "cannot open shared object file"), error
    assert len(said) <= runner._Tail.CHARS + 3
    results.rebuild_summary(store)
    capsys.readouterr()

    cfg = tmp_path / "t.yaml"
    doc = {"campaign": "t", "experiments": {"a": {"libraries": ["openmpi"],
                                                  "algorithms": ["native:auto"], "procs": [2],
                                                  "sizes": ["64B"]}}}
    cfg.write_text(yaml.safe_dump(doc))
    assert main(["status", "t", "--configfile", str(cfg)]) == 3
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("campaign t: 1 of 1 cells gave no result: 1 failed, 0 timeout, 0 wrong")
    assert "harness retry t" in last and "allow_failures" in last

    cfg.write_text(yaml.safe_dump({**doc, "allow_failures": True}))
    assert config.load(cfg).allow_failures is True
    assert main(["status", "t", "--configfile", str(cfg)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "1 failed" in last and "allow_failures: true, so this is not an error" in last


def test_allow_failures_is_a_boolean_defaulting_to_false():
    base = {"campaign": "t", "experiments": {"a": {"libraries": ["mpich"],
                                                   "algorithms": ["native:auto"], "procs": [2],
                                                   "sizes": ["8B"]}}}
    assert config.validate(base).allow_failures is False
    with pytest.raises(config.ConfigError, match="allow_failures"):
        config.validate({**base, "allow_failures": "yes"})


# --- the decisive lines of a launch's error output

# What Open MPI's mpiexec printed for a launch of two ranks whose MPI4PY_LIBMPI did not exist
# (frames shortened): two tracebacks, each chained, then the launcher's boilerplate.
OPENMPI_SAID = """\
Traceback (most recent call last):
Traceback (most recent call last):
  File "/work/main/harness/measure/launch.py", line 152, in run_or_abort
  File "/work/main/harness/measure/launch.py", line 152, in run_or_abort
    return entry(*args)
    return entry(*args)
           ^^^^^^^^^^^^
  File "/work/main/.venv/lib/python3.11/site-packages/mpi4py/_mpiabi.py", line 210, in _dlopen_libmpi
    raise RuntimeError("\\n".join(errors))
RuntimeError: cannot load MPI library
/nonexistent/lib/libmpi.so.12: cannot open shared object file: No such file or directory

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/work/main/harness/measure/launch.py", line 168, in abort_launch
    from mpi4py import MPI
  File "/work/main/.venv/lib/python3.11/site-packages/mpi4py/_mpiabi.py", line 210, in _dlopen_libmpi
    raise RuntimeError("\\n".join(errors))
RuntimeError: cannot load MPI library
/nonexistent/lib/libmpi.so.12: cannot open shared object file: No such file or directory
--------------------------------------------------------------------------
prterun detected that one or more processes exited with non-zero status,
thus causing the job to be terminated. The first process to do so was:

  Process name: [prterun-vm-4268@1,0]
  Exit code:    1
--------------------------------------------------------------------------
"""

# MPICH's mpiexec (Hydra) after a rank's Python raised, and the loader refusing a program.
HYDRA_SAID = """\
Traceback (most recent call last):
  File "/work/main/harness/measure/bench.py", line 318, in <module>
    sys.exit(main())
  File "/work/main/harness/measure/bench.py", line 239, in run
    spec = fileio.read_json(spec_path)
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
Abort(1) on node 1 (rank 1 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) - process 1

===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 4242 RUNNING AT vm
=   EXIT CODE: 1
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
"""
LOADER_SAID = ("/usr/bin/python3: error while loading shared libraries: libpython3.11.so.1.0: "
               "cannot open shared object file: No such file or directory\n"
               "[proxy:0:0@vm] HYD_pmcd_pmip_control_cmd_cb: assert (!closed) failed\n")


def _tail_text(said: str, tmp_path) -> str:
    """What ``runner._Tail`` records of the error output ``said``, read as from a launch."""
    tail = runner._Tail(io.StringIO(), tmp_path / "run.log")
    tail.follow(io.BytesIO(said.encode()))
    tail.join()
    return tail.text()


def test_the_decisive_lines_come_before_the_launchers_boilerplate(tmp_path):
    assert runner.decisive(OPENMPI_SAID) == [
        "RuntimeError: cannot load MPI library",
        "/nonexistent/lib/libmpi.so.12: cannot open shared object file: No such file or directory"]
    text = _tail_text(OPENMPI_SAID, tmp_path)
    assert text.startswith("RuntimeError: cannot load MPI library | /nonexistent/lib/libmpi.so.12: "
                           "cannot open shared object file"), text
    assert text.index("cannot open shared object file") < text.index("prterun detected")
    assert "------" not in text and text.count("RuntimeError") == 1

    assert runner.decisive(HYDRA_SAID) == [
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"]
    text = _tail_text(HYDRA_SAID * 20, tmp_path)  # many ranks: still one line each, within bounds
    assert text.startswith("json.decoder.JSONDecodeError: Expecting value"), text
    assert len(text) <= runner._Tail.CHARS + 3 and "BAD TERMINATION" in text

    assert runner.decisive(LOADER_SAID) == [LOADER_SAID.splitlines()[0]]
    assert _tail_text(LOADER_SAID, tmp_path).startswith("/usr/bin/python3: error while loading "
                                                        "shared libraries: libpython3.11.so.1.0")
