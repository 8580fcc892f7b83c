"""A launch's set-up and bookkeeping around its measurements (every rank runs it; rank 0
writes): MPI initialised at the thread level the run asks for (``init_mpi``), the launch's
provenance (``launch_provenance``: library and versions, hosts, cores, the environment that
steers the libraries, the job script's hash), whether ranks share cores (``oversubscribed``),
and the journal of an earlier attempt of the run (``resume``, ``write_raw``: kept by the store,
``harness.results.journal``); a rank that fails ends the whole launch (``run_or_abort``). Used by
``bench.py`` and the SGD training program ``sgd.py``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import traceback
from pathlib import Path

import numpy as np

from .. import __version__
from ..cells import THREAD_LEVELS
from ..mpit import library_version
from ..results.journal import resume, write_raw  # noqa: F401  (the bench's, from here)

ENV_PREFIXES = ("OMPI_", "MPIR_CVAR_", "I_MPI_", "SLURM_", "MPI4PY_", "PMI_", "HYDRA_", "HARNESS_")


def node_name() -> str:
    """The node this rank runs on: Slurm's name for it when there is one (several slurmd can
    share a host name), else the MPI processor name."""
    from mpi4py import MPI

    return os.environ.get("SLURMD_NODENAME") or MPI.Get_processor_name()


def oversubscribed(comm) -> bool:
    """More ranks on some node than it has cores (collective; the same answer everywhere)."""
    nodes = comm.allgather((node_name(), os.cpu_count() or 1))
    count: dict = {}
    for node, cores in nodes:
        count[node] = count.get(node, 0) + 1
    return any(count[node] > cores for node, cores in nodes)


def launch_provenance(comm, spec: dict) -> dict:
    import mpi4py
    from mpi4py import MPI

    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    node_names = comm.gather(node_name(), root=0)
    # the cores of each rank's node, to tell oversubscribed runs (more ranks than cores)
    cores = comm.gather(os.cpu_count(), root=0)
    if comm.Get_rank() != 0:
        return {}
    script = spec.get("jobscript")
    script_hash = None
    if script and Path(script).is_file():
        script_hash = hashlib.sha256(Path(script).read_bytes()).hexdigest()
    version, full = library_version()
    return {
        "library": spec.get("library"),
        "family": spec.get("family"),
        "library_version": version,
        "library_version_full": full,
        "mpi_version": "%d.%d" % MPI.Get_version(),
        "mpi4py": mpi4py.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "harness": __version__,
        "hosts": hosts,
        "nodes": node_names,
        "thread_level": THREAD_LEVELS[[MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED,
                                       MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE]
                                      .index(MPI.Query_thread())],
        "cores": cores,
        "wtick": MPI.Wtick(),
        "wtime_is_global": bool(comm.Get_attr(MPI.WTIME_IS_GLOBAL)),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
        "jobscript": script,
        "jobscript_sha256": script_hash,
        "git_commit": spec.get("git_commit"),
        "config_hash": spec.get("config_hash"),
    }


def init_mpi(thread_level: str):
    """Initialise MPI at ``thread_level`` (single, funneled, serialized, multiple): mpi4py
    would ask for MULTIPLE, which changes some libraries' costs and algorithm rankings.
    Returns the MPI module; exits 3 when the library provides less than asked."""
    import mpi4py

    mpi4py.rc.thread_level = thread_level
    from mpi4py import MPI

    levels = [MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE]
    wanted = levels[THREAD_LEVELS.index(thread_level)]
    if MPI.Query_thread() < wanted:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"harness.measure.bench: asked for thread level {thread_level}, the library provides "
                  f"{THREAD_LEVELS[levels.index(MPI.Query_thread())]}", file=sys.stderr)
        MPI.COMM_WORLD.Abort(3)
    return MPI


ABORTED = 1  # the MPI_Abort error code of a launch ended by a rank's failure (``run_or_abort``)


def run_or_abort(entry, *args) -> int:
    """``entry(*args)``, this rank's whole program; an exception that escapes it (a job spec
    this rank could not read while a second workflow rewrote it, a journal it could not
    write) prints its traceback and aborts the whole launch (MPI_Abort), starting MPI first
    if the rank failed before it did. Without that, the peers wait for ever for the rank
    that is gone, in a collective or in MPI's start-up (MPICH's launcher kept such a launch
    30 minutes, to its wall time), and the run's ``--timeout`` is all that ends it."""
    try:
        return entry(*args)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        sys.stdout.flush()
        abort_launch(ABORTED)
        raise  # not reached: MPI_Abort ends the process


def abort_launch(code: int) -> None:
    """MPI_Abort of the whole launch with ``code``; MPI started (at thread level single) if
    this rank had not started it; a plain exit when MPI is already finalised."""
    import mpi4py

    if "mpi4py.MPI" not in sys.modules:
        mpi4py.rc.thread_level = "single"
    from mpi4py import MPI

    if not MPI.Is_initialized():
        MPI.Init()
    if MPI.Is_finalized():
        os._exit(code)
    MPI.COMM_WORLD.Abort(code)
