"""How SMPI simulates a family's native algorithms: AUTO by the family's SMPI selector, each
forced algorithm by the SMPI allreduce algorithm of the same schedule, read from the
catalogue's ``smpi:`` block of each family (``harness/data/libraries.yaml``).

``smpi_choice(family, algorithm)`` gives what to pass to ``smpi.smpi_allreduce``
(``selector``, ``algorithm``, ``config``) and what it copies; an algorithm SMPI has no
counterpart of raises ``SmpiUnavailable`` with the catalogue's reason. ``available(family)``
lists the native names that can be simulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import libraries
from ..cells import native_name
from ..errors import SmpiUnavailable

__all__ = ["SmpiChoice", "SmpiUnavailable", "available", "smpi_choice", "table"]


@dataclass(frozen=True)
class SmpiChoice:
    family: str
    native: str  # the native name, without "native:"
    selector: str | None  # SMPI's smpi/coll-selector (AUTO), else None
    algorithm: str | None  # SMPI's smpi/allreduce NAME (a forced algorithm), else None
    config: dict = field(default_factory=dict)  # further --cfg settings (sub-algorithms)
    copies: str = ""  # what SMPI runs, in words
    note: str = ""

    @property
    def cfg(self) -> list[str]:
        """The ``--cfg=KEY:VALUE`` options this choice passes to ``smpirun``."""
        settings = dict(self.config)
        if self.selector:
            settings["smpi/coll-selector"] = self.selector
        if self.algorithm:
            settings["smpi/allreduce"] = self.algorithm
        return [f"--cfg={k}:{v}" for k, v in settings.items()]

    def kwargs(self) -> dict:
        """Keyword arguments of ``smpi_allreduce``: ``algorithm``, ``selector``, ``config``."""
        return {"algorithm": self.algorithm, "selector": self.selector, "config": dict(self.config)}


def table(family: str) -> dict:
    """The catalogue's ``smpi:`` block of ``family``; KeyError naming the families."""
    cat = libraries.catalogue()
    if family not in cat:
        raise KeyError(f"unknown family {family!r}; valid: {', '.join(cat)}")
    block = cat[family].smpi
    if not block or not block.get("selector"):
        raise KeyError(f"{libraries.CATALOGUE_FILE}: family {family} has no smpi: block with a selector")
    return block


def _name(algorithm: str) -> str:
    return native_name(algorithm)


def smpi_choice(family: str, algorithm: str) -> SmpiChoice:
    """How SMPI simulates ``native:<algorithm>`` of ``family`` (``mpich``, ``openmpi``,
    ``impi``). KeyError for a name the catalogue does not have; ``SmpiUnavailable`` for one
    SMPI cannot run."""
    block = table(family)
    name = _name(algorithm)
    lib = libraries.catalogue()[family]
    if name == "auto":
        return SmpiChoice(family, name, block["selector"], None, {},
                          f"{block['copies']} (SMPI's copy of its selection)", block.get("note", ""))
    entries = block.get("algorithms") or {}
    if name not in lib.algorithms and name not in entries:
        raise KeyError(f"unknown algorithm native:{name} for family {family}; valid: "
                       + ", ".join(["auto", *entries]))
    entry = entries.get(name)
    if entry is None:
        raise SmpiUnavailable(family, name, "the catalogue's smpi: block does not map it")
    if not entry.get("smpi"):
        raise SmpiUnavailable(family, name, entry.get("why") or "no SMPI counterpart")
    smpi = entry["smpi"]
    config = {str(k): str(v) for k, v in (entry.get("config") or {}).items()}
    subs = "".join(f", {k.split('/')[-1]} {v}" for k, v in config.items())
    return SmpiChoice(family, name, None, smpi, config, f"SMPI {smpi}{subs} ({lib.title} {name})",
                      entry.get("note", ""))


def available(family: str) -> list[str]:
    """The native names of ``family`` SMPI can simulate (``native:auto`` first)."""
    block = table(family)
    return ["native:auto"] + [f"native:{n}" for n, e in (block.get("algorithms") or {}).items()
                              if e.get("smpi")]
