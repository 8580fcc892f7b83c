"""Cells (one point of the experiment matrix) and runs (the cells of one MPI launch), with
stable ids: a hash of the fields, so the same cell gets the same id in every rerun."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np


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

    @property
    def count(self) -> int:
        return self.size // np.dtype(self.dtype).itemsize

    @property
    def cell_id(self) -> str:
        return "c" + _digest(self.key())

    def key(self) -> dict:
        d = asdict(self)
        d["params"] = [list(p) for p in self.params]
        return d

    def to_dict(self) -> dict:
        return {**self.key(), "count": self.count, "cell_id": self.cell_id}

    @classmethod
    def from_dict(cls, d: dict) -> "Cell":
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        fields["params"] = tuple(tuple(p) for p in fields.get("params", ()))
        return cls(**fields)


@dataclass(frozen=True)
class Run:
    """Cells sharing one launch: same library, forcing environment, P and node layout."""

    library: str
    env: tuple  # sorted (name, value) pairs that force the algorithm
    procs: int
    nodes: int
    cells: tuple = field(default_factory=tuple)

    @property
    def run_id(self) -> str:
        return "r" + _digest([self.library, [list(e) for e in self.env], self.procs, self.nodes,
                               sorted(c.cell_id for c in self.cells)])
