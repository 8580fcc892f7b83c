"""Node layouts: which ranks of a communicator share a node.

A cell's layout is an algorithm parameter (recorded with the cell):

- ``layout: real`` (the default): the nodes the processes actually run on (on a simulated
  communicator, ``harness/simulate``: its SimGrid host, source ``simulated``). A rank's node is
  its Slurm node name (``SLURMD_NODENAME``, set by ``slurmd`` for every task) when there is
  one, else its shared-memory domain (``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``). Slurm's
  name comes first because several ``slurmd`` may share one machine (the CI's two-node Slurm
  runs both nodes on localhost, where a shared-memory split would see one node).
- ``layout: emulated`` with ``ppn: <k>``: blocks of ``k`` consecutive ranks form a node
  (ranks 0..k-1 are node 0, k..2k-1 node 1, ...), so node-aware algorithms can be studied on
  one machine. ``ppn`` must divide P.

``Layout`` holds, for every rank, its node index and its local rank; nodes are numbered in the
order of their lowest rank, and a node's ranks keep their order in the communicator.
``resolve(comm, params)`` is collective (it gathers the node names); ``emulated(procs, ppn)``
is the pure function behind the emulated case.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import LayoutError

LAYOUTS = ("real", "emulated")


@dataclass(frozen=True)
class Layout:
    kind: str  # "real" or "emulated"
    source: str  # "emulated", "slurm" (SLURMD_NODENAME) or "shared" (MPI_Comm_split_type)
    node_of: tuple  # node index of every rank
    nodes: tuple  # per node, its ranks in communicator order
    names: tuple  # per node, a name ("n1", "emulated-0", "shared-0")

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def ppn(self) -> int | None:
        """Processes per node when every node has the same number, else None."""
        sizes = {len(n) for n in self.nodes}
        return sizes.pop() if len(sizes) == 1 else None

    def local_rank(self, rank: int) -> int:
        return self.nodes[self.node_of[rank]].index(rank)

    def same_node(self, a: int, b: int) -> bool:
        return self.node_of[a] == self.node_of[b]

    def blocked(self) -> bool:
        """True when every node is a block of consecutive ranks (SMP-style rank order)."""
        return all(list(n) == list(range(n[0], n[0] + len(n))) for n in self.nodes)

    def describe(self) -> dict:
        """What is recorded with a cell: kind, source, node count, ranks per node."""
        ppn = self.ppn
        return {"layout": self.kind, "layout_source": self.source, "n_nodes": self.n_nodes,
                "ppn": ppn if ppn is not None else [len(n) for n in self.nodes],
                "node_names": list(self.names) if self.kind == "real" else None}


def parse(params: dict) -> tuple[str, int | None]:
    """(kind, ppn) from an algorithm's parameters; bad values raise ``LayoutError``."""
    kind = str(params.get("layout", "real"))
    if kind not in LAYOUTS:
        raise LayoutError(f"parameter layout: expected one of {', '.join(LAYOUTS)}, got {kind!r}")
    ppn = params.get("ppn")
    if kind == "real":
        if ppn is not None:
            raise LayoutError(f"parameter ppn: only layout=emulated takes ppn (the real layout "
                              f"counts the processes on each node), got ppn={ppn!r} with layout=real")
        return kind, None
    if ppn is None:
        raise LayoutError("parameter ppn: layout=emulated needs ppn (processes per emulated node), "
                          "got none")
    try:
        value = int(ppn)
    except (TypeError, ValueError):
        raise LayoutError(f"parameter ppn: expected an integer >= 1, got {ppn!r}") from None
    if value < 1 or str(value) != str(ppn).strip():
        raise LayoutError(f"parameter ppn: expected an integer >= 1, got {ppn!r}")
    return kind, value


def emulated(procs: int, ppn: int) -> Layout:
    """Blocks of ``ppn`` consecutive ranks; ``ppn`` must divide ``procs``."""
    if ppn < 1 or procs % ppn:
        raise LayoutError(f"parameter ppn: layout=emulated needs a ppn that divides P={procs}, "
                          f"got ppn={ppn}")
    n = procs // ppn
    return Layout("emulated", "emulated", tuple(r // ppn for r in range(procs)),
                  tuple(tuple(range(m * ppn, (m + 1) * ppn)) for m in range(n)),
                  tuple(f"emulated-{m}" for m in range(n)))


def from_keys(keys, kind: str = "real", source: str = "slurm", names=None) -> Layout:
    """The layout in which ranks with equal ``keys[rank]`` share a node; nodes in the order of
    their lowest rank."""
    index: dict = {}
    members: list[list[int]] = []
    for rank, key in enumerate(keys):
        if key not in index:
            index[key] = len(members)
            members.append([])
        members[index[key]].append(rank)
    node_of = tuple(index[k] for k in keys)
    labels = names or [str(k) for k in index]
    return Layout(kind, source, node_of, tuple(tuple(m) for m in members), tuple(labels))


def resolve(comm, params: dict) -> Layout:
    """The layout a cell asks for, on ``comm`` (collective: every rank must call it)."""
    kind, ppn = parse(params)
    if kind == "emulated":
        return emulated(comm.Get_size(), ppn)
    simulated = getattr(comm, "node_names", None)  # a simulated communicator: each rank's host
    if simulated is not None:
        return from_keys(simulated(), "real", "simulated")
    slurm = os.environ.get("SLURMD_NODENAME")
    # every rank must take the same branch: use Slurm's names only if all ranks have one
    names = comm.allgather(slurm)
    if all(names):
        return from_keys(names, "real", "slurm")
    from mpi4py import MPI

    shared = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        leader = shared.allreduce(comm.Get_rank(), op=MPI.MIN)
    finally:
        shared.Free()
    leaders = comm.allgather(leader)
    order = {lead: i for i, lead in enumerate(dict.fromkeys(leaders))}
    return from_keys(leaders, "real", "shared", [f"shared-{order[k]}" for k in order])
