"""The cache state of a cell's buffers (``buffers``, ``Cell.buffers``).

``reuse`` (the default, as the papers, IMB and OSU measure by default): every call reads the
same send buffer and writes the same receive buffer, so from the second call on both sit in
the caches a training step would not find them in.

``rotate``: the calls cycle through ``slots`` send/receive pairs, enough that the send slots
alone exceed the host's last-level cache (``memory.last_level_cache``), so a slot's lines have been
evicted by the time it comes round again (IMB-MPI1's ``-off_cache`` does the same with one
large buffer). Each slot starts a page of its own, so the hardware prefetcher, which stops at
a page's end, does not fetch the next slot along with this one. Every send slot holds the rank's
contribution and every receive slot is filled with the sentinel right after its result was
checked, ``slots - 1`` calls before it is used again: the check that catches a wrong result
stays, and the fill does not warm the slot for its call.
"""

from __future__ import annotations

import numpy as np

from ..algorithms import resolve
from ..cells import BUFFER_MODES
from ..dnn import workload
from ..memory import PAGE, rotation_slots


def check(algorithm: str, params, buffers: str) -> None:
    """ValueError naming why ``buffers`` cannot apply to a cell of ``algorithm``: rotation
    moves one allreduce's buffers, not a workload's iteration of calls on slices of one buffer
    nor a ping-pong's or local reduction's own body."""
    if buffers not in BUFFER_MODES:
        raise ValueError(f"buffers must be one of {', '.join(BUFFER_MODES)}, got {buffers!r}")
    if buffers != "rotate":
        return
    if workload.is_workload(params):
        raise ValueError("buffers: rotate applies to one allreduce per repetition, not to a "
                         "training iteration's calls (workload)")
    if getattr(resolve(algorithm), "bench", None) is not None:
        raise ValueError(f"buffers: rotate applies to allreduce calls, not to {algorithm}")


def _arena(slots: int, stride: int) -> np.ndarray:
    """``slots`` rows of ``stride`` bytes, the first one page-aligned."""
    raw = np.empty(slots * stride + PAGE, dtype=np.uint8)
    skip = (-raw.ctypes.data) % PAGE
    return raw[skip:skip + slots * stride].reshape(slots, stride)


class Rotation:
    """The slots of a ``rotate`` cell: ``pair(k)`` is the (send, receive) arrays of call
    ``k`` (modulo ``slots``), ``refill(k)`` puts the sentinel back into its receive slot."""

    def __init__(self, send: np.ndarray, bad, llc: int):
        self.dtype, self.count, nbytes = send.dtype, send.size, send.nbytes
        self.slots, self.stride = rotation_slots(nbytes, llc)
        self.bad = bad
        self._send, self._recv = _arena(self.slots, self.stride), _arena(self.slots, self.stride)
        if nbytes:
            self._send[:, :nbytes] = send.view(np.uint8)
            self._recv[:, :nbytes].view(self.dtype)[:] = bad

    def pair(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        row = k % self.slots
        n = self.count * self.dtype.itemsize
        return (self._send[row, :n].view(self.dtype), self._recv[row, :n].view(self.dtype))

    def refill(self, k: int) -> None:
        self.pair(k)[1].fill(self.bad)

    @property
    def nbytes(self) -> int:
        return 2 * self.slots * self.stride

    def record(self, llc: int, source: str) -> dict:
        """What the run document says about the rotation."""
        return {"slots": self.slots, "stride": self.stride, "bytes": self.nbytes,
                "last_level_cache": llc, "last_level_cache_from": source}
