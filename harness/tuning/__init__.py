"""Tuned selection: a campaign's decision table per library, and the files each library
reads natively to follow it.

A decision table maps (process-count range, message-size range) to one of the library's
catalogue algorithms. Where no rule matches, the library keeps its own default selection.
``harness/campaign/tune.py`` builds the table from a campaign's summary; the modules here write it
in each library's format, one module per library (``openmpi``, ``mpich``, ``impi``), each
with ``write(table, lib, out_dir) -> dict`` returning the environment that loads the files it
wrote (absolute paths) and ``check(...)`` helpers where the library needs one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Rule:
    """Run catalogue algorithm ``algorithm`` (name without ``native:``) for calls with
    ``procs_lo <= P <= procs_hi`` and ``size_lo <= count * itemsize < size_hi`` (bytes).
    ``procs_hi`` / ``size_hi`` None: no upper bound."""

    procs_lo: int
    procs_hi: int | None
    size_lo: int
    size_hi: int | None
    algorithm: str

    def matches(self, procs: int, size: int) -> bool:
        return (self.procs_lo <= procs and (self.procs_hi is None or procs <= self.procs_hi)
                and self.size_lo <= size and (self.size_hi is None or size < self.size_hi))


@dataclass(frozen=True)
class Table:
    """One library's decision table: non-overlapping rules, sorted by (procs_lo, size_lo)."""

    library: str
    rules: tuple[Rule, ...] = field(default_factory=tuple)

    def lookup(self, procs: int, size: int) -> str | None:
        """The algorithm the table names for a call, or None (the library's default)."""
        for r in self.rules:
            if r.matches(procs, size):
                return r.algorithm
        return None

    def to_dict(self) -> dict:
        return {"library": self.library, "rules": [asdict(r) for r in self.rules]}

    @classmethod
    def from_dict(cls, doc: dict) -> "Table":
        return cls(doc["library"], tuple(Rule(**r) for r in doc.get("rules", [])))
