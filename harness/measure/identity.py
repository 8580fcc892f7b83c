"""What an MPI library installation is, read from the library itself: the program the
pre-flight starts (``python -m harness.measure.identity``, alone or under the launcher).

It prints one JSON line (rank 0 alone): the ranks that took part in one allreduce, the
library's version string (``MPI_Get_library_version``), the libmpi file it loaded, the family
that version names, and which of the family's catalogue entries the library can force:

* MPICH (and its derivatives): the names ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` enumerates
  through the MPI tool interface (MPICH 4.0.2: auto, nb, smp, recursive_doubling,
  reduce_scatter_allgather; 5.0.2 adds ring, tree, recexch, ...); the catalogue's other
  ``MPIR_CVAR_*`` forcing variables that the library does not have are listed as missing.
* Open MPI: the enumerators of the MCA variable ``coll_tuned_allreduce_algorithm`` (an MPI_T
  enum), matched to the catalogue's ids.
* Intel MPI: no allreduce control variable is exposed, so the library cannot say; the
  catalogue applies as verified (``algorithms`` is null).
"""

from __future__ import annotations

import json
import sys

from .. import libraries, mpit
from ..errors import ForcingError

MPICH_FORCING = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"
OMPI_FORCING = "OMPI_MCA_coll_tuned_allreduce_algorithm"


def forcible(family: str) -> dict:
    """The catalogue entries of ``family`` this process's library can force, and how that
    was found: ``{"algorithms": [...] or None, "found": {...}, "missing_variables": [...],
    "how": text}``."""
    lib = libraries.catalogue()[family]
    forced = {n: a for n, a in lib.algorithms.items() if a.env and not a.selector}
    if family == "mpich":
        wanted = {a.env[MPICH_FORCING] for a in forced.values() if MPICH_FORCING in a.env}
        names = mpit.cvar(mpit.MPICH_VAR).values(known=sorted(wanted | {"auto"}))
        variables = {k for a in forced.values() for k in a.env if k.startswith("MPIR_CVAR_")}
        missing = sorted(v for v in variables if not _has_cvar(v))
        have = [n for n, a in forced.items() if a.env.get(MPICH_FORCING) in names]
        return {"algorithms": have, "found": names, "missing_variables": missing,
                "how": f"MPI_T control variable {mpit.MPICH_VAR}"}
    if family == "openmpi":
        try:
            items = mpit.cvar(mpit.OMPI_VAR).values()
        except ForcingError as exc:  # coll/tuned not built: nothing can be forced
            return {"algorithms": [], "found": {}, "missing_variables": [],
                    "how": f"MCA variable {mpit.OMPI_VAR}: {exc}"}
        ids = {str(v) for v in items.values()}
        have = [n for n, a in forced.items() if a.env.get(OMPI_FORCING) in ids]
        return {"algorithms": have, "found": items, "missing_variables": [],
                "how": f"MPI_T enum of the MCA variable {mpit.OMPI_VAR}"}
    return {"algorithms": None, "found": {}, "missing_variables": [],
            "how": "not readable: Intel MPI exposes no allreduce control variable "
                   "(I_MPI_ADJUST_ALLREDUCE is read from the environment); the catalogue applies "
                   "as verified for its wheel's version"}


def _has_cvar(name: str) -> bool:
    try:
        mpit.cvar(name)
    except ForcingError:
        return False
    return True


def identify() -> dict:
    """This process's library, as one dict (collective over COMM_WORLD)."""
    from mpi4py import MPI

    ranks = MPI.COMM_WORLD.allreduce(1)
    version, full = mpit.library_version()
    family = libraries.family_of_version(full)
    doc = {"ranks": ranks, "version": version, "libmpi": mpit.loaded_libmpi(),
           "family": family, "mpi4py_abi": _abi(), "python": sys.executable}
    if family:
        doc.update(forcible(family))
    return doc


def _abi() -> str:
    try:
        from mpi4py import _mpiabi

        return _mpiabi._get_mpiabi()
    except Exception:  # an mpi4py without ABI selection
        return ""


def main() -> int:
    from mpi4py import MPI

    doc = identify()
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("harness-identity " + json.dumps(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
