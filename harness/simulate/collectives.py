"""What the simulated communicator (``harness.simulate.comm``) needs beyond point-to-point
messages: the MPI constants the algorithms take from it (``SimMPI``), the communicators'
shared state (``World``, ``Group``: ``Split``, ``Split_type``, the object collectives) and the
library's collectives (``MPI_Allreduce``, ``MPI_Reduce``, ``MPI_Bcast``,
``MPI_Reduce_scatter``, ``MPI_Allgatherv``) as simulated point-to-point schedules.

**Constants.** An algorithm that needs ``MPI.MAX``, ``MPI.IN_PLACE``, ``MPI.UNDEFINED``,
``MPI.COMM_NULL``, ``MPI.COMM_TYPE_SHARED``, ``MPI._typedict`` or ``MPI.Wtime`` takes them from
the communicator (``harness.algorithms.p2p.mpi_of(comm)``): mpi4py's module for a real one,
``comm.MPI`` (a ``SimMPI``) for a simulated one, whose ``Wtime`` is the simulated clock.

**Free set-up.** Communicator creation (``Split``, ``Split_type``, ``Dup``), the object
collectives (``allreduce``, ``allgather``, ``bcast``, ``barrier``) and ``Barrier`` move
Python objects between the actors (they share one process) and take no simulated time: the
algorithms call them in ``prepare`` (outside the timed call), and every rank leaves them
when the last one arrives.

**The library's collectives** (a "native" allreduce, SUARA's ``native`` and ``native:<name>``
sub-allreduces, ``three_step``'s ``Reduce_scatter``/``Allgatherv``, the guideline mock-ups)
are simulated by the harness's own point-to-point algorithms, so their messages are timed as
any other (they travel in a mailbox space of their own, as MPI's collective context):

- ``Allreduce``: ``native="auto"`` follows MPICH's classic default
  (``MPIR_Allreduce_intra_auto``): recursive doubling when the message is at most 2048
  bytes or the count is below the largest power of two <= P, else Rabenseifner's
  reduce-scatter + allgather (``harness/algorithms/p2p.py``: ``recursive_doubling``,
  ``rabenseifner``). ``native=<name>`` forces one of the classic algorithms for every
  native allreduce of the simulation; ``native:<name>`` (SUARA's per-dimension forcing)
  runs the harness algorithm of that Open MPI name (``OPENMPI_NAMES``);
- ``Reduce``: a binomial tree to the root; ``Bcast``: a binomial tree from the root
  (MPICH's short-message algorithms);
- ``Reduce_scatter``: the ring reduce-scatter of ``ring`` (Open MPI's computation loop) on
  the caller's counts; ``Allgatherv``: the ring allgather of ``ring`` on the caller's counts
  and displacements.

Operations must be commutative (sum, prod, max, min: every op the harness uses).
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from ..algorithms import registry
from ..algorithms.p2p import ring_allgather, ring_reduce_scatter
from ..cells import native_name as library_name

NATIVE_AUTO_SHORT = 2048  # bytes: MPICH's MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE
NATIVE_CHOICES = ("auto", "linear", "nonoverlapping", "recursive_doubling", "ring",
                  "segmented_ring", "rabenseifner")
# Open MPI's names of its allreduce algorithms (SUARA's MODEL_TO_OPENMPI) -> the harness's
OPENMPI_NAMES = {"basic_linear": "linear", "linear": "linear", "nonoverlapping": "nonoverlapping",
                 "recursive_doubling": "recursive_doubling", "ring": "ring",
                 "segmented_ring": "segmented_ring", "rabenseifner": "rabenseifner"}
TAG_REDUCE, TAG_BCAST, TAG_RS, TAG_AG = 3101, 3102, 3103, 3104
UNDEFINED = -32766  # mpi4py's MPI.UNDEFINED


class Constant:
    """A named marker (``IN_PLACE``, ``COMM_NULL``, ``COMM_TYPE_SHARED``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"SimMPI.{self.name}"


class ObjectOp:
    """``MPI.SUM`` & co. for the object collectives (``comm.allreduce(x, op=MPI.MAX)``)."""

    FUNCS = {"sum": operator.add, "prod": operator.mul, "max": max, "min": min}

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"SimMPI.{self.name.upper()}"


class TypeDict(dict):
    """``MPI._typedict``: a typecode's datatype; the simulated communicator takes the numpy
    dtype (its buffers carry their own), so the datatype is the dtype."""

    def __missing__(self, char):
        return np.dtype(char)


class SimMPI:
    """The part of ``mpi4py.MPI`` the algorithms read constants from (see the module doc)."""

    IN_PLACE = Constant("IN_PLACE")
    COMM_NULL = Constant("COMM_NULL")
    COMM_TYPE_SHARED = Constant("COMM_TYPE_SHARED")
    UNDEFINED = UNDEFINED
    SUM, PROD, MAX, MIN = (ObjectOp(n) for n in ("sum", "prod", "max", "min"))
    _typedict = TypeDict()

    def __init__(self, sg):
        self._sg = sg

    def Wtime(self) -> float:
        """The simulated clock (seconds)."""
        return self._sg.Engine.clock

    def __getattr__(self, name):
        raise AttributeError(f"the simulated MPI has no {name!r} (harness/simulate/collectives.py)")


def reduce_objects(values, op):
    """The object allreduce of ``values`` (in rank order) with ``op`` (an ``ObjectOp`` or any
    op with a ``name``; default sum)."""
    name = getattr(op, "name", "sum") if op is not None else "sum"
    if name not in ObjectOp.FUNCS:
        raise ValueError(f"the simulated communicator reduces objects with sum, prod, max or min, "
                         f"not {op!r}")
    return functools.reduce(ObjectOp.FUNCS[name], values)


# ---------------------------------------------------------------------------------------------
# communicators' shared state

class Group:
    """The state the ranks of one communicator share: its id, its ranks' world ranks, a
    barrier, and the slots of the free object exchanges."""

    def __init__(self, sg, cid: int, ranks, barrier=None):
        self.cid, self.ranks = cid, tuple(ranks)
        self.barrier = barrier if barrier is not None else sg.Barrier(len(self.ranks))
        self._slots: dict = {}

    def exchange(self, seq: int, rank: int, value) -> list:
        """Every rank's ``value`` of this communicator's exchange number ``seq``, in rank order,
        once every rank has given its own (no simulated time)."""
        n = len(self.ranks)
        slot = self._slots.setdefault(seq, [[None] * n, n])
        slot[0][rank] = value
        self.barrier.wait()
        out = list(slot[0])
        slot[1] -= 1
        if not slot[1]:
            del self._slots[seq]
        return out


class World:
    """Every communicator of one simulation: the hosts of the world ranks, the groups made by
    splits (one per parent, exchange and color, whichever member rank gets there first)."""

    def __init__(self, sg, hosts, barrier=None, native: str = "auto"):
        if native not in NATIVE_CHOICES:
            raise ValueError(f"native allreduce {native!r}: valid: {', '.join(NATIVE_CHOICES)}")
        self.sg, self.hosts, self.native = sg, list(hosts), native
        self.mpi = SimMPI(sg)
        self.world = Group(sg, 0, range(len(self.hosts)), barrier)
        self._made: dict = {}
        self._next = 1

    def group(self, key, ranks) -> Group:
        if key not in self._made:
            self._made[key] = Group(self.sg, self._next, ranks)
            self._next += 1
        return self._made[key]


def split(world: World, group: Group, seq: int, rank: int, color, key):
    """(the new group, this rank's rank in it) of ``MPI_Comm_split`` number ``seq`` of
    ``group``; (None, None) for ``UNDEFINED``."""
    picks = group.exchange(seq, rank, (color, key))
    if color == UNDEFINED:
        return None, None
    members = sorted((k, r) for r, (c, k) in enumerate(picks) if c == color)
    locals_ = [r for _, r in members]
    new = world.group((group.cid, seq, color), [group.ranks[r] for r in locals_])
    return new, locals_.index(rank)


# ---------------------------------------------------------------------------------------------
# the library's collectives, as point-to-point schedules on the collective twin ``comm``

def native_name(nbytes: int, count: int, size: int, choice: str) -> str:
    """The harness algorithm a native ``Allreduce`` runs (``choice`` ``auto``: MPICH's rule)."""
    if choice != "auto":
        return choice
    pof2 = 1 << (size.bit_length() - 1)
    return "recursive_doubling" if nbytes <= NATIVE_AUTO_SHORT or count < pof2 else "rabenseifner"


def forced(name: str) -> str:
    """The harness algorithm of ``native:<name>`` (Open MPI's names of its algorithms)."""
    bare = library_name(name)
    if bare not in OPENMPI_NAMES:
        raise ValueError(f"{name}: the simulated communicator forces only the classic algorithms "
                         f"({', '.join('native:' + n for n in OPENMPI_NAMES)}), each run as the "
                         f"harness's own code of that name")
    return OPENMPI_NAMES[bare]


def allreduce(comm, send, recv, op, ctx, name: str) -> None:
    registry.REGISTRY[name].fn(comm, send, recv, op, ctx)


def reduce(comm, send, recv, op, root: int, tmp, acc) -> None:
    """Binomial tree to ``root``: ``acc`` and ``tmp`` are scratch of the vector's length."""
    size, rank = comm.Get_size(), comm.Get_rank()
    vrank = (rank - root) % size
    np.copyto(acc, send)
    mask = 1
    while mask < size:
        if vrank & mask:
            comm.Send(acc, (vrank - mask + root) % size, TAG_REDUCE)
            break
        child = vrank | mask
        if child < size:
            comm.Recv(tmp, (child + root) % size, TAG_REDUCE)
            op.Reduce_local(tmp, acc)
        mask <<= 1
    if rank == root:
        np.copyto(recv, acc)


def bcast(comm, buf, root: int) -> None:
    """Binomial tree from ``root`` (MPICH's short-message broadcast)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    vrank = (rank - root) % size
    mask = 1
    while mask < size:
        if vrank & mask:
            comm.Recv(buf, (vrank - mask + root) % size, TAG_BCAST)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vrank + mask < size:
            comm.Send(buf, (vrank + mask + root) % size, TAG_BCAST)
        mask >>= 1


def _rotated(counts, displs):
    """Pieces for ``ring``'s loops, which leave rank r with piece r + 1: piece b is block
    b - 1, so that rank r ends (or starts) with its own block r."""
    p = len(counts)
    return [displs[(b - 1) % p] for b in range(p)], [counts[(b - 1) % p] for b in range(p)]


def reduce_scatter(comm, send, recv, counts, op, full, inbufs) -> None:
    """Ring reduce-scatter: rank r gets block r (``counts[r]`` elements) of the reduction.
    ``full``: scratch of the whole vector; ``inbufs``: two of the largest block."""
    size, rank = comm.Get_size(), comm.Get_rank()
    displs = [0]
    for c in counts[:-1]:
        displs.append(displs[-1] + c)
    np.copyto(full, send[:full.size])
    if size > 1:
        offs, lens = _rotated(counts, displs)
        ring_reduce_scatter(comm, full, op, offs, lens, inbufs, rank, size, TAG_RS)
    np.copyto(recv[:counts[rank]], full[displs[rank]:displs[rank] + counts[rank]])


def allgatherv(comm, buf, counts, displs) -> None:
    """Ring allgather in place: every rank's block ``displs[r]:displs[r]+counts[r]`` of
    ``buf`` to every rank."""
    size = comm.Get_size()
    if size > 1:
        offs, lens = _rotated(counts, displs)
        ring_allgather(comm, buf, offs, lens, comm.Get_rank(), size, TAG_AG)


def scratch(ctx: registry.Context, name: str, n: int, dtype) -> np.ndarray:
    key = (name, int(n), np.dtype(dtype).str)
    if key not in ctx.scratch:
        ctx.scratch[key] = np.empty(int(n), dtype)
    return ctx.scratch[key]
