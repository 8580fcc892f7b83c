"""The shared-memory allreduce (``harness/algorithms/shm.py``).

Correctness, with ``tests/mpi_check_algorithms.py shm`` (several P per launch): every dtype, op
(user-defined included), count (0, 1, P-1, P+1, odd sizes), two calls per context, counters and
barriers, 64 B pieces (many steps per call), then calls with ranks arriving 0-30 ms apart and
in-place calls; under MPICH at P = 1..9 (P > 2 oversubscribes the 2-core machine: waits must
yield, not spin), under Open MPI and Intel MPI with their own windows. The node-aware
algorithms with ``intra=shm`` on emulated multi-node layouts, SUARA2 with ``row=shm`` (in the
suara family's launches) and the bench end to end.
"""

import json
import re

import pytest
from conftest import FAST, harness
from mpi_check_support import check_algorithms


@pytest.mark.parametrize("sweep", ["1-6", "7-9"])
def test_shm_mpich(sweep):
    """Each P of the sweep on the first P ranks of a launch (its own shared-memory window)."""
    check_algorithms("mpich", int(sweep.split("-")[1]), "shm", sweep=sweep)


@pytest.mark.parametrize("library,procs", [("openmpi", 4), ("impi", 3)])
def test_shm_other_libraries(library, procs):
    check_algorithms(library, procs, "shm")


def test_node_aware_with_shm_intra_node_steps():
    """NAP and SMP with intra=shm on every emulated layout up to 3 nodes x 3 (NAP's idle
    ranks, SMP's broadcast from the master), counters and barriers, 64 B pieces."""
    check_algorithms("mpich", 6, "node-aware", 3, 3, "shm")


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
