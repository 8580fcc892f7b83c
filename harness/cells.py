"""Cells (one point of the experiment matrix) and runs (the cells of one MPI launch), with
stable ids: a hash of the fields, so the same cell gets the same id in every rerun; the MPI
thread levels, timing modes and buffer modes a cell can ask for."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

# A cell's kind, decided here once from its algorithm and parameters (``kind_of``):
#   native    the library's MPI_Allreduce forced to one algorithm, or AUTO (``native:<name>``)
#   selector  the library selecting by a tuning file or its autotuner (never forced, never BEST)
#   harness   an algorithm of the harness (``harness/algorithms/``)
#   workload  a training iteration's gradient communication (its ``params`` name a workload)
#   probe     a ping-pong or local reduction: network parameters, no allreduce time
KINDS = ("native", "selector", "harness", "workload", "probe")
AUTO = "native:auto"  # the library's own choice: no forcing variable set
SELECTORS = ("native:tuned", "native:autotuner")
PROBES = ("pingpong", "reduce_local")
WORKLOAD_KEY = "workload"  # the parameter that makes a cell a workload (harness/dnn/workload.py)


def kind_of(algorithm: str, params=()) -> str:
    """The kind (``KINDS``) of a cell with ``algorithm`` and ``params`` (pairs or a mapping)."""
    algorithm = str(algorithm)
    if dict(params).get(WORKLOAD_KEY):
        return "workload"
    if algorithm in PROBES:
        return "probe"
    if algorithm in SELECTORS:
        return "selector"
    return "native" if algorithm.startswith("native:") else "harness"


def native_name(algorithm: str) -> str:
    """The library's name of a native algorithm (``native:ring`` -> ``ring``); another name as
    it is."""
    algorithm = str(algorithm)
    return algorithm[len("native:"):] if kind_of(algorithm) in ("native", "selector") else algorithm


def _digest(obj, n: int = 12) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:n]


@dataclass(frozen=True)
class Cell:
    library: str
    algorithm: str
    procs: int
    size: int  # bytes
    dtype: str = "float64"
    op: str = "sum"
    delay: str = "none"
    max_delay: float = 0.0  # seconds
    late_rank: int = 1
    nodes: int = 1
    params: tuple = ()  # sorted (key, value) pairs of algorithm parameters
    thread_level: str = "single"  # MPI thread level the launch initialises (THREAD_LEVELS)
    timing: str = "percall"  # how repetitions are timed (TIMING_MODES)
    buffers: str = "reuse"  # the buffers' cache state (BUFFER_MODES, harness/measure/buffers.py)
    platform: str = ""  # a simulated platform's digest (harness/simulate/platform.py); "": measured

    @property
    def simulated(self) -> bool:
        return bool(self.platform)

    @property
    def kind(self) -> str:
        """native, selector, harness, workload or probe (``kind_of``)."""
        return kind_of(self.algorithm, self.params)

    @property
    def count(self) -> int:
        return self.size // np.dtype(self.dtype).itemsize

    @cached_property
    def cell_id(self) -> str:
        return "c" + _digest(self.key())

    def key(self) -> dict:
        d = {f: getattr(self, f) for f in _CELL_FIELDS}
        d["params"] = [list(p) for p in self.params]
        # fields added later stay out of the key at their default, so a cell measured the
        # default way keeps the id it always had
        for f, default in _LATER_DEFAULTS.items():
            if d[f] == default:
                del d[f]
        return d

    def to_dict(self) -> dict:
        return {**self.key(), **{f: getattr(self, f) for f in _LATER_DEFAULTS},
                "count": self.count, "cell_id": self.cell_id}

    @classmethod
    def from_dict(cls, d: dict) -> "Cell":
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        fields["params"] = tuple(tuple(p) for p in fields.get("params", ()))
        return cls(**fields)


_CELL_FIELDS = tuple(Cell.__dataclass_fields__)
_LATER_DEFAULTS = {"thread_level": "single", "timing": "percall", "buffers": "reuse", "platform": ""}

# MPI thread levels in increasing order (MPI_THREAD_SINGLE < FUNNELED < SERIALIZED < MULTIPLE)
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")
TIMING_MODES = ("percall", "imb")
# reuse: every call on the same (warm) send and receive buffers; rotate: each call on the next
# of enough buffer pairs to exceed the last-level cache (harness/measure/buffers.py)
BUFFER_MODES = ("reuse", "rotate")


def needed_thread_level(algorithm: str, params) -> str:
    """The lowest MPI thread level a cell needs: ``multiple`` for the online arrival monitor
    (a thread that calls MPI while the main thread does, harness/measure/arrival.py), else ``single``."""
    return "multiple" if dict(params).get("knowledge") == "online" else "single"


def resolve_thread_level(requested: str, algorithm: str, params) -> str:
    """``auto`` -> the level the cell needs; an explicit level is raised to what the cell
    needs, never lowered below it (ValueError names both)."""
    need = needed_thread_level(algorithm, params)
    if requested == "auto":
        return need
    if THREAD_LEVELS.index(requested) < THREAD_LEVELS.index(need):
        raise ValueError(f"thread level {requested!r} is below {need!r}, which {algorithm} "
                         f"with {dict(params)} needs")
    return requested


@dataclass(frozen=True)
class Run:
    """Cells sharing one launch: same library, forcing environment, P and node layout."""

    library: str
    env: tuple  # sorted (name, value) pairs that force the algorithm
    procs: int
    nodes: int
    cells: tuple = field(default_factory=tuple)
    thread_level: str = "single"  # every cell of a launch shares it
    launch: int = 0  # replicate index: the same cells measured in independent launches
    platform: str = ""  # a simulated platform's digest: the run is a simulation, not a launch

    @cached_property
    def run_id(self) -> str:
        key = [self.library, [list(e) for e in self.env], self.procs, self.nodes,
               sorted(c.cell_id for c in self.cells)]
        if self.thread_level != "single":
            key.append(["thread_level", self.thread_level])
        if self.launch:
            key.append(["launch", self.launch])
        if self.platform:
            key.append(["platform", self.platform])
        return "r" + _digest(key)
