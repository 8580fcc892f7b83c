"""SUARA2 (``harness/algorithms/suara.py``): correct on every grid of P with mixed
sub-allreduces, the model's choice at P where no grid exists, and the chosen grid recorded."""

import json

import pytest
from conftest import FAST, harness
from mpi_check_support import check_algorithms


@pytest.mark.parametrize("sweep", ["1,4,6-8", "9,12,13"])
def test_suara2_every_grid_mpich(sweep):
    """Each P of the sweep (primes, squares, several grids) on the first P ranks of a launch."""
    check_algorithms("mpich", int(sweep.split(",")[-1].split("-")[-1]), "suara", sweep=sweep)


def test_suara2_every_grid_openmpi():
    check_algorithms("openmpi", 6, "suara")


def test_harness_run_records_the_grid(results_root):
    out = harness("run", "--library", "openmpi", "--algorithm", "suara2", "--param", "grid=3x2",
                  "--param", "row=ring", "--param", "col=native", "--procs", "6",
                  "--size", "48KiB", *FAST)
    assert out.returncode == 0, out.stderr
    doc = json.loads(next((results_root / "adhoc" / "runs").glob("*.json")).read_text())
    (cell,) = doc["cells"]
    rec = cell["record"]
    assert {k: rec[k] for k in ("P_r", "P_c", "row", "col")} == {"P_r": 3, "P_c": 2, "row": "ring", "col": "native"}
    assert (rec["row_forcing"], rec["col_forcing"]) == ("harness", "launch-env")
    assert dict(cell["cell"]["params"]) == {"grid": "3x2", "row": "ring", "col": "native"}


def test_grid_that_does_not_fit_is_a_failed_cell(results_root):
    out = harness("run", "--library", "mpich", "--algorithm", "suara2", "--param", "grid=5x2",
                  "--procs", "6", "--size", "8KiB", *FAST)
    assert out.returncode == 1
    assert "grid 5x2 does not arrange P=6 processes" in out.stdout


def test_param_needs_key_and_value(results_root):
    out = harness("run", "--algorithm", "suara2", "--param", "grid")
    assert out.returncode == 2 and "--param" in out.stderr and not results_root.exists()


@pytest.mark.parametrize("library,mechanism", [("openmpi", "mpit-dup"), ("mpich", "mpit-per-call")])
def test_each_dimension_forced_to_its_own_native_algorithm(results_root, library, mechanism):
    out = harness("run", "--library", library, "--algorithm", "suara2", "--param", "grid=2x3",
                  "--param", "row=native:ring", "--param", "col=native:recursive_doubling",
                  "--procs", "6", "--size", "48KiB", *FAST)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(next((results_root / "adhoc" / "runs").glob("*.json")).read_text())
    (cell,) = doc["cells"]
    assert cell["status"] in ("ok", "not-converged")
    rec = cell["record"]
    assert (rec["row"], rec["col"]) == ("native:ring", "native:recursive_doubling")
    assert rec["row_forcing"] == rec["col_forcing"] == mechanism
    assert rec["split_seconds"] > 0


def test_same_native_algorithm_in_both_dimensions_is_forced_by_the_launch(results_root):
    out = harness("run", "--library", "impi", "--algorithm", "suara2", "--param", "grid=2x2",
                  "--param", "row=native:ring", "--param", "col=native:ring",
                  "--procs", "4", "--size", "32KiB", *FAST)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(next((results_root / "adhoc" / "runs").glob("*.json")).read_text())
    (cell,) = doc["cells"]
    assert cell["record"]["row_forcing"] == cell["record"]["col_forcing"] == "launch-env"
    assert doc["provenance"]["env"]["I_MPI_ADJUST_ALLREDUCE"] == "8"


def test_intel_mpi_cannot_force_two_native_algorithms(results_root):
    out = harness("run", "--library", "impi", "--algorithm", "suara2", "--param", "grid=2x2",
                  "--param", "row=native:ring", "--param", "col=native:recursive_doubling",
                  "--procs", "4", "--size", "32KiB", *FAST)
    assert out.returncode == 1
    assert "does not let an allreduce algorithm be forced per communicator" in out.stdout
