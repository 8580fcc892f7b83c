"""Forcing a native allreduce algorithm on one communicator at run time, through the MPI
tool interface (MPI_T control variables) of the loaded libmpi, called with ctypes (mpi4py 4.1
has no MPI_T binding).

What each library does with such a write (found on the local wheels, see docs/models.md):

* MPICH: ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` (an int; the values are the order of the
  names in the variable's description: auto = 0, nb = 1, ...) takes effect on the next
  ``MPI_Allreduce`` on any communicator. Every rank writes the same value. Mechanism
  ``mpit-per-call``: written before each sub-allreduce, the old value put back after.
* Open MPI: ``coll_tuned_allreduce_algorithm`` (an enum: 0 ignore, 1 basic_linear, ...) is
  read when a communicator is created, with ``coll_tuned_use_dynamic_rules`` true. Mechanism
  ``mpit-dup``: write both, ``Dup`` the communicator, restore; the duplicate keeps the
  algorithm for its lifetime, so a call costs nothing extra.
* Intel MPI: no allreduce control variable is exposed (``I_MPI_ADJUST_ALLREDUCE`` is read
  from the environment only), so per-communicator forcing is impossible; a grid whose two
  dimensions need different native algorithms is refused with that reason.
"""

from __future__ import annotations

import ctypes
import os
import re
from functools import lru_cache

from .errors import ForcingError
from .libraries import family_of_version

MPI_T_ERR_INVALID_NAME = 73  # MPICH and Open MPI agree on this value


def loaded_libmpi() -> str | None:
    """The path of the MPI library this process loaded (``libmpi.so.*``, or ``libmpich.so.*``
    as Debian's MPICH names it), from /proc/self/maps; None before MPI is loaded."""
    with open("/proc/self/maps") as fh:
        for line in fh:
            p = line.split()[-1]
            if re.match(r"lib(mpi|mpich)(_\w+)?\.so", os.path.basename(p)) and "mpi4py" not in p:
                return p
    return None


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    """The libmpi mpi4py loaded, with MPI_T initialised (once per process)."""
    from mpi4py import MPI  # noqa: F401  (loads and initialises MPI first)

    path = loaded_libmpi()
    if path is None:
        raise ForcingError("cannot find the loaded libmpi in /proc/self/maps")
    lib = ctypes.CDLL(path)
    provided = ctypes.c_int()
    rc = lib.MPI_T_init_thread(3, ctypes.byref(provided))  # MPI_THREAD_MULTIPLE
    if rc != 0:
        raise ForcingError(f"MPI_T_init_thread failed with error {rc}")
    return lib


class ControlVariable:
    """One MPI_T control variable with no object binding (an int, enum or bool)."""

    def __init__(self, name: str):
        lib = _lib()
        self.name = name
        idx = ctypes.c_int()
        rc = lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(idx))
        if rc != 0:
            raise ForcingError(f"the library has no MPI_T control variable {name!r} (error {rc})")
        self.index = idx.value
        self.handle = ctypes.c_void_p()
        count = ctypes.c_int()
        rc = lib.MPI_T_cvar_handle_alloc(self.index, None, ctypes.byref(self.handle),
                                         ctypes.byref(count))
        if rc != 0 or count.value != 1:
            raise ForcingError(f"MPI_T_cvar_handle_alloc({name}) failed (error {rc}, count "
                               f"{count.value})")
        self._buf = ctypes.c_int()
        self._write = lib.MPI_T_cvar_write
        self._read = lib.MPI_T_cvar_read

    def read(self) -> int:
        self._buf.value = 0
        rc = self._read(self.handle, ctypes.byref(self._buf))
        if rc != 0:
            raise ForcingError(f"MPI_T_cvar_read({self.name}) failed (error {rc})")
        return self._buf.value

    def write(self, value: int) -> None:
        self._buf.value = int(value)
        rc = self._write(self.handle, ctypes.byref(self._buf))
        if rc != 0:
            raise ForcingError(f"MPI_T_cvar_write({self.name}={value}) failed (error {rc})")

    def values(self, known=()) -> dict[str, int]:
        """Name -> value of an enum variable: its MPI_T enum items, else (MPICH) the names
        listed one per line as ``name - text`` in its description, numbered from 0. MPICH 4.0
        joins the description's lines with nothing between them ("...algorithmring - Force
        ring..."): there the names ``known`` are looked for, numbered in order of place."""
        lib = _lib()
        name, desc = ctypes.create_string_buffer(256), ctypes.create_string_buffer(8192)
        nlen, dlen = ctypes.c_int(256), ctypes.c_int(8192)
        verb, bind, scope = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        dtype, enum = ctypes.c_void_p(), ctypes.c_void_p()
        rc = lib.MPI_T_cvar_get_info(self.index, name, ctypes.byref(nlen), ctypes.byref(verb),
                                     ctypes.byref(dtype), ctypes.byref(enum), desc,
                                     ctypes.byref(dlen), ctypes.byref(bind), ctypes.byref(scope))
        if rc != 0:
            raise ForcingError(f"MPI_T_cvar_get_info({self.name}) failed (error {rc})")
        if enum.value:
            num, ename, elen = ctypes.c_int(), ctypes.create_string_buffer(256), ctypes.c_int(256)
            lib.MPI_T_enum_get_info(enum, ctypes.byref(num), ename, ctypes.byref(elen))
            out = {}
            for i in range(num.value):
                v, b, bl = ctypes.c_int(), ctypes.create_string_buffer(256), ctypes.c_int(256)
                lib.MPI_T_enum_get_item(enum, i, ctypes.byref(v), b, ctypes.byref(bl))
                out[b.value.decode()] = v.value
            return out
        text = desc.value.decode(errors="replace")
        if "\n" not in text and known:
            places = {}
            for n in known:
                m = re.search(rf"(?<!_){re.escape(n)}\s+-\s", text)  # not k_<n>
                if m:
                    places[n] = m.start()
            return {n: i for i, n in enumerate(sorted(places, key=places.get))}
        names = re.findall(r"^(\w+)\s+-\s", text, re.M)
        return {n: i for i, n in enumerate(names)}


@lru_cache(maxsize=None)
def cvar(name: str) -> ControlVariable:
    return ControlVariable(name)


MPICH_VAR = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"
OMPI_VAR, OMPI_DYNAMIC = "coll_tuned_allreduce_algorithm", "coll_tuned_use_dynamic_rules"


def running_library() -> str:
    """``mpich``, ``openmpi`` or ``impi``: the library this process runs, from its version
    string (Intel MPI's mentions MPICH too, so it is tested first)."""
    from mpi4py import MPI

    v = MPI.Get_library_version()
    family = family_of_version(v)
    if family is None:
        raise ForcingError(f"unknown MPI library: {v.splitlines()[0]!r}")
    return family


def library_version() -> tuple[str, str]:
    """The running library's version string as (its first line, whitespace collapsed; the
    whole text), without the NUL that Open MPI 4.1 leaves at its end."""
    from mpi4py import MPI

    full = MPI.Get_library_version().replace("\x00", "").strip()
    return " ".join(full.splitlines()[0].split()), full


def launch_forces(native_env: dict) -> bool:
    """True when the launch environment already holds every variable of ``native_env``."""
    return all(os.environ.get(k) == str(v) for k, v in native_env.items())


class Forced:
    """A native allreduce forced to one algorithm on one communicator.

    ``comm`` is the communicator to call (Open MPI: a duplicate made with the algorithm
    written); ``before``/``after`` run around each call (MPICH: write the value, put the old
    one back; else nothing). ``mechanism`` says which way was used, for the record."""

    def __init__(self, comm, mechanism: str, before=None, after=None):
        self.comm, self.mechanism = comm, mechanism
        self.before, self.after = before, after


def force(comm, library: str, native_env: dict) -> Forced:
    """Force on ``comm`` the algorithm that the catalogue entry's launch environment
    ``native_env`` selects (``{"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring", ...}`` or
    ``{"OMPI_MCA_coll_tuned_allreduce_algorithm": "4", ...}``). Collective over ``comm``.
    An empty environment (``native:auto``) forces nothing. ForcingError if the library
    cannot (Intel MPI)."""
    if not native_env:
        return Forced(comm, "none")
    if library == "mpich" and MPICH_VAR in native_env:
        var = cvar(MPICH_VAR)
        names = var.values()
        want = native_env[MPICH_VAR]
        if want not in names:
            raise ForcingError(f"{MPICH_VAR}: {want!r} is not one of {', '.join(names)}")
        value, old = names[want], var.read()
        write = var.write
        return Forced(comm, "mpit-per-call", lambda: write(value), lambda: write(old))
    if library == "openmpi" and f"OMPI_MCA_{OMPI_VAR}" in native_env:
        # every coll_tuned variable of the entry (algorithm, segment size, ...), dynamic rules on
        wanted = {k[len("OMPI_MCA_"):]: int(v) for k, v in native_env.items()
                  if k.startswith("OMPI_MCA_coll_tuned_")}
        wanted[OMPI_DYNAMIC] = 1
        olds = {}
        try:
            for name, value in wanted.items():
                var = cvar(name)
                olds[name] = var.read() & (0xFF if name == OMPI_DYNAMIC else -1)
                var.write(value)
            dup = comm.Dup()
        finally:
            for name, value in olds.items():
                cvar(name).write(value)
        return Forced(dup, "mpit-dup")
    raise ForcingError(f"{library} does not let an allreduce algorithm be forced per "
                       f"communicator at run time (no MPI_T control variable honoured); only "
                       f"the launch environment forces it, for every communicator alike")
