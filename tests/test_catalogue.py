"""Every catalogue entry of every library runs and is verified correct at small P."""

import pytest

from conftest import execute_run
from harness import libraries
from harness.plan import Cell

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
    statuses = [c["status"] for c in doc["cells"]]
    assert statuses and all(s in ("ok", "not-converged") for s in statuses), doc["cells"]
    forced = libraries.get_library(library).native(algorithm).env
    for name, value in forced.items():
        assert doc["provenance"]["env"][name] == value
