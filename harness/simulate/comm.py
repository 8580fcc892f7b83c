"""A communicator with the part of mpi4py's API the harness's point-to-point algorithms call,
run by SimGrid: each rank is a SimGrid actor on a host of a platform, each message a SimGrid
communication of its byte count, each local reduction a wait of its bytes over a given rate.

What it offers (``harness/algorithms/p2p.py`` calls nothing else): ``Get_rank``, ``Get_size``,
``Send``, ``Recv``, ``Isend``, ``Irecv``, ``Sendrecv``, ``Barrier``; requests with ``Wait``
(and ``SimRequest.Waitall``); ``SimOp.Reduce_local``. Buffers are numpy arrays (or mpi4py's
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
    """One rank's view of a communicator of ``size`` ranks (``COMM_WORLD`` of the simulation)."""

    def __init__(self, sg, rank: int, size: int, *, eager_limit: int = EAGER_LIMIT,
                 envelope: int = ENVELOPE, barrier=None):
        self._sg, self._rank, self._size = sg, rank, size
        self._eager, self._envelope, self._barrier = eager_limit, envelope, barrier
        self._boxes: dict = {}
        self.counters = Counters()

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

    # -- the rest ------------------------------------------------------------------------------

    def _check_peer(self, peer) -> None:
        if not (isinstance(peer, (int, np.integer)) and 0 <= peer < self._size):
            raise ValueError(f"rank {self._rank}: peer {peer!r} is not a rank of a communicator of "
                             f"{self._size} (ANY_SOURCE and PROC_NULL are not simulated)")

    def _box(self, src: int, dst: int, tag: int):
        key = (src, dst, tag)
        box = self._boxes.get(key)
        if box is None:
            box = self._boxes[key] = self._sg.Mailbox.by_name(f"{src}>{dst}#{tag}")
        return box

    def __getattr__(self, name):
        raise AttributeError(f"the simulated communicator has no {name!r}: it offers the point-to-point "
                             f"subset the classic algorithms use (harness/simulate/comm.py)")


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
