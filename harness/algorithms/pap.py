"""Allreduce algorithms for imbalanced process arrival patterns (Proficz 2018, Sect. 4):
the sorted linear tree (SLT, Fig. 5) and the pre-reduced ring (PRR, Fig. 7). Family ``pap``.

Both take the ranks' arrival times from ``ctx.scratch["arrival"]``: a sequence of P numbers
(seconds, any common origin, indexed by rank) that every rank holds identically. The bench
puts it there before each call, outside the timed region: the injected delays (knowledge
``oracle``) or the monitor thread's exchanged estimates (knowledge ``online``, see
``harness.measure.arrival``). Without it every rank is taken to arrive at once, and SLT/PRR run as
the plain linear tree / ring in rank order.

New ids: the ranks sorted by arrival time, earliest first, ties by rank (``arrival_order``).
The data are cut into P segments as Open MPI's ring cuts them (``p2p.ring_blocks``: the first
``count % P`` are one element longer; with count < P some are empty and travel as empty
messages, so the schedule is the same for every count).

SLT (``slt``), Fig. 5: a pipeline through the ids 0 -> 1 -> ... -> P-1 -> 0. Reduce loop,
segment by segment: every id but 0 receives the segment from id-1 and reduces it in; every
id sends it on to id+1 (line 6 is outside the ``if``: id 0 starts each segment, and id P-1,
which completes it, sends it back to id 0). Override loop: every id but P-1 receives the
reduced segment (id 0 from P-1, the others from id-1) and ids below P-2 pass it on.

PRR (``prr``), Fig. 7, with the arrival times ``a`` in id order and ``tau`` the time to
transfer and reduce one segment (``prr_plan``):

* lines 1-6, pre-steps: ``k[P-1] = 0``; for i = P-2 .. 0, ``k[i] = k[i+1] + 1`` when
  ``a[P-1] - a[i+1] >= (k[i+1] + 1) * tau``, else ``k[i] = k[i+1]``;
* lines 7-13, start and end processes: ``sp[j]`` is the first id i (scanning up from the
  previous one) with ``i + k[i] >= j``, ``rp[j] = (sp[j] + P - 1) mod P``. Fig. 7 writes the
  scan as one ``if``/``else i := i + 1`` that assigns nothing in the else branch; read as
  "advance i until the condition holds, then sp[j] := i", which is the literal loop whenever
  a single step suffices. (Where two ids share a start segment, one step would name a
  process that never starts segment j and the messages would not match.)
* line 14 and the reduce loop (15-21): id starts at segment ``s = id + k[id]`` and walks the
  segments downwards (``s := s - 1 mod P``), P of them: it receives and reduces unless it is
  the segment's start ``sp``, and sends to id+1 unless it is the segment's end ``rp``. (Line
  19 prints the override loop's condition, ``rp - 1 != id``, which would stop the
  penultimate process of each segment from handing it to the last one; the reduce loop ends
  a segment where it is fully reduced, at ``rp``.)
* override loop (22-27): receive unless ``rp == id``, send to id+1 unless
  ``rp - 1 == id``, as printed. It starts at segment ``s[id+1]`` (``s[0]`` for id P-1), the
  first segment whose reduction ended at this id, so that the order in which id sends
  matches the order in which id+1 receives; with no pre-steps that is id+1, the block Open
  MPI's ring holds after its reduce-scatter. (Starting again at line 14's segment, as the
  printed loop reads, would make every process begin with a blocking receive.)

With all ``k = 0`` PRR is the ring: every process sends P-1 and receives P-1 segments in each
loop. Every message is a whole segment; sends are nonblocking and a segment is never written
while a send of it is pending; receives are blocking, as in the figures.

``tau`` (``ctx.params["tau"]``): seconds, a time such as ``"200us"``, or ``"auto"`` (default):
measured once per cell in ``prepare`` (never timed) as the slowest rank's median time of one
segment ``Sendrecv`` with the ring neighbours plus its reduction. The value and its source
are recorded (``ctx.scratch["record"]``).

mpi4py is not imported here (the registry is imported outside MPI).
"""

from __future__ import annotations

import numpy as np

from ..units import parse_time
from .p2p import cached, mpi_of, ring_blocks, scratch_array, timer_of, trivial_call
from .registry import register

FAMILY = "pap"
TAG_SLT_REDUCE, TAG_SLT_OVERRIDE = 2101, 2102
TAG_PRR_REDUCE, TAG_PRR_OVERRIDE = 2201, 2202
TAG_TAU = 2301
TAU_PROBES = 7  # Sendrecv + reduce repetitions of the tau measurement (median taken)


# ---------------------------------------------------------------------------------------------
# plans: pure functions of the arrival times (unit-tested without MPI)

def arrival_order(arrival, procs: int) -> list[int]:
    """Ranks sorted by arrival time, earliest first, ties by rank: ``order[id] = rank``.
    ``arrival`` None means every rank at once (rank order)."""
    if arrival is None:
        return list(range(procs))
    a = np.asarray(arrival, dtype=float)
    if a.shape != (procs,):
        raise ValueError(f"arrival: expected {procs} arrival times (one per rank), got shape "
                         f"{a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"arrival: expected finite times, got {a.tolist()}")
    return [int(r) for r in np.argsort(a, kind="stable")]


def prestep_counts(a_sorted, tau: float) -> list[int]:
    """Fig. 7 lines 1-6: pre-steps ``k[i]`` of the process with id i, from the arrival times
    in id order (ascending)."""
    p = len(a_sorted)
    k = [0] * p
    for i in range(p - 2, -1, -1):
        if a_sorted[p - 1] - a_sorted[i + 1] >= (k[i + 1] + 1) * tau:
            k[i] = k[i + 1] + 1
        else:
            k[i] = k[i + 1]
    return k


def segment_ends(k) -> tuple[list[int], list[int]]:
    """Fig. 7 lines 7-13: ``sp[j]``, the id where segment j starts (sent without having been
    received), and ``rp[j]``, the id where it is reduced for the last time."""
    p = len(k)
    sp, rp = [0] * p, [0] * p
    i = 0
    for j in range(p):
        while i + k[i] < j:  # the printed "else i := i + 1", repeated until line 9 holds
            i += 1
        sp[j] = i
        rp[j] = (sp[j] + p - 1) % p
    return sp, rp


def prr_plan(arrival, procs: int, tau: float) -> dict:
    """Everything PRR derives from the arrival times: ``order`` (rank of each id), ``k``,
    ``sp``, ``rp`` and ``start`` (line 14: each id's first segment, ``id + k[id]``)."""
    if not tau > 0:
        raise ValueError(f"tau: expected a time > 0, got {tau!r}")
    order = arrival_order(arrival, procs)
    a = [0.0] * procs if arrival is None else [float(arrival[r]) for r in order]
    k = prestep_counts(a, tau)
    sp, rp = segment_ends(k)
    start = [(i + k[i]) % procs for i in range(procs)]
    return {"order": order, "k": k, "sp": sp, "rp": rp, "start": start}


def prr_schedule(plan: dict) -> list[tuple[list, list]]:
    """Per id, the (reduce loop, override loop) steps as lists of (segment, receive?, send?):
    the loops of Fig. 7 lines 15-27 without the data (see the module doc)."""
    k, sp, rp, start = plan["k"], plan["sp"], plan["rp"], plan["start"]
    p = len(k)
    out = []
    for me in range(p):
        si = start[me]
        red = []
        for _ in range(p):
            red.append((si, sp[si] != me, rp[si] != me))
            si = (si + p - 1) % p
        si = start[(me + 1) % p]
        ovr = []
        for _ in range(p):
            ovr.append((si, rp[si] != me, (rp[si] + p - 1) % p != me))
            si = (si + p - 1) % p
        out.append((red, ovr))
    return out


# ---------------------------------------------------------------------------------------------
# tau

def _tau_setting(ctx):
    raw = ctx.params.get("tau", "auto")
    if raw == "auto":
        return None
    try:
        value = parse_time(raw)
    except ValueError as exc:
        raise ValueError(f"prr: parameter tau: {exc} or 'auto'") from None
    if not value > 0:
        raise ValueError(f"prr: parameter tau: expected a time > 0 or 'auto', got {raw!r}")
    return value


def measure_tau(comm, sendbuf, op, ctx) -> float:
    """Seconds to pass one segment to the next rank and reduce it: every rank ``Sendrecv``s a
    segment-sized block around the ring and reduces it, ``TAU_PROBES`` times after one
    untimed round; the largest per-rank median (identical on every rank). On a simulated
    communicator the clock is the simulated one."""
    MPI, clock = mpi_of(comm), timer_of(comm)
    size, rank = comm.Get_size(), comm.Get_rank()
    n = ring_blocks(sendbuf.size, size)[1][0]
    out = np.array(sendbuf[:n], copy=True)
    inb = scratch_array(ctx, "pap.tau.in", n, sendbuf.dtype)
    acc = scratch_array(ctx, "pap.tau.acc", n, sendbuf.dtype)
    right, left = (rank + 1) % size, (rank - 1) % size
    samples = []
    for probe in range(TAU_PROBES + 1):
        comm.Barrier()
        t0 = clock()
        comm.Sendrecv(out, right, TAG_TAU, inb, left, TAG_TAU)
        np.copyto(acc, out)
        op.Reduce_local(inb, acc)
        if probe:
            samples.append(clock() - t0)
    mine = float(np.median(samples))
    return float(comm.allreduce(mine, op=MPI.MAX))


def _tau(comm, sendbuf, op, ctx) -> float:
    key = ("pap.tau", comm.py2f(), sendbuf.size, sendbuf.dtype.str)
    tau = ctx.scratch.get(key)
    if tau is None:
        setting = _tau_setting(ctx)
        tau = setting if setting is not None else measure_tau(comm, sendbuf, op, ctx)
        # a measured tau of 0 (timer resolution) would make every gap a pre-step
        tau = max(tau, 1e-9)
        ctx.scratch[key] = tau
        record = ctx.scratch.setdefault("record", {})
        record.update(tau=tau, tau_source="setting" if setting is not None else "measured")
    return tau


def prepare(comm, sendbuf, recvbuf, op, ctx):
    """Made once per cell, before the warm-up: tau (set or measured) and the segment layout."""
    if recvbuf.size and comm.Get_size() > 1:
        _tau(comm, sendbuf, op, ctx)


# ---------------------------------------------------------------------------------------------
# the algorithms

def _key(arrival):
    return None if arrival is None else tuple(float(x) for x in arrival)


def _latest(ctx, name: str, key, build):
    """``build()`` unless the previous call of this cell had the same ``key`` (the arrival
    times change every repetition, so only the latest plan is kept)."""
    held = ctx.scratch.get(name)
    if held is None or held[0] != key:
        held = ctx.scratch[name] = (key, build())
    return held[1]


def _setup(comm, sendbuf, recvbuf, ctx, name):
    size = comm.Get_size()
    count, dtype = recvbuf.size, recvbuf.dtype
    offs, lens = cached(ctx, ("pap.blocks", count, size), lambda: ring_blocks(count, size))
    tmp = scratch_array(ctx, f"{name}.in", lens[0], dtype)
    segs = cached(ctx, (f"{name}.views", recvbuf.ctypes.data, count, size, dtype.str),
                   lambda: [recvbuf[o:o + n] for o, n in zip(offs, lens)])
    np.copyto(recvbuf, sendbuf)
    return size, lens, tmp, segs


@register("slt", family=FAMILY,
          description="sorted linear tree: pipeline through the ranks in arrival order (PAP Fig. 5)")
def slt(comm, sendbuf, recvbuf, op, ctx):
    """Sorted linear tree (Proficz 2018, Fig. 5); see the module doc."""
    if trivial_call(comm, sendbuf, recvbuf):
        return
    size, lens, tmp, segs = _setup(comm, sendbuf, recvbuf, ctx, "slt")
    arrival = ctx.scratch.get("arrival")
    order = _latest(ctx, "slt.order", (size, _key(arrival)), lambda: arrival_order(arrival, size))
    me = order.index(comm.Get_rank())
    right, left = order[(me + 1) % size], order[(me - 1) % size]
    pending = [None] * size
    for si in range(size):  # reduce loop, lines 1-6
        seg = segs[si]
        if me != 0:
            rd = tmp[:lens[si]]
            comm.Recv(rd, left, TAG_SLT_REDUCE)
            op.Reduce_local(rd, seg)
        pending[si] = comm.Isend(seg, right, TAG_SLT_REDUCE)
    sends = []
    for si in range(size):  # override loop, lines 7-12
        if me != size - 1:
            if pending[si] is not None:  # the segment's reduce-loop send must be done first
                pending[si].Wait()
                pending[si] = None
            # id 0 gets the reduced segment from id P-1's reduce loop (its line 6)
            comm.Recv(segs[si], left, TAG_SLT_REDUCE if me == 0 else TAG_SLT_OVERRIDE)
            if me < size - 2:
                sends.append(comm.Isend(segs[si], right, TAG_SLT_OVERRIDE))
    for r in pending:
        if r is not None:
            r.Wait()
    for r in sends:
        r.Wait()


@register("prr", family=FAMILY,
          description="pre-reduced ring: early ranks pre-reduce segments, ring in arrival order (PAP Fig. 7)")
def prr(comm, sendbuf, recvbuf, op, ctx):
    """Pre-reduced ring (Proficz 2018, Fig. 7); see the module doc."""
    if trivial_call(comm, sendbuf, recvbuf):
        return
    size, lens, tmp, segs = _setup(comm, sendbuf, recvbuf, ctx, "prr")
    tau = _tau(comm, sendbuf, op, ctx)
    arrival = ctx.scratch.get("arrival")
    plan = _latest(ctx, "prr.plan", (size, tau, _key(arrival)),
                   lambda: _prr_steps(arrival, size, tau, comm.Get_rank()))
    left, right, red, ovr = plan
    pending = [None] * size
    for si, recv, send in red:  # reduce loop, lines 15-21
        seg = segs[si]
        if recv:
            rd = tmp[:lens[si]]
            comm.Recv(rd, left, TAG_PRR_REDUCE)
            op.Reduce_local(rd, seg)
        if send:
            pending[si] = comm.Isend(seg, right, TAG_PRR_REDUCE)
    sends = []
    for si, recv, send in ovr:  # override loop, lines 22-27
        seg = segs[si]
        if recv:
            if pending[si] is not None:
                pending[si].Wait()
                pending[si] = None
            comm.Recv(seg, left, TAG_PRR_OVERRIDE)
        if send:
            sends.append(comm.Isend(seg, right, TAG_PRR_OVERRIDE))
    for r in pending:
        if r is not None:
            r.Wait()
    for r in sends:
        r.Wait()


def _prr_steps(arrival, size, tau, rank):
    plan = prr_plan(arrival, size, tau)
    order = plan["order"]
    me = order.index(rank)
    red, ovr = prr_schedule(plan)[me]
    return order[(me - 1) % size], order[(me + 1) % size], red, ovr


prr.prepare = prepare  # SLT needs no tau
# the bench hands these algorithms the ranks' arrival times (ctx.scratch["arrival"])
slt.uses_arrival = True
prr.uses_arrival = True
