"""The classic point-to-point allreduce algorithms (``harness/algorithms/p2p.py``): correctness
under MPICH at P = 1..13 and under Open MPI and Intel MPI at several P <= 8 (their own op
implementations), each P on a communicator of a launch of ``tests/mpi_check_algorithms.py``
(tests/mpi_check_support.py); and the registry entries."""

import pytest
from mpi_check_support import check_algorithms

from harness.algorithms import REGISTRY, register, resolve

NAMES = {"linear", "nonoverlapping", "recursive_doubling", "ring", "segmented_ring",
         "rabenseifner"}


@pytest.mark.parametrize("sweep", ["1-7", "8-13"])
def test_classic_algorithms_mpich(sweep):
    """P = 1..13 (primes and non-powers of two), each P on the first P ranks of a launch."""
    check_algorithms("mpich", int(sweep.split("-")[1]), "classic", sweep=sweep)


def test_classic_algorithms_openmpi():
    check_algorithms("openmpi", 5, "classic")


@pytest.mark.parametrize("family", ["classic", "suara"])
@pytest.mark.parametrize("library,sweep", [("openmpi", "3,8"), ("impi", "3,5,8")])
def test_harness_algorithms_other_libraries(library, family, sweep):
    """The libraries other than MPICH at P <= 8: their own op implementation and, for the
    SUARA family, their own native sub-allreduces."""
    check_algorithms(library, 8, family, sweep=sweep)


def test_registry_has_the_classic_algorithms():
    classic = {name for name, alg in REGISTRY.items() if alg.family == "classic"}
    assert classic == NAMES
    for name in NAMES:
        assert REGISTRY[name].description
        assert resolve(name) is REGISTRY[name].fn


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="ring"):
        register("ring", family="classic")(lambda comm, s, r, op, ctx: None)
    assert REGISTRY["ring"].fn.__module__ == "harness.algorithms.p2p"


def test_unknown_algorithm_lists_valid_names():
    with pytest.raises(KeyError, match=r"unknown algorithm 'no_such_algorithm'; valid: ") as info:
        resolve("no_such_algorithm")
    message = str(info.value)
    assert "no_such_algorithm" in message
    for name in NAMES:
        assert name in message
