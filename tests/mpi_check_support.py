"""One launch of ``tests/mpi_check_algorithms.py`` under a library's own ``mpiexec``, in this
machine's turn for launches (conftest.run_mpi), for the correctness tests of the harness's
algorithms (test_p2p, test_suara, test_pap_algorithms, test_shm, test_node_aware)."""

from __future__ import annotations

import os
import re
import sys

from conftest import REPO, run_mpi
from requirements_support import require_mpi

SCRIPT = REPO / "tests" / "mpi_check_algorithms.py"
# Correctness only, on an oversubscribed 2-core machine: MPICH's busy polling made P = 8 take
# a minute; throttled polling (usleep after 100 idle polls) about 10 s. This changes when a
# process waits, never what is sent.
# Intel MPI: a waiting rank sleeps (usleep) instead of yielding; beside three busy processes
# its P = 3 check of the classic algorithms took 15 s yielding, 2.4 s sleeping (2.5 s alone).
THROTTLE = {"mpich": {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
                      "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"},
            "impi": {"I_MPI_THREAD_YIELD": "3"}}
OK = re.compile(r"^OK (\d+) at P=(\S+)$", re.MULTILINE)


def check_algorithms(library: str, procs: int, family: str, *args, sweep: str | None = None,
                     timeout: int = 480):
    """Launch ``procs`` ranks of ``library`` checking ``family`` (extra ``args`` as the
    script takes them); ``sweep`` (``CHECK_PROCS``, e.g. ``"1-13"``) checks each of those P
    in this launch. Asserts the launch ended well and checked exactly those P; returns the
    number of checks made."""
    from harness.libraries import get_library

    require_mpi(library)
    lib = get_library(library)
    env = {**os.environ, **lib.run_env(), **THROTTLE.get(library, {})}
    env.pop("CHECK_PROCS", None)
    if sweep:
        env["CHECK_PROCS"] = sweep
    proc = run_mpi(lib.launch_argv(procs) + [sys.executable, str(SCRIPT), family, *map(str, args)],
                   capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    found = OK.search(proc.stdout)
    assert found, proc.stdout + proc.stderr[-3000:]
    assert found.group(2) == ",".join(map(str, expand(sweep) if sweep else [procs])), found.group(0)
    checks = int(found.group(1))
    assert checks > 0
    return checks


def expand(sweep: str) -> list[int]:
    """``"1-3,8"`` -> [1, 2, 3, 8] (the script's own reading of ``CHECK_PROCS``)."""
    out = []
    for part in sweep.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out
