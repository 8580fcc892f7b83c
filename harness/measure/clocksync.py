"""One clock for the ranks of a launch whose hosts' clocks are not one (``LaunchClock``).

Arrivals, finishes, the window a synchronised repetition starts in and every delay mode are
read on a clock all ranks share: seconds after an epoch rank 0 broadcasts. On one host that
is the host's real-time clock. Across hosts, unless the library says ``MPI_WTIME_IS_GLOBAL``,
each host's clock is only as close to the others as NTP left it, so rank 0's clock is
estimated on every rank, as Hunold & Carpen-Amarie's HCA does (ReproMPI, "MPI benchmarking
revisited", TPDS 2016):

- **a linear model per pair**: a client rank and a server rank exchange ``ROUNDS`` ping-pongs
  in each of ``BATCHES`` batches spread over ``SPAN`` seconds; in a batch the exchange with the
  shortest round trip gives the server's clock minus the client's at the client's midpoint
  time; a least-squares line through the batches gives the offset and the drift, once they
  span ``MIN_SPAN`` (before, the median offset and no drift);
- **hierarchically**: in round i of ceil(log2 P) rounds, each rank r < 2^i, which already
  estimates rank 0's clock, serves that estimate to rank r + 2^i: P ranks learn rank 0's
  clock in log2 P rounds instead of P - 1 exchanges with rank 0;
- **refreshed per cell**: each cell of the launch adds a batch, and the line is refitted
  through all of them, so the drift is measured over seconds, not over the first batches'
  milliseconds.

The launch measures what is left at its end (``finish``): each rank's synchronised clock
against rank 0's in fresh ping-pongs; the largest gap is the launch's residual error, in
its run document beside the half round trip each gap was read over (``shown_error``: what
is beyond doubt) (``clock``) with the method, the model of every rank and how long it took.

``HARNESS_CLOCK_SKEW`` (a test hook, ``rank:offset[:drift],...``, seconds and seconds per
second) adds a known offset and drift to the named ranks' host clocks and makes the launch
synchronise as if its ranks were on hosts of their own: the tests show the window's start and
the arrivals land within the residual the launch reports.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from .launch import node_name

SKEW = "HARNESS_CLOCK_SKEW"
ROUNDS, BATCHES, SPAN = 12, 5, 0.05
MIN_SPAN = 1.0  # seconds the batches must span before a drift is fitted
TAG = 7_301


def injected_skew(rank: int, text: str | None = None) -> tuple[float, float]:
    """(offset, drift) ``HARNESS_CLOCK_SKEW`` gives ``rank`` ((0, 0) when it names none);
    ValueError naming the entry it cannot read."""
    text = os.environ.get(SKEW, "") if text is None else text
    for entry in filter(None, (e.strip() for e in text.split(","))):
        parts = entry.split(":")
        try:
            r, offset, drift = int(parts[0]), float(parts[1]), float(parts[2] if len(parts) > 2 else 0)
        except (ValueError, IndexError):
            raise ValueError(f"{SKEW}: {entry!r} is not rank:offset[:drift] (seconds, seconds "
                             f"per second)") from None
        if r == rank:
            return offset, drift
    return 0.0, 0.0


def fit(samples, min_span: float = MIN_SPAN) -> tuple[float, float]:
    """(slope, intercept) of the line through (client time, server minus client[, round
    trip]) samples: the server's clock is ``(1 + slope) * t + intercept`` at client time
    ``t``. A sample is off by at most half its round trip, so with round trips each weighs by
    the inverse. Samples less than ``min_span`` seconds apart cannot tell a drift from their
    noise (tens of microseconds over milliseconds would be a drift of 1e-3), nor can a slope
    within three standard errors of zero (a loaded host's round trips of milliseconds over a
    few seconds): the median offset, no drift."""
    t, d = np.asarray([s[0] for s in samples]), np.asarray([s[1] for s in samples])
    if len(t) < 3 or np.ptp(t) < min_span:
        return 0.0, float(np.median(d))
    if all(len(s) > 2 for s in samples):
        sigma = np.maximum([s[2] / 2 for s in samples], 1e-7)
        (slope, intercept), cov = np.polyfit(t - t[0], d, 1, w=1 / sigma, cov="unscaled")
    else:
        (slope, intercept), cov = np.polyfit(t - t[0], d, 1, cov=True) if len(t) > 3 else (
            np.polyfit(t - t[0], d, 1), np.zeros((2, 2)))
    if abs(slope) < 3 * math.sqrt(max(cov[0, 0], 0.0)):
        return 0.0, float(np.median(d))
    return float(slope), float(intercept - slope * t[0])


class LaunchClock:
    """The launch's common clock; ``now()`` is this rank's estimate of rank 0's host clock."""

    def __init__(self, comm):

        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        skew = injected_skew(self.rank)
        t0 = time.time()
        if skew == (0.0, 0.0):
            self.host = time.time
        else:
            off, drift = skew
            self.host = lambda: (lambda t: t + off + drift * (t - t0))(time.time())
        nodes = comm.allgather(node_name())
        skewed = bool(os.environ.get(SKEW, "").strip())
        self.synchronised = len(set(nodes)) > 1 or skewed
        self.model = (0.0, 0.0)
        self.samples: list[tuple[float, float]] = []
        self.batches = 0
        self.record: dict = {"method": "host clock (one host)"}
        if self.synchronised:
            began = time.monotonic()
            self.refresh(comm, BATCHES)
            self.record = {"method": "hca", "hosts": len(set(nodes)), "injected": skewed,
                           "rounds": max(1, math.ceil(math.log2(self.size))),
                           "pingpongs_per_batch": ROUNDS, "batches": 0, "seconds": 0.0}
            self.record["seconds"] = time.monotonic() - began
            self.record["batches"] = self.batches

    def now(self) -> float:
        t = self.host()
        return t + self.model[0] * t + self.model[1]

    def refresh(self, comm, batches: int = 1) -> None:
        """Collective: ``batches`` more batches of ping-pongs down the tree, and the line
        refitted through every batch so far (drift is told apart from noise by batches
        seconds apart: each cell of the launch adds one). Nothing when not synchronised."""
        if not self.synchronised:
            return
        began = time.monotonic()
        self.batches += batches
        step = 1
        while step < self.size:
            if self.rank < step and self.rank + step < self.size:
                self._serve(comm, self.rank + step, self.now, batches)
            elif step <= self.rank < 2 * step:
                self.samples += self._ask(comm, self.rank - step, self.host, batches)
                self.model = fit(self.samples)
            step *= 2
        if "seconds" in self.record:
            self.record["seconds"] += time.monotonic() - began
            self.record["batches"] = self.batches

    def _serve(self, comm, client: int, clock, batches: int):
        buf = np.zeros(1)
        for _ in range(batches * ROUNDS):
            comm.Recv(buf, source=client, tag=TAG)
            buf[0] = clock()
            comm.Send(buf, dest=client, tag=TAG)

    def _ask(self, comm, server: int, clock, batches: int) -> list[tuple[float, float, float]]:
        """(client midpoint, server - client, round trip) of the shortest round trip of each
        batch."""
        buf, out = np.zeros(1), []
        for b in range(batches):
            best = None
            for _ in range(ROUNDS):
                t1 = clock()
                comm.Send(buf, dest=server, tag=TAG)
                comm.Recv(buf, source=server, tag=TAG)
                t2 = clock()
                if best is None or t2 - t1 < best[2]:
                    best = ((t1 + t2) / 2, buf[0] - (t1 + t2) / 2, t2 - t1)
            out.append(best)
            if b < batches - 1:
                time.sleep(SPAN / max(1, batches - 1))
        return out

    def finish(self, comm) -> dict:
        """Collective: every rank's synchronised clock against rank 0's in ``BATCHES`` fresh
        batches of ping-pongs, one rank after another, the shortest round trip kept; on rank 0
        the record with ``residual`` (largest gap, seconds), ``residuals`` per rank and the
        ``half_round_trips`` that bound how well each gap is known (a gap of 5 ms read over a
        12 ms round trip may be none), and every rank's model."""
        if not self.synchronised:
            return self.record
        gaps, halves = [0.0], [0.0]
        for r in range(1, self.size):
            if self.rank == 0:
                self._serve(comm, r, self.now, BATCHES)
                gap, half = comm.recv(source=r, tag=TAG + 2)
                gaps.append(gap)
                halves.append(half)
            elif self.rank == r:
                _, gap, rtt = min(self._ask(comm, 0, self.now, BATCHES), key=lambda s: s[2])
                comm.send((gap, rtt / 2), dest=0, tag=TAG + 2)
        models = comm.gather(self.model, root=0)
        if self.rank == 0:
            self.record.update(residual=float(max(abs(g) for g in gaps)),
                               residuals=[float(g) for g in gaps],
                               half_round_trips=[float(h) for h in halves],
                               drifts=[m[0] for m in models],
                               offsets_now=[m[0] * time.time() + m[1] for m in models])
        return self.record


def shown_error(record: dict) -> float:
    """The clock error a launch's record shows beyond doubt: the largest gap less the half
    round trip it was read over (0 when every gap is within its own uncertainty)."""
    gaps = record.get("residuals") or []
    halves = record.get("half_round_trips") or [0.0] * len(gaps)
    return max([abs(g) - h for g, h in zip(gaps, halves)] + [0.0])
