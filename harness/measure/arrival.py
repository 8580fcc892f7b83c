"""Arrival-time knowledge for the PAP algorithms and the PAP benchmark's compute phase
(Proficz 2018, Sect. 3 and Fig. 9).

Cell parameters (``params:`` in the config, ``--param`` on the command line):

- ``compute``: a time (the paper's 100 ms). When set, the cell runs the PAP benchmark's
  compute phase (Fig. 9 line 3): every rank computes ``max_delay + compute`` plus its own
  delay, calling ``edge(f)`` after the fraction ``f`` of it. The base grows with the max
  delay so that even the latest rank reaches its edge (at ``f * (2 max_delay + compute)``)
  ``compute / 2`` before the earliest rank arrives (at ``max_delay + compute``): time for
  the monitor's exchange. Without it the base is the ``base_compute`` setting.
- ``edge``: the fraction ``f`` (default 0.5, as the paper's benchmark).
- ``knowledge``: what an algorithm that reads arrival times (``fn.uses_arrival``, SLT and
  PRR) is handed in ``ctx.scratch["arrival"]`` before each call, outside the timed region:

  * ``oracle`` (default for those algorithms): the arrivals the harness planned, base + the
    injected delays, exact and bit-identical on every rank (recorded as start of the
    compute phase + base + delay, on the clock of the measured arrivals);
  * ``online``: the paper's scheme. A monitor thread per rank (``Monitor``) is told when the
    compute phase begins and, by ``edge(f)``, how far it has got; it estimates its rank's
    arrival as ``begin + (t_edge - begin) / f`` and exchanges the estimates with every rank
    (``Allgather`` on its own duplicate of the communicator) while the main thread is still
    computing, so they are known when the allreduce starts. This needs
    ``MPI_THREAD_MULTIPLE`` (mpi4py's default request), checked when the monitor starts;
  * ``none``: nothing; SLT and PRR then run in rank order with no pre-steps.

  Other algorithms take no arrival times; giving them a ``knowledge`` is an error.

Times are on the bench's common clock (seconds after an epoch rank 0 broadcasts), the clock
the measured arrivals are stored on, so ``estimate - measured arrival`` is the estimation
error the bench records per rank and repetition.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from ..units import parse_time

KNOWLEDGE = ("none", "oracle", "online")
DEFAULT_EDGE = 0.5
READY_TIMEOUT = 600.0  # seconds the main thread waits for the estimates before giving up


@dataclass(frozen=True)
class PapPhase:
    """How a cell's compute phase and arrival knowledge run (see the module doc)."""

    knowledge: str  # none, oracle or online
    base: float  # seconds every rank computes besides its delay
    edge: float  # fraction of the compute phase at which edge() is called
    compute: float | None  # the ``compute`` parameter, None when the base is the setting


def pap_phase(params: dict, max_delay: float, base_setting: float, uses_arrival: bool,
              algorithm: str) -> PapPhase | None:
    """The cell's PAP compute phase, or None for a cell that has none (no ``compute``,
    ``edge`` or ``knowledge`` parameter and an algorithm that reads no arrival times: such a
    cell is measured exactly as before). ValueError naming the parameter on bad input."""
    keys = {"compute", "edge", "knowledge"} & set(params)
    if not keys and not uses_arrival:
        return None
    knowledge = params.get("knowledge", "oracle" if uses_arrival else "none")
    if knowledge not in KNOWLEDGE:
        raise ValueError(f"parameter knowledge: expected one of {', '.join(KNOWLEDGE)}, got "
                         f"{knowledge!r}")
    if knowledge != "none" and not uses_arrival:
        raise ValueError(f"parameter knowledge={knowledge}: {algorithm} reads no arrival times "
                         f"(slt and prr do); leave knowledge out for it")
    compute = None
    if "compute" in params:
        try:
            compute = parse_time(params["compute"])
        except ValueError as exc:
            raise ValueError(f"parameter compute: {exc}") from None
    try:
        edge = float(params.get("edge", DEFAULT_EDGE))
    except (TypeError, ValueError):
        edge = float("nan")
    if not 0 < edge < 1:
        raise ValueError(f"parameter edge: expected a fraction between 0 and 1 (exclusive), "
                         f"got {params.get('edge')!r}")
    base = max_delay + compute if compute is not None else base_setting
    return PapPhase(knowledge=knowledge, base=base, edge=edge, compute=compute)


def estimate(begin: float, t_edge: float, fraction: float) -> float:
    """The rank's arrival as the paper's monitor estimates it at ``edge(fraction)``: the
    compute phase so far, scaled to the whole, from its beginning."""
    return begin + (t_edge - begin) / fraction


class Monitor:
    """The per-rank monitor thread of Sect. 3 (Figs. 3 and 4), one per cell.

    The main thread calls ``begin(t)`` when the compute phase starts, ``edge(f)`` at the
    fraction f of it, and ``estimates()`` when it reaches the allreduce; the thread, woken by
    the edge, estimates this rank's arrival and ``Allgather``s the estimates on its own
    communicator while the main thread computes. ``close()`` ends the thread and frees the
    communicator (collective, like the constructor). With ``poll`` (seconds) the exchange is
    a nonblocking ``Iallgather`` tested every ``poll`` seconds, so the waiting thread yields
    its core instead of busy-polling inside the library (the SGD training's compute shares
    it, ``harness.measure.sgd``)."""

    def __init__(self, comm, clock, poll: float | None = None):
        from mpi4py import MPI

        level = MPI.Query_thread()
        if level < MPI.THREAD_MULTIPLE:
            names = {MPI.THREAD_SINGLE: "SINGLE", MPI.THREAD_FUNNELED: "FUNNELED",
                     MPI.THREAD_SERIALIZED: "SERIALIZED"}
            raise RuntimeError(f"knowledge online needs MPI_THREAD_MULTIPLE; MPI was initialised "
                               f"at MPI_THREAD_{names.get(level, level)}")
        self.comm = comm.Dup()  # the monitor's own communicator: never mixes with the call's
        self.clock = clock
        self.poll = poll
        self.procs = self.comm.Get_size()
        self._mine = np.zeros(1)
        self._all = np.zeros(self.procs)
        self._begin = 0.0
        self._edge = (0.0, DEFAULT_EDGE)
        self._go = threading.Event()
        self._ready = threading.Event()
        self._stop = False
        self.waited = 0  # repetitions in which the main thread had to wait for the estimates
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="pap-monitor", daemon=True)
        self._thread.start()

    def _exchange(self) -> None:
        if self.poll is None:
            self.comm.Allgather(self._mine, self._all)
            return
        req = self.comm.Iallgather(self._mine, self._all)
        while not req.Test():
            time.sleep(self.poll)

    def _run(self):
        while True:
            self._go.wait()
            self._go.clear()
            if self._stop:
                return
            try:
                t_edge, fraction = self._edge
                self._mine[0] = estimate(self._begin, t_edge, fraction)
                self._exchange()
            except BaseException as exc:  # noqa: BLE001  (reported by estimates())
                self.error = exc
            self._ready.set()

    def begin(self, t: float) -> None:
        """The compute phase starts at ``t`` (common clock)."""
        self._ready.clear()
        self._begin = t

    def edge(self, fraction: float) -> None:
        """The main thread has done ``fraction`` of its compute phase."""
        self._edge = (self.clock(), fraction)
        self._go.set()

    def estimates(self) -> np.ndarray:
        """Every rank's estimated arrival (a copy), waiting for the exchange if it is not over."""
        if not self._ready.is_set():
            self.waited += 1
            if not self._ready.wait(READY_TIMEOUT):
                raise RuntimeError(f"arrival monitor: no estimates after {READY_TIMEOUT:g} s")
        if self.error is not None:
            raise RuntimeError(f"arrival monitor failed: {self.error}") from self.error
        return self._all.copy()

    def close(self) -> None:
        self._stop = True
        self._go.set()
        self._thread.join()
        self.comm.Free()
