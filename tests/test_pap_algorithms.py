"""SLT and PRR (``harness/algorithms/pap.py``) under real MPI: correct results under the
arrival times of every delay mode, P = 1..9 under MPICH and P = 5 under Open MPI, every dtype,
op (with a user-defined one) and uneven counts (one launch of
``tests/mpi_check_algorithms.py pap`` each)."""

import os
import re
import sys

import pytest

from conftest import REPO, run_mpi
from requirements_support import require_mpi

SCRIPT = REPO / "tests" / "mpi_check_algorithms.py"
MPICH, OPENMPI = REPO / ".mpi" / "mpich", REPO / ".mpi" / "openmpi"
THROTTLE = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
            "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}


def _check(cmd, env_extra):
    env = {**os.environ, **env_extra}
    proc = run_mpi(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert re.search(r"^OK \d+$", proc.stdout, re.MULTILINE), proc.stdout


@pytest.mark.parametrize("procs", [1, 2, 3, 4, 5, 6, 7, 8, 9])
def test_pap_algorithms_mpich(procs):
    require_mpi("mpich")
    _check([str(MPICH / "bin" / "mpiexec"), "-n", str(procs), sys.executable, str(SCRIPT), "pap"],
           {"MPI4PY_LIBMPI": str(MPICH / "lib" / "libmpi.so.12"), **THROTTLE})


def test_pap_algorithms_openmpi():
    require_mpi("openmpi")
    _check([str(OPENMPI / "bin" / "mpiexec"), "--oversubscribe", "-n", "5", sys.executable,
            str(SCRIPT), "pap"],
           {"MPI4PY_LIBMPI": str(OPENMPI / "lib" / "libmpi.so.40"),
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
