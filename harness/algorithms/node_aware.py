"""Node-aware allreduce algorithms (family ``node-aware``): NAP and SMP (Bienz, Olson and
Gropp, "Node-aware improvements to allreduce"; references: ``docs/papers.md``).

Both read the node layout from the cell's parameters (``harness.layout``: ``layout: real``,
the default, or ``layout: emulated`` with ``ppn``) and build their whole communication
schedule once, in ``prepare`` (outside timing): every message of a call is then a
point-to-point message on the cell's communicator between ranks known in advance. The
recursive-doubling baseline of the paper is the harness's ``recursive_doubling``
(``harness/algorithms/p2p.py``).

**SMP** (Sect. II-A, Fig. 4): a binomial-tree reduce of every node's ranks to the node's first
rank (its master), recursive doubling among the masters (Open MPI's fold-in for a node count
that is not a power of two), and a binomial-tree broadcast from the master inside the node.
Works for any layout, also nodes of unequal size.

**NAP** (Sect. III, Algorithm 1): an intra-node allreduce, then ``ceil(log_ppn n)`` inter-node
steps over n nodes of ppn processes, each followed by an intra-node allreduce. For n a power
of ppn, at step i nodes form groups of ``ppn^(i+1)`` consecutive nodes, each made of ppn
subgroups of ``ppn^i`` nodes that already hold the same partial result. The process with local rank r on the node at
position ``pos`` of subgroup s exchanges its data with the process with local rank s on the
node at position ``pos`` of subgroup r; the process with r = s sits idle in the exchange and
contributes its own subgroup's data. The intra-node allreduce then combines the ppn
subgroups' data, so every node holds its group's reduction. Node counts that are not a power
of ppn (Sect. III-A) are grouped from the top (``nap_groups``): the n nodes are cut into
``ceil(n / ppn^(k-1))`` runs of consecutive nodes of nearly equal size, each run the same way,
down to single nodes (k = ceil(log_ppn n) steps, as for the next power of ppn). For n a power
of ppn this is exactly Algorithm 1's grouping. Then:

- *Fig. 8*, a group has fewer than ppn subgroups (e.g. 12 nodes x 4: the first step is the
  regular one, the second has 3 subgroups): processes whose local rank names no subgroup sit
  idle during the exchange and take no part in the intra-node allreduce that follows; they
  receive its result from a participating process on their node.
- *Fig. 9*, the subgroups of a group differ in size (e.g. 10 nodes x 4: first-step groups of
  4, 3 and 3 nodes, "groups of nearly equal size"): a node at a position that a smaller
  subgroup t lacks has no partner for its process with local rank t. That process instead
  receives t's data from an idle process of a node of t (local rank t, or a local rank that
  names no subgroup), one-way: t's nodes get everything from their regular exchanges. This
  is the paper's example (P14 receives data from P34, which is exactly what 10 nodes x 4
  gives) and Fig. 9's caption ("otherwise receives data from the corresponding idle
  process"); the text's wording, extra nodes "send data to the idle process", would move
  data the idle process already has. The nodes lacking a partner are dealt round-robin over
  t's idle processes. Because the runs are balanced, no rank sends more than
  ``ceil(log_ppn n)`` inter-node messages per call for any n <= 64 and ppn <= 8 (checked by
  ``tests/test_node_aware.py``; cutting fixed blocks of ``ppn^i`` nodes with one short block
  at the end instead made one idle process feed up to 15 nodes, e.g. 17 nodes x 2).

Choices where the paper is silent:

- the intra-node allreduces (``MPI_Allreduce`` on ``local_comm`` in Algorithm 1) are the
  harness's recursive doubling over the node's ranks, as in the authors' code, so that every
  message is a counted point-to-point message;
- the reductions never combine a node's data twice (Algorithm 1 read literally reduces the
  received data into ``data`` and then allreduces ``data`` over the node, which counts the
  node's own contribution ppn times for a sum): each process contributes exactly one
  subgroup's data to the intra-node allreduce, so every op works, not just idempotent ones;
- ppn = 1 leaves no idle process to pair with a second node: NAP is then recursive doubling
  between the nodes (``log2 n`` steps), recorded as ``nap_fallback``;
- NAP needs the same number of processes on every node (it addresses ranks as node x local
  rank); a real layout with unequal nodes is an error naming the node sizes.

Scratch buffers are allocated in ``prepare``; a call allocates nothing and every message uses
the buffer interface.

``intra=shm`` (default ``p2p``) runs the intra-node steps on the node's shared-memory window
(``harness.algorithms.shm``; its ``chunk`` and ``sync`` parameters pass through): NAP's first
and per-step intra-node allreduces (each among the node's participating ranks), SMP's
reduction in the node (a shared-memory allreduce) and its broadcast from the master. The
inter-node messages stay the same point-to-point messages.
"""

from __future__ import annotations

import numpy as np

from .. import layout as _layout
from ..verify import aligned_empty
from . import shm as _shm
from .p2p import mpi_of
from .node_aware_schedules import (
    EXCHANGE,
    MASTERS_RD,
    RECV_REDUCE,
    SEND,
    SHM,
    SHM_BCAST,
    TAG_NAP_EXCHANGE,
    TAG_NAP_FEED,
    nap_schedule,
    smp_schedule,
)
from .registry import REGISTRY, Context, register

FAMILY = "node-aware"

# ---------------------------------------------------------------------------------------------
# schedules (pure functions of the layout: no MPI)

# ---------------------------------------------------------------------------------------------
# execution

def _run(comm, ops, buf, tmp, op) -> None:
    for kind, peer, tag in ops:
        if kind >= SHM:
            _run_shm(kind, peer, tag, buf, tmp, op)
        elif kind == EXCHANGE:
            comm.Sendrecv(buf, peer, tag, tmp, peer, tag)
            op.Reduce_local(tmp, buf)
        elif kind == RECV_REDUCE:
            comm.Recv(tmp, peer, tag)
            op.Reduce_local(tmp, buf)
        elif kind == SEND:
            comm.Send(buf, peer, tag)
        else:
            comm.Recv(buf, peer, tag)


def _run_shm(kind, sub, arg, buf, tmp, op) -> None:
    if kind == SHM:
        _shm.node_allreduce(sub, buf, buf, op, arg)  # in place: shm allows it
    elif kind == SHM_BCAST:
        _shm.bcast(sub, buf, 0, arg)
    else:
        fn, ctx = arg
        np.copyto(tmp, buf)
        fn(sub, tmp, buf, op, ctx)


def _buffers(ctx, key, recvbuf):
    bufs = ctx.scratch.get(key)
    if bufs is None:
        bufs = ctx.scratch[key] = (aligned_empty(recvbuf.size, recvbuf.dtype.str),
                                   aligned_empty(recvbuf.size, recvbuf.dtype.str))
    return bufs


def _layout_for(comm, ctx) -> _layout.Layout:
    key = ("layout", comm.py2f(), str(ctx.params.get("layout", "real")), str(ctx.params.get("ppn")))
    lay = ctx.scratch.get(key)
    if lay is None:
        lay = ctx.scratch[key] = _layout.resolve(comm, ctx.params)
    return lay


def _record(ctx, lay, **extra) -> None:
    ctx.scratch["record"] = {**lay.describe(), **extra}


def prepare_nap(comm, sendbuf, recvbuf, op, ctx):
    """Layout, schedule and scratch of NAP, made once per communicator and buffer shape."""
    key = ("nap", comm.py2f(), recvbuf.size, recvbuf.dtype.str)
    plan = ctx.scratch.get(key)
    if plan is None:
        lay = _layout_for(comm, ctx)
        sched = nap_schedule(lay, comm.Get_rank())
        if _intra(ctx) == "shm":
            sched = _nap_shm(comm, lay, sched, ctx)
        plan = ctx.scratch[key] = (sched, *_buffers(ctx, ("nap.buf", key), recvbuf))
        _record(ctx, lay, inter_steps=sched["n_steps"], intra=_intra(ctx),
                **({"nap_fallback": sched["fallback"]} if sched["fallback"] else {}))
    return plan


def prepare_smp(comm, sendbuf, recvbuf, op, ctx):
    """Layout, schedule and scratch of SMP, made once per communicator and buffer shape."""
    key = ("smp", comm.py2f(), recvbuf.size, recvbuf.dtype.str)
    plan = ctx.scratch.get(key)
    if plan is None:
        lay = _layout_for(comm, ctx)
        if _intra(ctx) == "shm":
            ops = _smp_shm(comm, lay, ctx)
        else:
            ops = smp_schedule(lay, comm.Get_rank())
        plan = ctx.scratch[key] = (ops, *_buffers(ctx, ("smp.buf", key), recvbuf))
        _record(ctx, lay, inter_steps=(lay.n_nodes - 1).bit_length(), intra=_intra(ctx))
    return plan


# ---------------------------------------------------------------------------------------------
# intra=shm: the intra-node steps through the node's shared-memory window (harness.algorithms.shm)

INTRA = ("p2p", "shm")


def _intra(ctx) -> str:
    intra = str(ctx.params.get("intra", "p2p"))
    if intra not in INTRA:
        raise ValueError(f"intra must be one of {', '.join(INTRA)}, got {intra!r}")
    return intra


def _shm_params(ctx) -> dict:
    return {k: v for k, v in ctx.params.items() if k in ("chunk", "sync")}


def _node_comm(comm, lay, ctx):
    """The communicator of this rank's node (ranks in local-rank order), split once per
    (communicator, layout): collective over ``comm``."""
    rank = comm.Get_rank()
    key = ("node-comm", comm.py2f(), lay.node_of)
    if key not in ctx.scratch:
        ctx.scratch[key] = comm.Split(lay.node_of[rank], lay.local_rank(rank))
    return ctx.scratch[key]


def _members_comm(node, members: int, ctx):
    """The node's first ``members`` local ranks (None for the others), split once per
    (node communicator, members): collective over the node only, whose ranks share every
    step's pattern."""
    MPI = mpi_of(node)
    if members == node.Get_size():
        return node
    key = ("members-comm", node.py2f(), members)
    if key not in ctx.scratch:
        sub = node.Split(0 if node.Get_rank() < members else MPI.UNDEFINED, node.Get_rank())
        ctx.scratch[key] = None if sub == MPI.COMM_NULL else sub
    return ctx.scratch[key]


def _nap_shm(comm, lay, sched, ctx) -> dict:
    """NAP's schedule with every intra-node allreduce on a shared-memory window: the first
    on the whole node, each step's among the node's participating ranks, followed by the same
    hand-over of the result to the idle ranks. ppn = 1 (no intra-node step) keeps recursive
    doubling between the nodes."""

    if sched["fallback"]:
        return sched
    params = _shm_params(ctx)
    node = _node_comm(comm, lay, ctx)
    out = dict(sched, first=[(SHM, node, params)], steps=[])
    for st in sched["steps"]:
        sub = _members_comm(node, st["members"], ctx)
        if sub is None:  # an idle rank: it receives the result
            local = st["local"]
        else:
            local = [(SHM, sub, params)] + [o for o in st["local"] if o[0] == SEND]
        out["steps"].append(dict(st, local=local))
    for ops in [out["first"]] + [st["local"] for st in out["steps"]]:
        for o in ops:
            if o[0] == SHM:
                _shm.window(o[1], params)  # allocated here, never in a timed call
    return out


def _smp_shm(comm, lay, ctx) -> list:
    """SMP with its intra-node steps on the node's window: a shared-memory allreduce in the
    node (the master needs only its result; the others' copy is the price of one window
    pass), recursive doubling among the masters, a shared-memory broadcast from the master."""
    MPI = mpi_of(comm)
    params = _shm_params(ctx)
    node = _node_comm(comm, lay, ctx)
    _shm.window(node, params)
    ops = [(SHM, node, params)]
    if lay.n_nodes > 1:
        rank = comm.Get_rank()
        master = lay.local_rank(rank) == 0
        key = ("masters-comm", comm.py2f(), lay.node_of)
        if key not in ctx.scratch:
            sub = comm.Split(0 if master else MPI.UNDEFINED, lay.node_of[rank])
            ctx.scratch[key] = None if sub == MPI.COMM_NULL else sub
        if master:
            ops.append((MASTERS_RD, ctx.scratch[key],
                        (REGISTRY["recursive_doubling"].fn, Context())))
        ops.append((SHM_BCAST, node, params))
    return ops




@register("nap", family=FAMILY,
          description="node-aware parallel allreduce (NAP): ceil(log_ppn n) inter-node steps, "
                      "intra-node allreduces between them (params layout, ppn, intra=p2p|shm)")
def nap(comm, sendbuf, recvbuf, op, ctx):
    """NAP allreduce (Bienz et al., Algorithm 1, with Sect. III-A's non-power-of-ppn cases);
    see the module docstring."""
    if recvbuf.size == 0:
        return
    sched, inbuf, tmp = prepare_nap(comm, sendbuf, recvbuf, op, ctx)
    np.copyto(recvbuf, sendbuf)
    _run(comm, sched["first"], recvbuf, tmp, op)
    for st in sched["steps"]:
        reqs = [comm.Isend(recvbuf, dest, TAG_NAP_FEED) for dest in st["feeds"]]
        role = st["role"]
        acc = recvbuf
        if role == "exchange":
            comm.Sendrecv(recvbuf, st["peer"], TAG_NAP_EXCHANGE, inbuf, st["peer"], TAG_NAP_EXCHANGE)
            acc = inbuf
        elif role == "receive":
            comm.Recv(inbuf, st["peer"], TAG_NAP_FEED)
            acc = inbuf
        for req in reqs:
            req.Wait()
        _run(comm, st["local"], acc, tmp, op)
        if acc is not recvbuf:
            np.copyto(recvbuf, acc)


nap.prepare = prepare_nap
nap.node_aware = True  # counted even without a layout parameter (harness.measure.counting)


@register("smp", family=FAMILY,
          description="SMP allreduce: reduce to a master per node, recursive doubling among "
                      "masters, broadcast in the node (params layout, ppn, intra=p2p|shm)")
def smp(comm, sendbuf, recvbuf, op, ctx):
    """SMP allreduce (Bienz et al., Sect. II-A, Fig. 4); see the module docstring."""
    if recvbuf.size == 0:
        return
    ops, _, tmp = prepare_smp(comm, sendbuf, recvbuf, op, ctx)
    np.copyto(recvbuf, sendbuf)
    _run(comm, ops, recvbuf, tmp, op)


smp.prepare = prepare_smp
smp.node_aware = True
