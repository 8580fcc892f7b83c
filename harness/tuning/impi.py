"""Intel MPI (2021.18): a decision table as ``I_MPI_ADJUST_ALLREDUCE`` conditions or as a JSON
tuning file (``I_MPI_TUNING``), and the environment of Intel MPI's own autotuner.

How 2021.18 reads the conditions (measured at P=2..6 on float64 sums whose rounding tells
which algorithm ran; ``tests/test_tuning_impi.py`` repeats the main points; the documentation
only says ``<presetid>:<l>-<m>@<p>-<q>``, sizes "from l to m, inclusive"):

* message size = count * type size in bytes, and the upper bound is inclusive (``7:0-8008``
  covers 1001 doubles, ``7:0-8007`` does not);
* the lower bounds are not used: the entries act as ascending upper thresholds. A call runs
  the first entry (in the order written) whose upper bound is >= its size; a call above every
  bound runs the last entry. So there are no gaps: a size no rule names runs a neighbour's
  algorithm, never the library's default. The largest bound accepted is 2**31-1;
  ``4294967295``, ``-1`` or an empty bound make Intel MPI ignore the whole variable (``Incorrect
  adjust value ... will be ignored``), and a ``,`` between two ``id:`` entries (instead of
  ``;``) makes every rank crash with SIGSEGV after that message;
* ``@<p>-<q>`` works the same on the process count (upper bound, first match, last entry for
  larger P), but entries with the same ``q`` replace each other: only the last one written
  survives, for every size. Mixed with entries without ``@`` the size rules are lost too.
  So the string holds either size rules valid at every P, or one algorithm per P range;
* no preset id keeps the default selection: 0 ("basic logic of the collective algorithm
  selection") runs the MPIR-level choice, which differs from the unset variable (e.g. at
  P=4 and 16 doubles; P=5 at 200000 doubles), and ids 0-32 all differ from it somewhere.
  Where the table leaves the default, this module writes 0, the nearest there is.

The JSON file (``I_MPI_TUNING=<path>``, 2021.18 loads it: strace shows it opened, the
fingerprints follow it) has the layout the mpitune output uses, keys
``coll=Allreduce`` / ``ppn=`` / ``comm_size=`` / ``comm_id=-1`` / ``msg_size=`` and a leaf
``ALLREDUCE=<preset id>``. Thresholds are inclusive upper bounds (bytes, processes), ``-1`` =
no bound, and every level must be sorted ascending with ``-1`` last (unsorted levels or a
missing ``comm_id=-1`` level are silently misread). Unlike the string it nests sizes under
process counts, so every table can be written; defaults cannot be kept there either, and
sizes / P a table does not cover run 0. The file replaces the selection of the collectives
it names only (a file naming only Bcast leaves Allreduce alone); ``I_MPI_ADJUST_ALLREDUCE``
wins over it when both are set. The ``I_MPI_TUNING_*_DUMP`` variables exist but this
version never writes JSON (only ``I_MPI_TUNING_BIN_DUMP``, a zlib-compressed binary).

Intel MPI's autotuner (``autotuner_env``): the documented switch ``I_MPI_TUNING_MODE=auto``
is read only on GenuineIntel CPUs (``MPID_Init`` compares the CPUID vendor string and
``MPIU_Selection_init`` skips the mode otherwise; the documentation says the family supports
Intel processors only). ``I_MPI_TUNING_AUTO=1`` (the switch Intel MPI 2019 documented,
no longer listed by impi_info) is read before that check and starts the autotuner on any
CPU; the variable checker still prints
``I_MPI_TUNING_AUTO environment variable is not supported`` (silence it with
``I_MPI_VAR_CHECK_SPELLING=0`` if needed). Per communicator and message size the autotuner
runs each of its presets for ``max(warmup, 1) + iterations`` calls, then keeps the fastest
(19 presets at P=4 and 16 doubles, 15 at 70000 doubles on the test machine).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from . import Rule, Table

ENV_FILE = "impi-allreduce.env"
JSON_FILE = "impi-tuning.json"
VARIABLE = "I_MPI_ADJUST_ALLREDUCE"
INT_MAX = 2**31 - 1  # largest bound Intel MPI 2021.18 accepts (bytes and processes)
BASIC = "0"  # "basic logic": what a range the table leaves to the default runs
KEEPS_DEFAULT = False  # harness.campaign.tune fills the table's gaps (see tune._fill)

# I_MPI_TUNING* variables Intel MPI 2021.18 knows (impi_info -a -e; those after "hidden"
# only in libmpi.so's strings)
TUNING_VARIABLES = (
    "I_MPI_TUNING", "I_MPI_TUNING_NETWORK", "I_MPI_TUNING_NODE", "I_MPI_TUNING_BIN",
    "I_MPI_TUNING_BIN_PATH", "I_MPI_TUNING_BIN_DUMP", "I_MPI_TUNING_COMPOSITION_DUMP",
    "I_MPI_TUNING_NETWORK_DUMP", "I_MPI_TUNING_NODE_DUMP", "I_MPI_TUNING_MODE",
    "I_MPI_TUNING_AUTO_POLICY", "I_MPI_TUNING_AUTO_COMM_LIST", "I_MPI_TUNING_AUTO_COMM_USER",
    "I_MPI_TUNING_AUTO_COMM_DEFAULT", "I_MPI_TUNING_AUTO_ITER_NUM",
    "I_MPI_TUNING_AUTO_ITER_POLICY", "I_MPI_TUNING_AUTO_ITER_POLICY_THRESHOLD",
    "I_MPI_TUNING_AUTO_SYNC", "I_MPI_TUNING_AUTO_STORAGE_SIZE",
    "I_MPI_TUNING_AUTO_WARMUP_ITER_NUM", "I_MPI_TUNING_COLL_LIST", "I_MPI_TUNING_STORAGE_SIZE",
    # hidden
    "I_MPI_TUNING_AUTO", "I_MPI_TUNING_AUTO_SMART", "I_MPI_TUNING_AUTO_PRECISION_MODE",
    "I_MPI_TUNING_COLL_VEC_OPS", "I_MPI_TUNING_COMPOSITION_PPN", "I_MPI_TUNING_NETWORK_PPN",
    "I_MPI_TUNING_NODE_PPN", "I_MPI_TUNING_COMPOSITION_COMM_HIERARCHY",
    "I_MPI_TUNING_NETWORK_COMM_HIERARCHY", "I_MPI_TUNING_NODE_COMM_HIERARCHY",
    "I_MPI_TUNING_LUT", "I_MPI_TUNING_NETWORK_LUT", "I_MPI_TUNING_NODE_LUT",
    "I_MPI_TUNING_NIC_SPEED", "I_MPI_TUNING_METADATA", "I_MPI_TUNING_METADATA_DUMP",
    "I_MPI_TUNING_STORAGE_MSG_SIZE_FILTER",
)

# a segment: (lo, hi, preset id or None = the table leaves the default), hi None = no bound
Segment = tuple[int, "int | None", "str | None"]


def _preset(lib, algorithm: str) -> str | None:
    """The I_MPI_ADJUST_ALLREDUCE id of a catalogue algorithm; None for ``auto``."""
    name = algorithm.split(":", 1)[1] if algorithm.startswith("native:") else algorithm
    entry = lib.algorithms.get(name)
    if entry is None or entry.selector:
        raise KeyError(f"{algorithm!r} is not a forced algorithm of the {lib.name} catalogue")
    return entry.id


def _segments(rules: list[Rule], lib) -> tuple[Segment, ...]:
    """The rules of one P range as segments covering [0, inf), gaps as None, neighbours
    with the same preset merged."""
    out: list[list] = []
    pos: int | None = 0
    for r in sorted(rules, key=lambda r: r.size_lo):
        if pos is None or r.size_lo < pos:
            raise ValueError(f"overlapping size ranges in the table: {r}")
        if r.size_hi is not None and r.size_hi <= r.size_lo:
            raise ValueError(f"empty size range in the table: {r}")
        if r.size_lo > pos:
            out.append([pos, r.size_lo, None])
        out.append([r.size_lo, r.size_hi, _preset(lib, r.algorithm)])
        pos = r.size_hi
    if pos is not None:
        out.append([pos, None, None])
    merged: list[list] = []
    for seg in out:
        if merged and merged[-1][2] == seg[2]:
            merged[-1][1] = seg[1]
        else:
            merged.append(seg)
    return tuple(tuple(s) for s in merged)


def _groups(table: Table, lib) -> list[tuple[int, int | None, tuple[Segment, ...]]]:
    """The table as P ranges covering [1, inf), each with its size segments; neighbouring
    ranges with the same segments merged."""
    cuts = {1}
    for r in table.rules:
        if r.procs_hi is not None and r.procs_hi < r.procs_lo:
            raise ValueError(f"empty process range in the table: {r}")
        cuts.add(max(1, r.procs_lo))
        if r.procs_hi is not None:
            cuts.add(r.procs_hi + 1)
    cuts = sorted(cuts)
    groups: list[list] = []
    for i, lo in enumerate(cuts):
        hi = cuts[i + 1] - 1 if i + 1 < len(cuts) else None
        here = [r for r in table.rules
                if r.procs_lo <= lo and (r.procs_hi is None or r.procs_hi >= lo)]
        segs = _segments(here, lib)
        if groups and groups[-1][2] == segs:
            groups[-1][1] = hi
        else:
            groups.append([lo, hi, segs])
    return [tuple(g) for g in groups]


def _bound(hi: int | None, what: str) -> int:
    """Inclusive upper bound for an exclusive ``hi`` (None: the largest accepted)."""
    if hi is None:
        return INT_MAX
    if hi - 1 > INT_MAX:
        raise ValueError(f"{what} bound {hi} above {INT_MAX}: Intel MPI cannot express it")
    return hi - 1


def _size_entries(segs: tuple[Segment, ...]) -> list[str]:
    return [f"{pid or BASIC}:{lo}-{_bound(hi, 'size')}" for lo, hi, pid in segs]


def condition_string(table: Table, lib, procs: int | None = None) -> str:
    """The ``I_MPI_ADJUST_ALLREDUCE`` value that makes Intel MPI follow ``table``; "" when the
    table (at ``procs``) names nothing, so the variable stays unset and the default holds.

    ``procs``: the value for launches with exactly that many processes (size rules only,
    always exact apart from the default ranges, which run preset 0). Without it the value
    must hold for every P, which 2021.18 allows only for size rules shared by all P or one
    algorithm per P range (see the module notes); other tables raise ValueError: use
    ``write_json`` (``write`` falls back to it by itself).
    """
    groups = _groups(table, lib)
    if procs is not None:
        if procs < 1:
            raise ValueError(f"procs must be >= 1, not {procs}")
        segs = next(s for lo, hi, s in groups if lo <= procs and (hi is None or procs <= hi))
        return "" if all(pid is None for _, _, pid in segs) else ";".join(_size_entries(segs))
    if len(groups) == 1:
        segs = groups[0][2]
        return "" if all(pid is None for _, _, pid in segs) else ";".join(_size_entries(segs))
    if all(len(segs) == 1 for _, _, segs in groups):
        return ";".join(f"{segs[0][2] or BASIC}:0-{INT_MAX}@{lo}-{INT_MAX if hi is None else hi}"
                        for lo, hi, segs in groups)
    raise ValueError(
        "Intel MPI 2021.18 cannot hold size rules that differ between process counts in "
        f"{VARIABLE} (entries with the same @P upper bound replace each other); use "
        "write_json, or condition_string(..., procs=P) for launches at one P")


def tuning_json(table: Table, lib) -> dict:
    """The ``I_MPI_TUNING`` document for ``table`` ({} when it names nothing)."""
    groups = _groups(table, lib)
    if all(pid is None for _, _, segs in groups for _, _, pid in segs):
        return {}
    by_procs = {}
    for lo, hi, segs in groups:
        sizes = {}
        for slo, shi, pid in segs:
            key = -1 if shi is None else _bound(shi, "size")
            sizes[f"msg_size={key}"] = {f"ALLREDUCE={pid or BASIC}": {}}
        key = -1 if hi is None else hi
        by_procs[f"comm_size={key}"] = {"comm_id=-1": sizes}
    return {"coll=Allreduce": {"ppn=-1": by_procs}}


def check(table: Table, lib) -> list[str]:
    """Where Intel MPI will not do what ``table`` says with the files ``write`` or
    ``write_json`` made: the ranges the table leaves to the default, which run preset 0
    instead ([] when there are none, or when the table names nothing and no variable is set).
    With ``condition_string(table, lib, procs=P)`` a P without rules keeps the real default
    (empty value: leave the variable unset)."""
    groups = _groups(table, lib)
    if all(pid is None for _, _, segs in groups for _, _, pid in segs):
        return []
    return [f"P {lo}..{hi or 'inf'}, sizes [{slo}, {shi or 'inf'}) bytes: the table keeps the "
            "default, which Intel MPI 2021.18 cannot express; this range runs preset "
            f"{BASIC} (basic logic), not the default selection"
            for lo, hi, segs in groups for slo, shi, pid in segs if pid is None]


def write(table: Table, lib, out_dir: Path) -> dict[str, str]:
    """Write ``impi-allreduce.env`` (``export I_MPI_ADJUST_ALLREDUCE='...'``) and return
    ``{"I_MPI_ADJUST_ALLREDUCE": value}``; {} for a table that names nothing (the default
    everywhere). A table the variable cannot hold (size rules that differ between process
    counts) goes to ``write_json`` instead, and its environment is returned."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        value = condition_string(table, lib)
    except ValueError:
        return write_json(table, lib, out_dir)
    lines = [f"# Intel MPI {VARIABLE}: tuned allreduce selection (harness tune)",
             "# <preset id>:<lo>-<hi> = message sizes lo..hi bytes, hi inclusive; Intel MPI",
             "# 2021.18 takes the first entry whose hi >= the size, the last beyond all;",
             f"# preset {BASIC} = its basic logic where the table keeps the default"]
    lines += [f"#   {n}" for n in check(table, lib)]
    if value:
        lines.append(f"export {VARIABLE}={shlex.quote(value)}")
    else:
        lines.append(f"# no rule: {VARIABLE} stays unset")
    (out_dir / ENV_FILE).write_text("\n".join(lines) + "\n")
    return {VARIABLE: value} if value else {}


def write_json(table: Table, lib, out_dir: Path) -> dict[str, str]:
    """Write ``impi-tuning.json`` and return ``{"I_MPI_TUNING": <absolute path>}`` ({} for a
    table that names nothing). Do not combine it with ``I_MPI_ADJUST_ALLREDUCE``, which
    takes precedence."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = tuning_json(table, lib)
    path = (out_dir / JSON_FILE).resolve()
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return {"I_MPI_TUNING": str(path)} if doc else {}


def autotuner_env(iterations: int, warmup: int) -> dict[str, str]:
    """The environment that runs Intel MPI's autotuner: per communicator and message size
    each preset runs ``max(warmup, 1)`` warm-up and ``iterations`` timed calls, then the
    fastest (as I_MPI_TUNING_AUTO_POLICY, left at its default, judges) is kept for the rest
    of the run. ``I_MPI_TUNING_AUTO_ITER_POLICY=0``: the iteration count holds at
    every size (by default it drops for large messages: 2 calls per preset instead of 5
    at 560 KB); ``I_MPI_TUNING_AUTO_SYNC=1``: a barrier before each tuning call, as
    ``auto:cluster`` sets on Intel CPUs. Every communicator is tuned
    (I_MPI_TUNING_AUTO_COMM_LIST unset)."""
    if int(iterations) < 1 or int(warmup) < 0:
        raise ValueError(f"iterations >= 1 and warmup >= 0 needed, not {iterations}, {warmup}")
    return {
        "I_MPI_TUNING_MODE": "auto",
        "I_MPI_TUNING_AUTO": "1",  # read before the GenuineIntel check that gates the mode
        "I_MPI_TUNING_AUTO_ITER_NUM": str(int(iterations)),
        "I_MPI_TUNING_AUTO_WARMUP_ITER_NUM": str(int(warmup)),
        "I_MPI_TUNING_AUTO_ITER_POLICY": "0",
        "I_MPI_TUNING_AUTO_SYNC": "1",
    }


def autotuner_calls(iterations: int, warmup: int, presets: int = 33) -> int:
    """Calls per communicator and message size before the autotuner settles: ``presets``
    candidates of ``max(warmup, 1) + iterations`` calls. 19 presets were seen at P=4 (16
    doubles) and 15 at 70000 doubles; 33 (the id range impi_info gives) is a margin, not a
    proven bound."""
    return presets * (max(int(warmup), 1) + int(iterations))
notes = check  # harness.campaign.tune records where the table cannot keep the default
