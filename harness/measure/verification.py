"""The catalogue verified per installation (``harness algorithms --verify``): each forced
algorithm run at P = 2, 3 and 4 under ``harness whatran``, at 7 doubles and at 1 MiB where its
``applies`` condition holds, and checked against the functions its catalogue entry ``runs``
(a composition counts its parts). The verdict, per algorithm, is kept under
``.mpi/verified/`` with the installation (its name, family, libmpi file and that file's size
and time) and read by the plan: an algorithm found to run something else is refused for
measurement, with what ran instead.

Verdicts: ``verified`` (every checked call ran the named functions), ``wrong`` (some call ran
other functions: which, where), ``unverifiable`` (the library's file gives no function, gdb
is missing), ``not checked`` (no catalogue ``runs`` for the entry, or no P and size where it
applies).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace

import numpy as np

from .. import fileio, paths
from ..libraries import Library
from ..units import format_size
from .whatran import whatran

PROCS = (2, 3, 4)
SIZES = (56, 1 << 20)  # 7 float64 (below every P's count conditions but ring's) and 1 MiB
DTYPE = "float64"


def _path(lib: Library):
    libmpi = lib.libmpi_path()
    facts = [lib.name, lib.family, list(lib.setup), lib.launcher, lib.libmpi]
    if libmpi and os.path.exists(libmpi):
        st = os.stat(libmpi)
        facts += [os.path.realpath(libmpi), st.st_size, st.st_mtime_ns]
    key = hashlib.sha1(json.dumps(facts, default=str).encode()).hexdigest()[:12]
    return paths.mpi_root() / "verified" / f"{lib.name}-{key}.json"


def recorded(lib: Library, current: bool = False) -> dict:
    """The verdicts kept for the installation: ``{algorithm: verdict}`` (empty if none);
    ``current``: only those found with the catalogue entry's present forcing environment."""
    try:
        kept = json.loads(_path(lib).read_text())
    except (OSError, ValueError):
        return {}
    if current:
        kept = {n: v for n, v in kept.items()
                if n in lib.algorithms and v.get("env") == lib.algorithms[n].env}
    return kept


def refusing(lib: Library) -> Library:
    """``lib`` without the algorithms its verification found to run something else."""
    # a verdict holds for the forcing environment it was found with (a catalogue edited since
    # is verified anew)
    wrong = {n: v for n, v in recorded(lib, current=True).items() if v.get("verdict") == "wrong"}
    if not wrong:
        return lib
    keep = frozenset(n for n in lib.algorithms if lib.has(n) and n not in wrong)
    return replace(lib, available=keep, refused={n: describe(v) for n, v in wrong.items()})


def describe(v: dict) -> str:
    if v["verdict"] == "verified":
        return f"verified: {v['how']}"
    return f"{v['verdict']}: {v.get('why', '')}".rstrip(": ")


def check(lib: Library, env: dict, name: str) -> dict:
    """The verdict of one forced algorithm of ``lib``."""
    alg = lib.algorithms[name]
    if not alg.runs:
        return {"verdict": "not checked", "why": "the catalogue names no function it runs"}
    itemsize = np.dtype(DTYPE).itemsize
    seen, wrong, unverifiable = [], [], []
    for procs in PROCS:
        sizes = [s for s in SIZES if not alg.not_applicable(s // itemsize, procs, itemsize)]
        if not sizes:
            continue
        for r in whatran(lib, env, procs, sizes, DTYPE, f"native:{name}"):
            where = f"P={procs} {format_size(r['size'])}"
            if r["status"] == "unverifiable":
                unverifiable.append(f"{where}: {r['why']}")
            elif name in r["ran"]:
                seen.append(where)
            else:
                ran = ", ".join(n for n, _ in r["functions"]) or "no collective function"
                wrong.append(f"at {where} it ran {ran}")
    if wrong:
        return {"verdict": "wrong", "why": "; ".join(wrong), "checked": seen}
    if unverifiable:
        return {"verdict": "unverifiable", "why": unverifiable[0]}
    if not seen:
        return {"verdict": "not checked", "why": "no P and size where it applies"}
    return {"verdict": "verified", "how": f"ran {' + '.join(alg.runs)} at " + ", ".join(seen),
            "checked": seen}


def verify(lib: Library, env: dict, names=None):
    """Check each forced algorithm (or ``names``) of ``lib``; yields ``(name, verdict)`` as
    each is done and keeps every verdict with the installation."""
    kept = recorded(lib)
    todo = [n for n, a in lib.algorithms.items()
            if not a.selector and n != "auto" and lib.has(n) and (names is None or n in names)]
    for name in todo:
        kept[name] = {**check(lib, env, name), "env": lib.algorithms[name].env}
        fileio.write_json(_path(lib), kept)
        yield name, kept[name]
