"""The simulated platforms of a config (``platforms:``), checked and resolved once: units
parsed, the values a ``calibrate_from`` campaign's fit gives filled in, the platform built
(``harness.simulate.platform.Platform``) and named by its digest.

An experiment that names a platform (``platform: <name>``) is simulated on it: its libraries
become the simulated installations ``<family>@<platform>`` (SMPI's copies of the family's
allreduce logic, ``harness/simulate/natives.py``), and its cells carry the platform's id, so a
simulated cell never shares an id, a run, a BEST or a claim with a measured one
(docs/simulation.md).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, fields

from ..errors import ConfigError
from ..libraries import FAMILIES
from ..simulate import loader
from ..simulate.calibrate import calibrated
from ..simulate.platform import Platform
from ..units import parse_rate, parse_time

TIMES = ("latency", "intra_latency")
RATES = ("bandwidth", "intra_bandwidth")


@dataclass(frozen=True)
class SimulatedPlatform:
    """One platform of the config, resolved: ``platform`` the ``Platform``'s fields,
    ``reduce_rate`` bytes/s charged to the harness's reductions (None: free), ``calibration``
    where calibrated values came from (None: none), ``simulator`` SimGrid's version."""

    name: str
    platform: dict
    reduce_rate: float | None
    calibration: dict | None
    digest: str  # the platform file's (Platform.digest)
    simulator: str = ""

    @property
    def platform_id(self) -> str:
        """12 hex digits naming the platform and its reduction rate: every simulated cell's
        ``platform`` (part of its id)."""
        key = json.dumps([self.digest, self.reduce_rate], sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    def build(self):
        return Platform(**self.platform)

    def slots(self) -> int:
        return int(self.platform["nodes"]) * int(self.platform.get("cores_per_node", 1))

    def nodes_for(self, procs: int) -> int:
        return math.ceil(procs / int(self.platform.get("cores_per_node", 1)))

    def to_dict(self) -> dict:
        return {"name": self.name, "id": self.platform_id, "digest": self.digest,
                "platform": self.platform, "reduce_rate": self.reduce_rate,
                "calibration": self.calibration, "simulator": self.simulator}


def resolve(doc: dict, source: str, results_root) -> dict[str, SimulatedPlatform]:
    """Every platform the enabled experiments of ``doc`` name, resolved; ConfigError naming
    the key for a value that cannot be right, a platform nobody declared, a P that does not
    fit, or SimGrid missing (one line)."""
    declared = doc.get("platforms") or {}
    used = {}
    for name, e in doc["experiments"].items():
        if not e.get("enabled", True) or not e.get("platform"):
            continue
        where = f"experiments.{name}.platform"
        if e["platform"] not in declared:
            raise ConfigError(f"{source}: {where}: {e['platform']!r} is not declared under "
                              f"platforms; expected one of {', '.join(sorted(declared)) or '(none)'}")
        used.setdefault(e["platform"], []).append(name)
    if not used:
        return {}
    missing = loader.available()
    if missing:
        first = next(iter(used.values()))[0]
        raise ConfigError(f"{source}: experiments.{first}.platform: simulating needs SimGrid, "
                          f"which is missing: {missing}")
    out = {}
    for name in used:
        out[name] = _platform(name, declared[name], source, results_root, loader.version())
        for ex in used[name]:
            _fits(doc["experiments"][ex], ex, out[name], source)
    return out


def _platform(name: str, block: dict, source: str, results_root, simulator: str):
    where = f"platforms.{name}"
    given = dict(block)
    calibration = None
    if given.get("calibrate_from"):
        try:
            given, calibration = calibrated(given, results_root)
        except ConfigError as exc:
            raise ConfigError(f"{source}: platforms.{name}: {exc}") from None
    values = {}
    for key in TIMES:
        if key in given:
            values[key] = _parsed(parse_time, given[key], f"{source}: {where}.{key}")
    for key in RATES:
        if key in given:
            values[key] = _parsed(parse_rate, given[key], f"{source}: {where}.{key}")
    reduce_rate = given.get("reduce_rate", "free")
    reduce_rate = None if reduce_rate in (None, "free") else _parsed(
        parse_rate, reduce_rate, f"{source}: {where}.reduce_rate")
    if "nodes" not in given:
        raise ConfigError(f"{source}: {where}.nodes: missing; expected the platform's node count")
    known = {f.name for f in fields(Platform)}
    for key in ("topology", "topo_parameters"):
        if key in given and key not in known:
            if key == "topology" and given[key] == "cluster":
                continue
            raise ConfigError(f"{source}: {where}.{key}: {given[key]!r}: this version simulates "
                              f"the cluster topology only")
        if key in given and key in known:
            values[key] = given[key]
    values.update(nodes=int(given["nodes"]), cores_per_node=int(given.get("cores_per_node", 1)))
    try:
        platform = Platform(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {where}: {exc}") from None
    return SimulatedPlatform(name, platform.to_dict(), reduce_rate, calibration,
                             platform.digest(), f"SimGrid {simulator}")


def _parsed(parse, value, where: str):
    try:
        return parse(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _fits(e: dict, name: str, platform: SimulatedPlatform, source: str) -> None:
    """Every P of a simulated experiment fits its platform; its libraries are families."""
    for i, p in enumerate(e["procs"]):
        if p > platform.slots():
            raise ConfigError(f"{source}: experiments.{name}.procs[{i}]: {p} ranks do not fit on "
                              f"platform {platform.name} ({platform.platform['nodes']} nodes of "
                              f"{platform.platform.get('cores_per_node', 1)} cores)")
    for i, lib in enumerate(e["libraries"]):
        if lib not in FAMILIES:
            raise ConfigError(f"{source}: experiments.{name}.libraries[{i}]: {lib!r}: a simulated "
                              f"experiment names library families ({', '.join(FAMILIES)}), whose "
                              f"allreduce logic SMPI copies")
