"""A communicator with the part of mpi4py's API the harness's point-to-point algorithms call,
run by SimGrid: each rank is a SimGrid actor on a host of a platform, each message a SimGrid
communication of its byte count, each local reduction a wait of its bytes over a given rate.

What it offers: ``Get_rank``, ``Get_size``, ``Send``, ``Recv``, ``Isend``, ``Irecv``,
``Sendrecv``, ``Barrier``; requests with ``Wait`` (and ``SimRequest.Waitall``);
``SimOp.Reduce_local`` (all ``harness/algorithms/p2p.py`` calls). With a ``World``
(``harness.simulate.collectives``, as ``cell.py`` makes it) also what the other families call:
``py2f`` (the communicator's id), ``Split``, ``Split_type(COMM_TYPE_SHARED)`` (the ranks on
one SimGrid host), ``Dup``, ``Free``, the object collectives ``allreduce``, ``allgather``,
``bcast``, ``barrier`` (free, for set-up), the library's collectives ``Allreduce``, ``Reduce``,
``Bcast``, ``Reduce_scatter``, ``Allgatherv`` (simulated point-to-point schedules, see
``collectives.py``), ``MPI`` (the constants: ``collectives.SimMPI``), ``node_names`` (each
rank's host) and ``native_algorithm`` (``native:<name>``). Buffers are numpy arrays (or mpi4py's
``[array, datatype]`` pairs); the data really moves, so the result can be checked exactly as a
measured cell's is.

How a message is timed follows SMPI's point-to-point layer (``smpi_request.cpp``), so that an
algorithm here and SMPI's C version of it take the same simulated time:

* the message is ``nbytes + ENVELOPE`` bytes on the network (SMPI adds 16 for the envelope);
* it moves once both the send and the receive are posted (SimGrid's rendezvous), and one
  mailbox per (source, destination, tag) keeps MPI's order between two ranks;
* a send below ``eager_limit`` bytes (SMPI's ``smpi/send-is-detached-thresh``, 65536) is
  detached: the sender goes on at once, as MPI's eager protocol lets it; a larger one returns
  when the data has arrived;
* a ``Sendrecv`` with oneself is a copy and takes no time (as SMPI's);
* a request's ``Test`` takes ``TEST_SLEEP`` (SMPI's ``smpi/test``), so that polling lets time
  advance.

A reduction charges ``inbuf.nbytes / reduce_rate`` seconds (the measured ``reduce_local``
rate, bytes/s) on the calling rank; ``reduce_rate=None`` makes reductions free, as SMPI's own
collectives are (it times only the application's code between MPI calls).
"""

from __future__ import annotations

import numpy as np

from ..algorithms import registry
from . import collectives

ENVELOPE = 16  # bytes SMPI adds to every message (tag, source, communicator)
EAGER_LIMIT = 65536  # SMPI's default smpi/send-is-detached-thresh
TEST_SLEEP = 1e-4  # seconds each Test takes, SMPI's default smpi/test

UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def _array(buf) -> np.ndarray:
    """The numpy array behind a buffer argument (an array, or mpi4py's [array, datatype])."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    if not isinstance(buf, np.ndarray):
        raise TypeError(f"the simulated communicator takes numpy buffers, not {type(buf).__name__}")
    return buf


class Counters:
    """Messages and bytes one rank sent, reductions it did and their bytes."""

    __slots__ = ("messages", "bytes", "reductions", "reduced_bytes")

    def __init__(self):
        self.messages = self.bytes = self.reductions = self.reduced_bytes = 0

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


class SimRequest:
    """A pending send or receive (mpi4py's ``Request``: ``Wait``, ``Test``, ``Waitall``)."""

    __slots__ = ("_sg", "_comm", "_holder", "_target", "_done")

    def __init__(self, sg=None, comm=None, holder=None, target=None):
        self._sg, self._comm, self._holder, self._target = sg, comm, holder, target
        self._done = comm is None

    def Wait(self, status=None):
        if not self._done:
            self._comm.wait()
            if self._holder is not None:
                _deliver(self._holder.get(), self._target)
            self._done = True
        return True

    def Test(self, status=None) -> bool:
        """As SMPI's ``MPI_Test``: ``TEST_SLEEP`` of simulated time first, so that a rank
        polling a request lets time, and the message, advance."""
        if not self._done:
            self._sg.this_actor.sleep_for(TEST_SLEEP)
            if self._comm.test():
                self.Wait()
        return self._done

    @staticmethod
    def Waitall(requests, statuses=None):
        for r in requests:
            if r is not None:
                r.Wait()
        return True


def _deliver(data: np.ndarray, target: np.ndarray) -> None:
    """Copy a received message into the receive buffer (MPI: a message longer than the
    buffer is an error, a shorter one fills its start)."""
    flat = target.reshape(-1) if target.flags.c_contiguous else None
    if data.nbytes > target.nbytes:
        raise RuntimeError(f"message of {data.nbytes} bytes truncated into a {target.nbytes}-byte buffer")
    if data.dtype == target.dtype and data.size == target.size:
        np.copyto(target, data.reshape(target.shape))
    elif flat is not None:
        flat.view(np.uint8)[:data.nbytes] = data.reshape(-1).view(np.uint8)
    else:
        raise RuntimeError("a partial receive needs a contiguous buffer")


class SimComm:
    """One rank's view of a communicator of ``size`` ranks (``COMM_WORLD`` of the simulation, or
    one made from it by ``Split``)."""

    def __init__(self, sg, rank: int, size: int, *, eager_limit: int = EAGER_LIMIT,
                 envelope: int = ENVELOPE, barrier=None, world=None, group=None,
                 counters: Counters | None = None, space: str | None = None):
        self._sg, self._rank, self._size = sg, rank, size
        self._eager, self._envelope = eager_limit, envelope
        self._world = world
        self._group = group if group is not None else (world.world if world is not None else None)
        self._barrier = self._group.barrier if self._group is not None else barrier
        self._space = space if space is not None else (str(self._group.cid) if self._group else "")
        self._boxes: dict = {}
        self._seq = 0  # exchanges made on this communicator (every rank in the same order)
        self._twin = None  # the collective twin: same ranks, mailboxes of their own
        self._coll_ctx = None
        self.counters = counters if counters is not None else Counters()
        if world is not None:
            self.MPI = world.mpi

    # -- mpi4py's Comm -------------------------------------------------------------------------

    def Get_rank(self) -> int:
        return self._rank

    def Get_size(self) -> int:
        return self._size

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self.Isend(buf, dest, tag).Wait()

    def Isend(self, buf, dest: int, tag: int = 0) -> SimRequest:
        data = _array(buf)
        self._check_peer(dest)
        self.counters.messages += 1
        self.counters.bytes += data.nbytes
        payload = np.array(data, copy=True)  # MPI lets the caller reuse the buffer afterwards
        comm = self._box(self._rank, dest, tag).put_init(payload, data.nbytes + self._envelope)
        if data.nbytes < self._eager:
            comm.detach()
            return SimRequest()
        comm.start()
        return SimRequest(self._sg, comm)

    def Recv(self, buf, source: int, tag: int = 0, status=None) -> None:
        self.Irecv(buf, source, tag).Wait()

    def Irecv(self, buf, source: int, tag: int = 0) -> SimRequest:
        target = _array(buf)
        self._check_peer(source)
        comm, holder = self._box(source, self._rank, tag).get_async()
        return SimRequest(self._sg, comm, holder, target)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = 0,
                 recvtag: int = 0, status=None) -> None:
        if recvbuf is None:
            raise TypeError("Sendrecv needs a receive buffer")
        if dest == self._rank and source == self._rank:  # SMPI: a copy, no simulated time
            _deliver(np.array(_array(sendbuf), copy=True), _array(recvbuf))
            return
        recv = self.Irecv(recvbuf, source, recvtag)
        send = self.Isend(sendbuf, dest, sendtag)
        send.Wait()
        recv.Wait()

    def Barrier(self) -> None:
        """All ranks leave at the moment the last one arrives (no network time)."""
        if self._barrier is None:
            raise RuntimeError("this simulated communicator has no barrier")
        self._barrier.wait()

    # -- communicators and set-up (free: no simulated time) -------------------------------------

    def py2f(self) -> int:
        """The communicator's id: the same on its ranks, another for every other communicator."""
        return self._need().cid

    def node_names(self) -> list[str]:
        """Each rank's SimGrid host (``harness.layout``: the node of a rank)."""
        group = self._need()
        return [self._world.hosts[w] for w in group.ranks]

    def Split(self, color: int = 0, key: int = 0):
        group = self._need()
        new, rank = collectives.split(self._world, group, self._next(), self._rank, color, key)
        if new is None:
            return self.MPI.COMM_NULL
        return SimComm(self._sg, rank, len(new.ranks), eager_limit=self._eager,
                       envelope=self._envelope, world=self._world, group=new, counters=self.counters)

    def Split_type(self, split_type, key: int = 0, info=None):
        if split_type is not self.MPI.COMM_TYPE_SHARED:
            raise ValueError(f"the simulated communicator splits by COMM_TYPE_SHARED only, not {split_type!r}")
        hosts = self.node_names()
        return self.Split(hosts.index(hosts[self._rank]), key)

    def Dup(self):
        return self.Split(0, self._rank)

    def Free(self) -> None:
        pass

    def allgather(self, obj) -> list:
        return self._need().exchange(self._next(), self._rank, obj)

    def allreduce(self, obj, op=None):
        return collectives.reduce_objects(self.allgather(obj), op)

    def bcast(self, obj, root: int = 0):
        return self.allgather(obj)[root]

    def barrier(self) -> None:
        self.Barrier()

    # -- the library's collectives (simulated schedules: collectives.py) -----------------------

    def native_algorithm(self, name: str):
        """The allreduce ``native:<name>`` runs here: the harness's algorithm of that name."""
        return registry.REGISTRY[collectives.forced(name)].fn

    def Allreduce(self, sendbuf, recvbuf, op) -> None:
        recv = _array(recvbuf)
        send = self._source(sendbuf, recv)
        twin, ctx = self._collective()
        name = collectives.native_name(recv.nbytes, recv.size, self._size, self._world.native)
        collectives.allreduce(twin, send, recv, op, ctx, name)

    def Reduce(self, sendbuf, recvbuf, op, root: int = 0) -> None:
        recv = _array(recvbuf) if recvbuf is not None else None
        send = self._source(sendbuf, recv)
        twin, ctx = self._collective()
        acc = collectives.scratch(ctx, "reduce.acc", send.size, send.dtype)
        tmp = collectives.scratch(ctx, "reduce.tmp", send.size, send.dtype)
        collectives.reduce(twin, send.reshape(-1), recv, op, root, tmp, acc)

    def Bcast(self, buf, root: int = 0) -> None:
        collectives.bcast(self._collective()[0], _array(buf), root)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts, op) -> None:
        recv = _array(recvbuf)
        counts = [int(c) for c in recvcounts]
        send = _array(sendbuf) if sendbuf is not self._mpi().IN_PLACE else recv
        twin, ctx = self._collective()
        full = collectives.scratch(ctx, "rs.full", sum(counts), send.dtype)
        inbufs = tuple(collectives.scratch(ctx, f"rs.in{i}", max(counts), send.dtype) for i in (0, 1))
        collectives.reduce_scatter(twin, send.reshape(-1), recv.reshape(-1), counts, op, full, inbufs)

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        if not (isinstance(recvbuf, (list, tuple)) and len(recvbuf) >= 3):
            raise TypeError("the simulated Allgatherv takes [buffer, counts, displacements, datatype]")
        buf, counts, displs = _array(recvbuf[0]).reshape(-1), list(recvbuf[1]), list(recvbuf[2])
        counts, displs = [int(c) for c in counts], [int(d) for d in displs]
        if sendbuf is not self._mpi().IN_PLACE:
            own = _array(sendbuf).reshape(-1)
            lo = displs[self._rank]
            np.copyto(buf[lo:lo + counts[self._rank]], own[:counts[self._rank]])
        collectives.allgatherv(self._collective()[0], buf, counts, displs)

    # -- the rest ------------------------------------------------------------------------------

    def _need(self):
        if self._group is None:
            raise AttributeError("this simulated communicator has no World (harness.simulate.collectives): "
                                 "only the point-to-point subset")
        return self._group

    def _mpi(self):
        self._need()
        return self._world.mpi

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _source(self, sendbuf, recv):
        """The send operand of a reduction: ``IN_PLACE`` or a buffer that overlaps the receive
        buffer is copied first (the schedules write the receive buffer as they go)."""
        if sendbuf is self._mpi().IN_PLACE:
            return np.array(recv, copy=True)
        send = _array(sendbuf)
        if recv is not None and np.may_share_memory(send, recv):
            return np.array(send, copy=True)
        return send

    def _collective(self):
        """(the collective twin, its scratch): the same ranks, mailboxes of their own (MPI's
        collective context), the same counters."""
        if self._twin is None:
            group = self._need()
            self._twin = SimComm(self._sg, self._rank, self._size, eager_limit=self._eager,
                                 envelope=self._envelope, world=self._world, group=group,
                                 counters=self.counters, space=f"{self._space}c")
            self._coll_ctx = registry.Context()
        return self._twin, self._coll_ctx

    def _check_peer(self, peer) -> None:
        if not (isinstance(peer, (int, np.integer)) and 0 <= peer < self._size):
            raise ValueError(f"rank {self._rank}: peer {peer!r} is not a rank of a communicator of "
                             f"{self._size} (ANY_SOURCE and PROC_NULL are not simulated)")

    def _box(self, src: int, dst: int, tag: int):
        key = (src, dst, tag)
        box = self._boxes.get(key)
        if box is None:
            box = self._boxes[key] = self._sg.Mailbox.by_name(f"{self._space}:{src}>{dst}#{tag}")
        return box

    def __getattr__(self, name):
        raise AttributeError(f"the simulated communicator has no {name!r}: it offers point-to-point "
                             f"messages, Split, object collectives and the collectives listed in "
                             f"harness/simulate/comm.py (no windows, no ANY_SOURCE)")


class SimOp:
    """mpi4py's ``Op`` for one of sum, prod, max, min, with ``Reduce_local`` charged as
    simulated compute time: ``inbuf.nbytes / rate`` seconds (``rate=None``: free)."""

    def __init__(self, sg, name: str, rate: float | None, counters: Counters | None = None):
        if name not in UFUNCS:
            raise ValueError(f"unknown op {name!r}; valid: {', '.join(UFUNCS)}")
        if rate is not None and not rate > 0:
            raise ValueError(f"reduce rate must be positive bytes/s or None, not {rate!r}")
        self._sg, self.name, self._ufunc, self._rate = sg, name, UFUNCS[name], rate
        self._counters = counters

    def Reduce_local(self, inbuf, inoutbuf) -> None:
        """``inoutbuf = inbuf op inoutbuf``, as MPI's."""
        a, b = _array(inbuf), _array(inoutbuf)
        self._ufunc(a, b, out=b)
        if self._counters is not None:
            self._counters.reductions += 1
            self._counters.reduced_bytes += a.nbytes
        if self._rate is not None and a.nbytes:
            self._sg.this_actor.sleep_for(a.nbytes / self._rate)

    def __getattr__(self, name):
        raise AttributeError(f"the simulated op has no {name!r} (harness/simulate/comm.py)")
