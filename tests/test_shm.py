"""The shared-memory allreduce (``harness/algorithms/shm.py``).

Correctness, each one launch of ``tests/mpi_check_algorithms.py shm``: every dtype, op
(user-defined included), count (0, 1, P-1, P+1, odd sizes), two calls per context, counters and
barriers, 64 B pieces (many steps per call), then calls with ranks arriving 0-30 ms apart and
in-place calls; under MPICH at P = 1..9 (P > 2 oversubscribes the 2-core machine: waits must
yield, not spin), under Open MPI and Intel MPI with their own windows. The node-aware
algorithms with ``intra=shm`` on emulated multi-node layouts, SUARA2 with ``row=shm`` (in the
suara family's launches) and the bench end to end.
"""

import json
import os
import re
import sys

import pytest

from conftest import FAST, REPO, harness, run_mpi
from requirements_support import require_mpi

SCRIPT = REPO / "tests" / "mpi_check_algorithms.py"
THROTTLE = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
            "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}


def _launch(library, procs, *args, timeout=480):
    from harness.libraries import get_library

    require_mpi(library)
    lib = get_library(library)
    launcher = [str(lib.prefix / "bin" / "mpiexec")]
    if library == "openmpi":
        launcher.append("--oversubscribe")
    env = {**os.environ, **lib.run_env(), **(THROTTLE if library == "mpich" else {})}
    proc = run_mpi(launcher + ["-n", str(procs), sys.executable, str(SCRIPT), *args],
                   capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert re.search(r"^OK \d+$", proc.stdout, re.MULTILINE), proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("procs", range(1, 10))
def test_shm_mpich(procs):
    _launch("mpich", procs, "shm")


@pytest.mark.parametrize("library,procs", [("openmpi", 4), ("impi", 3)])
def test_shm_other_libraries(library, procs):
    _launch(library, procs, "shm")


def test_node_aware_with_shm_intra_node_steps():
    """NAP and SMP with intra=shm on every emulated layout up to 3 nodes x 3 (NAP's idle
    ranks, SMP's broadcast from the master), counters and barriers, 64 B pieces."""
    _launch("mpich", 6, "node-aware", "3", "3", "shm")


def test_shm_through_the_bench(results_root):
    """``harness run --algorithm shm``: verified, timed, its chunk and sync in the record;
    P = 4 on 2 cores completes too (oversubscribed: the waits give the core away)."""
    import pandas as pd

    for procs, extra in ((2, []), (4, ["--param", "sync=barrier", "--param", "chunk=64KiB"])):
        out = harness("run", "--library", "mpich", "--algorithm", "shm", "--procs", procs,
                      "--size", "1MiB", *extra, *FAST)
        assert out.returncode == 0, out.stdout + out.stderr
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert set(df.status) <= {"ok", "not-converged"}, df[["procs", "status", "error"]]
    rec = {int(r.procs): json.loads(r.record) for r in df.itertuples()}
    assert {k: rec[2][k] for k in ("chunk", "sync")} == {"chunk": 262144, "sync": "flags"}
    assert {k: rec[4][k] for k in ("chunk", "sync")} == {"chunk": 65536, "sync": "barrier"}
    assert rec[4].get("oversubscribed") is True


@pytest.mark.parametrize("params,message", [
    ({"sync": "spin"}, "sync must be one of flags, barrier, got 'spin'"),
    ({"chunk": "lots"}, "chunk must be a size such as 256KiB, got 'lots'"),
    ({"chunk": 8}, "chunk must be between 64B and 1GiB, got 8"),
])
def test_bad_parameters_are_named(params, message):
    from harness.algorithms.shm import parse_params

    with pytest.raises(ValueError, match=re.escape(message)):
        parse_params(params)


def test_bad_parameter_fails_the_cell_with_the_message(results_root):
    out = harness("run", "--library", "mpich", "--algorithm", "shm", "--procs", 2,
                  "--size", "4KiB", "--param", "sync=spin", *FAST)
    import pandas as pd

    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert df.iloc[0]["status"] == "failed", out.stdout + out.stderr
    assert "sync must be one of flags, barrier" in df.iloc[0]["error"]
