"""A simulated cluster as a SimGrid platform file: ``nodes`` hosts of ``cores_per_node`` cores
behind one non-blocking switch.

Every node has its own full-duplex link to the switch (``SPLITDUPLEX``: sending and receiving
do not share bandwidth) of ``bandwidth`` bytes/s and ``latency / 2`` seconds, so a message
between two nodes crosses two links: ``latency`` end to end, ``bandwidth`` unless other
messages share a link. Ranks on one node talk through the node's loopback link
(``intra_latency``, ``intra_bandwidth``; SimGrid does not share a loopback link between
messages). There is no backbone: the switch never limits (a full crossbar).

``topology="fat-tree"`` or ``"dragonfly"`` with SimGrid's ``topo_parameters`` makes the cluster
a fat-tree or a dragonfly instead (every link as above; the node count follows from the
parameters and must equal ``nodes``); the default ``"cluster"`` file is unchanged.

Ranks are placed in blocks, as ``mpiexec`` places them by default: rank r on node
``r // cores_per_node``. The same file and host list serve the simulated communicator
(``harness.simulate.cell``) and SMPI (``harness.simulate.smpi``), so both simulate one machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

from ..fileio import atomic_write_text

PREFIX = "node-"
TOPOLOGIES = ("cluster", "fat-tree", "dragonfly")
_SIMGRID_TOPOLOGY = {"fat-tree": "FAT_TREE", "dragonfly": "DRAGONFLY"}
_EXPECTED = {
    "fat-tree": "'LEVELS;DOWN_1,...,DOWN_L;UP_1,...,UP_L;LINKS_1,...,LINKS_L' (SimGrid's FAT_TREE: "
                "L levels; per level the children of a switch, the parents of a node or switch and "
                "the parallel links to each parent; positive integers), e.g. '2;4,4;1,2;1,2'",
    "dragonfly": "'GROUPS,LINKS;CHASSIS,LINKS;ROUTERS,LINKS;NODES' (SimGrid's DRAGONFLY: groups, "
                 "chassis per group and routers per chassis, each with its number of links, and "
                 "nodes per router; positive integers), e.g. '3,4;4,3;5,1;2'",
}


def _ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",")]
    if any(v < 1 for v in values):
        raise ValueError(text)
    return values


def topology_nodes(topology: str, topo_parameters: str) -> int:
    """The node count a fat-tree's or a dragonfly's parameters make (the product of the
    fat-tree's DOWN counts; GROUPS x CHASSIS x ROUTERS x NODES of a dragonfly). ValueError
    naming the field, the value and what is expected."""
    if topology not in _EXPECTED:
        raise ValueError(f"platform topology: {topology!r} has no topo_parameters; expected one of "
                         f"{', '.join(_EXPECTED)}")
    bad = ValueError(f"platform topo_parameters: {topo_parameters!r} is not a {topology}'s; "
                     f"expected {_EXPECTED[topology]}")
    parts = topo_parameters.strip().split(";")
    try:
        if topology == "fat-tree":
            if len(parts) != 4:
                raise bad
            (levels,), down, up, links = (_ints(x) for x in parts)
            if not len(down) == len(up) == len(links) == levels:
                raise bad
            nodes = 1
            for d in down:
                nodes *= d
            return nodes
        if len(parts) != 4:
            raise bad
        groups, chassis, routers, per_router = (_ints(x) for x in parts)
        if not len(groups) == len(chassis) == len(routers) == 2 or len(per_router) != 1:
            raise bad
        return groups[0] * chassis[0] * routers[0] * per_router[0]
    except ValueError as exc:
        if exc is bad:
            raise
        raise bad from None


def _num(x: float) -> str:
    """A float as SimGrid reads it, exactly (``repr`` round-trips)."""
    return repr(float(x))


@dataclass(frozen=True)
class Platform:
    """One simulated cluster. Times in seconds, bandwidths in bytes per second."""

    nodes: int
    cores_per_node: int = 1
    latency: float = 1e-6  # one-way, node to node (two links of latency / 2)
    bandwidth: float = 12.5e9  # per node link and direction (100 Gbit/s)
    intra_latency: float = 2e-7  # rank to rank on one node
    intra_bandwidth: float = 40e9
    speed: float = 1e9  # flop/s of a core (nothing here computes in flops; SimGrid wants one)
    topology: str = "cluster"  # "cluster" (one non-blocking switch), "fat-tree", "dragonfly"
    topo_parameters: str = ""  # SimGrid's topo_parameters of a fat-tree or a dragonfly

    def __post_init__(self):
        if self.nodes < 1 or self.cores_per_node < 1:
            raise ValueError(f"a platform needs nodes >= 1 and cores_per_node >= 1, "
                             f"not {self.nodes} and {self.cores_per_node}")
        for name in ("latency", "bandwidth", "intra_latency", "intra_bandwidth", "speed"):
            value = getattr(self, name)
            if not value > 0 and not (name.endswith("latency") and value == 0):
                raise ValueError(f"platform {name} must be positive, not {value!r}")

        if self.topology not in TOPOLOGIES:
            raise ValueError(f"platform topology: {self.topology!r} is not one of {', '.join(TOPOLOGIES)}")
        if self.topology == "cluster":
            if self.topo_parameters:
                raise ValueError(f"platform topo_parameters: {self.topo_parameters!r} given for topology "
                                 f"'cluster'; expected '' (only fat-tree and dragonfly take parameters)")
        else:
            expected = topology_nodes(self.topology, self.topo_parameters)
            if self.nodes != expected:
                raise ValueError(f"platform nodes: {self.nodes} does not match the {self.topology}'s "
                                 f"topo_parameters {self.topo_parameters!r}, which make {expected} nodes")

    @property
    def slots(self) -> int:
        return self.nodes * self.cores_per_node

    def hosts(self) -> list[str]:
        return [f"{PREFIX}{i}" for i in range(self.nodes)]

    def rank_hosts(self, procs: int) -> list[str]:
        """The host of each of ``procs`` ranks (block placement)."""
        if not 1 <= procs <= self.slots:
            raise ValueError(f"{procs} ranks do not fit on {self.nodes} nodes of "
                             f"{self.cores_per_node} cores")
        return [f"{PREFIX}{r // self.cores_per_node}" for r in range(procs)]

    def hostfile(self, procs: int) -> str:
        """SMPI's host file: one line per rank, in rank order."""
        return "".join(h + "\n" for h in self.rank_hosts(procs))

    def xml(self) -> str:
        lat = self.latency / 2
        if self.topology == "cluster":
            shape, topo = "a non-blocking\n     switch", ""
        else:
            shape = (f"a {self.topology} ({_SIMGRID_TOPOLOGY[self.topology]} "
                     f"{self.topo_parameters}),\n     every link as below")
            topo = (f'\n           topology="{_SIMGRID_TOPOLOGY[self.topology]}" '
                    f'topo_parameters="{self.topo_parameters}"')
        return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- harness.simulate.platform: {self.nodes} nodes x {self.cores_per_node} cores, {shape}; node to node: latency {_num(self.latency)} s (two links of {_num(lat)} s),
     {_num(self.bandwidth)} B/s per link and direction; within a node (loopback link):
     latency {_num(self.intra_latency)} s, {_num(self.intra_bandwidth)} B/s -->
<platform version="4.1">
  <cluster id="cluster" prefix="{PREFIX}" suffix="" radical="0-{self.nodes - 1}"
           speed="{_num(self.speed)}f" core="{self.cores_per_node}"
           bw="{_num(self.bandwidth)}Bps" lat="{_num(lat)}s" sharing_policy="SPLITDUPLEX"
           loopback_bw="{_num(self.intra_bandwidth)}Bps" loopback_lat="{_num(self.intra_latency)}s"{topo}/>
</platform>
"""

    def digest(self) -> str:
        """12 hex digits of the SHA-256 of the platform file: names the platform in results."""
        return hashlib.sha256(self.xml().encode()).hexdigest()[:12]

    def write(self, directory: str | Path) -> Path:
        """Write ``platform-<digest>.xml`` into ``directory`` (once) and return its path."""
        path = Path(directory) / f"platform-{self.digest()}.xml"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, self.xml())
        return path

    def to_dict(self) -> dict:
        return asdict(self)
