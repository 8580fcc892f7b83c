"""Every catalogue entry of every library runs and is verified correct at small P."""

import pytest
from conftest import execute_run

from harness import libraries
from harness.cells import Cell

ENTRIES = [(lib.name, alg) for lib in libraries.catalogue().values() for alg in lib.native_names()]


def test_catalogue_is_complete():
    cat = libraries.catalogue()
    assert set(cat) == {"mpich", "openmpi", "impi"}
    for lib in cat.values():
        assert "native:auto" in lib.native_names()
        assert lib.native("native:auto").env == {}
        for alg in lib.algorithms.values():
            if alg.name != "auto":
                assert alg.env and alg.verified, (lib.name, alg.name)
    forced = cat["openmpi"].native("native:ring").env
    assert forced["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "1"
    assert forced["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "4"


def test_unknown_algorithm_lists_the_valid_ones():
    with pytest.raises(KeyError, match="native:ring"):
        libraries.get_library("mpich").native("native:bogus")
    with pytest.raises(KeyError, match="valid: mpich, openmpi, impi"):
        libraries.get_library("lam")


@pytest.mark.parametrize("library,algorithm", ENTRIES)
def test_entry_runs_and_is_correct(results_root, library, algorithm):
    """P=4 at 1 MiB float64 sum, and 7 int32 elements with max (count not divisible by P)."""
    cells = [Cell(library, algorithm, 4, 2**20, "float64", "sum"),
             Cell(library, algorithm, 4, 28, "int32", "max")]
    outcome, doc, _ = execute_run(results_root, library, cells)
    assert outcome == "complete"
    entry = libraries.get_library(library).native(algorithm)
    by_id = {c["cell_id"]: c for c in doc["cells"]}
    assert len(by_id) == 2
    for cell in cells:
        got = by_id[cell.cell_id]
        if entry.not_applicable(cell.count, cell.procs, int(cell.size / cell.count)):
            # the library would silently substitute another algorithm: not measured
            assert got["status"] == "failed" and "not applicable" in got["error"]
            assert not got["stats"]
        else:
            assert got["status"] in ("ok", "not-converged"), got
    assert by_id[cells[0].cell_id]["status"] != "failed" or entry.applies
    forced = entry.env
    for name, value in forced.items():
        assert doc["provenance"]["env"][name] == value


def test_not_applicable_forced_value_is_not_measured(results_root):
    """Open MPI's segmented ring below P x segment runs plain ring: recorded, not timed."""
    cells = [Cell("openmpi", "native:segmented_ring", 2, 4096),
             Cell("openmpi", "native:segmented_ring", 2, 2**20)]
    outcome, doc, _ = execute_run(results_root, "openmpi", cells)
    assert outcome == "complete"
    small, large = doc["cells"]
    assert small["status"] == "failed" and "count >= procs * (65536 // itemsize)" in small["error"]
    assert large["status"] in ("ok", "not-converged")
