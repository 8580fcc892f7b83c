"""SLT and PRR (``harness/algorithms/pap.py``) under real MPI: correct results under the
arrival times of every delay mode, P = 1..9 under MPICH and P = 5 under Open MPI, every dtype,
op (with a user-defined one) and uneven counts (``tests/mpi_check_algorithms.py pap``, each
P on a communicator of the first P ranks of a launch)."""

import pytest
from mpi_check_support import check_algorithms


@pytest.mark.parametrize("sweep", ["1-6", "7-9"])
def test_pap_algorithms_mpich(sweep):
    """Each P of the sweep on the first P ranks of one launch."""
    check_algorithms("mpich", int(sweep.split("-")[1]), "pap", sweep=sweep)


def test_pap_algorithms_openmpi():
    check_algorithms("openmpi", 5, "pap")
