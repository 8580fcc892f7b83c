"""Open MPI: a decision table as a ``coll/tuned`` dynamic rules file.

Open MPI 5.0's tuned component reads, when ``coll_tuned_use_dynamic_rules`` is on and
``coll_tuned_dynamic_rules_filename`` names a file, a plain list of integers (parser:
``ompi/mca/coll/tuned/coll_tuned_dynamic_file.c``, tokens read by
``ompi_coll_base_file_getnext_long`` in ``ompi/mca/coll/base/coll_base_util.c``; ``#`` starts a
comment that runs to the end of the line)::

    <number of collectives with rules>
    per collective:  <collective id>  <number of communicator-size blocks>
      per block:     <communicator size>  <number of message-size rules>
        per rule:    <message bytes>  <algorithm>  <fan-in/out>  <segment bytes>

The collective id is the ``COLLTYPE`` enum (``ompi/mca/coll/base/coll_base_functions.h``):
MPI_Allreduce is 2. A communicator uses the block with the largest communicator size <= its
own size, a call the rule with the largest message bytes <= ``count * type size``
(``coll_tuned_dynamic_rules.c``: ``ompi_coll_tuned_get_com_rule_ptr``,
``ompi_coll_tuned_get_target_method_params``); the first rule of a block must be for 0 bytes.
Algorithm 0 is the library's own fixed decision (``ompi_coll_tuned_allreduce_intra_dec_dynamic``
falls back to ``..._dec_fixed``), which is how a table's gaps keep the default. An optional
first line ``rule-file-version-2`` (5.0.7 on) allows a fifth column, max requests, that
allreduce does not use; the files here are version 1 (no header), which every 5.0 release reads.

Any error makes Open MPI drop the whole file and silently run its fixed decisions, and its
messages about the file are compiled only into debug builds (``OPAL_OUTPUT``), so ``check``
proves the file is in force by reading the library's own state after ``MPI_Init``.

The environment also sets ``OMPI_MCA_coll=^han``: on a communicator that spans nodes the han
component (priority 35, above tuned's 30) takes MPI_Allreduce and runs its hierarchical
algorithm, in which tuned only handles the node-local and node-leader sub-communicators, so
the file would be applied at the sub-communicators' sizes, not the table's P. The catalogue
forces every algorithm with ``^han`` as well, so the table's measurements were made that way.
On one node han disqualifies itself (``coll_han_module.c``: "comm has only local processes"),
so there ``^han`` changes nothing; across nodes the table's gaps run tuned's fixed decisions
rather than han.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..turns import launch_turn
from . import Table

RULES_FILE = "openmpi-allreduce.rules"
ALLREDUCE = 2  # COLLTYPE: ALLGATHER 0, ALLGATHERV 1, ALLREDUCE 2, ...
COLLCOUNT = 22  # number of COLLTYPE entries in 5.0 (the reader's bound on collective ids)
FORCING_VAR = "OMPI_MCA_coll_tuned_allreduce_algorithm"  # overrides the file: never set
SEGSIZE_VAR = "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize"
FANOUT_VAR = "OMPI_MCA_coll_tuned_allreduce_algorithm_tree_fanout"
PROBE_TIMEOUT = 60


@dataclass(frozen=True)
class MsgRule:
    """From ``size`` bytes up (to the next rule): run ``alg`` (0: the library's default)."""

    size: int
    alg: int
    faninout: int = 0
    segsize: int = 0


@dataclass(frozen=True)
class Block:
    """For communicators of ``procs`` processes up (to the next block)."""

    procs: int
    rules: tuple[MsgRule, ...]


DEFAULT = MsgRule(0, 0)  # no rule: the library decides


def _what(r: MsgRule) -> tuple[int, int, int]:
    return r.alg, r.faninout, r.segsize


def _decision(lib, name: str) -> tuple[int, int, int]:
    """(algorithm id, fan-in/out, segment bytes) that force catalogue entry ``name``."""
    name = name.split(":", 1)[1] if name.startswith("native:") else name
    a = lib.native(name)
    if name == "auto":
        return 0, 0, 0
    if a.id is None or a.selector:
        raise ValueError(f"openmpi: {name!r} is not a forced algorithm with an id")
    return int(a.id), int(a.env.get(FANOUT_VAR, 0)), int(a.env.get(SEGSIZE_VAR, 0))


def blocks(table: Table, lib) -> list[Block]:
    """The table as the file's communicator-size blocks of message-size rules. Every range
    no rule covers (in P or in size) gets algorithm 0; where rules overlap the first in the
    table wins, as in ``Table.lookup``."""
    decide = {r.algorithm: _decision(lib, r.algorithm) for r in table.rules}
    p_cuts = sorted({0} | {r.procs_lo for r in table.rules}
                    | {r.procs_hi + 1 for r in table.rules if r.procs_hi is not None})
    out: list[Block] = []
    for p in p_cuts:
        active = [r for r in table.rules
                  if r.procs_lo <= p and (r.procs_hi is None or p <= r.procs_hi)]
        s_cuts = sorted({0} | {r.size_lo for r in active}
                        | {r.size_hi for r in active if r.size_hi is not None})
        rules: list[MsgRule] = []
        for s in s_cuts:
            hit = next((r for r in active if r.size_lo <= s
                        and (r.size_hi is None or s < r.size_hi)), None)
            rule = MsgRule(s, *(decide[hit.algorithm] if hit else (0, 0, 0)))
            if not rules or _what(rules[-1]) != _what(rule):  # same decision: one rule
                rules.append(rule)
        if not out or out[-1].rules != tuple(rules):
            out.append(Block(p, tuple(rules)))
    return out


def lookup(blks: list[Block], procs: int, size: int) -> MsgRule:
    """The rule Open MPI applies: the last block with ``procs`` <= P (the first one if none),
    in it the last rule with ``size`` <= the message bytes (the first one if none)."""
    if not blks:
        return DEFAULT
    blk = blks[0]
    for b in blks:
        if b.procs > procs:
            break
        blk = b
    if not blk.rules:
        return DEFAULT
    rule = blk.rules[0]
    for r in blk.rules:
        if r.size > size:
            break
        rule = r
    return rule


def _bytes(n: int | None) -> str:
    if n is None:
        return "inf"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def render(blks: list[Block], lib, table: Table) -> str:
    """The rules file's text: ``blks`` with comments naming each block's and rule's range."""
    names = {int(a.id): n for n, a in lib.algorithms.items() if a.id is not None and not a.selector}
    names[0] = "library default (fixed decision)"
    ids = [f"{i} {n}" for i, n in sorted(names.items()) if i]
    lines = [
        "# Open MPI coll/tuned dynamic rules for MPI_Allreduce, written by the benchmark",
        f"# harness (harness/tuning/openmpi.py) from a decision table of {len(table.rules)} "
        "rule(s).",
        "# Loaded with OMPI_MCA_coll_tuned_use_dynamic_rules=1 and",
        "# OMPI_MCA_coll_tuned_dynamic_rules_filename=<this file>; Open MPI ignores a file",
        "# with any error. Integers only; '#' comments run to the end of the line.",
        "#   <collectives>  then per collective: <id> <communicator-size blocks>",
        "#   per block: <communicator size> <rules>; per rule: <message bytes> <algorithm>",
        "#   <fan-in/out> <segment bytes>",
        "# A communicator takes the last block whose size is <= its size; a call the last rule",
        "# whose bytes are <= count * type size. Algorithm 0 keeps the library's own choice.",
        f"# Allreduce algorithms: {', '.join(ids[:3])},",
        f"#   {', '.join(ids[3:])}.",
        "1  # collectives with rules",
        f"{ALLREDUCE}  # collective id: MPI_Allreduce",
        f"{len(blks)}  # communicator-size blocks",
    ]
    for i, b in enumerate(blks):
        hi = blks[i + 1].procs - 1 if i + 1 < len(blks) else None
        span = f"P = {b.procs}" if hi == b.procs else f"P {b.procs}..{'' if hi is None else hi}"
        lines.append(f"{b.procs} {len(b.rules)}  # {span}")
        for j, r in enumerate(b.rules):
            end = b.rules[j + 1].size if j + 1 < len(b.rules) else None
            lines.append(f"  {r.size} {r.alg} {r.faninout} {r.segsize}  "
                         f"# [{_bytes(r.size)}, {_bytes(end)}): {names.get(r.alg, r.alg)}")
    return "\n".join(lines) + "\n"


def write(table: Table, lib, out_dir: Path) -> dict[str, str]:
    """Write ``openmpi-allreduce.rules`` into ``out_dir``; return the environment that makes
    Open MPI follow it (absolute path)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    blks = blocks(table, lib)
    path = (out_dir / RULES_FILE).resolve()
    text = render(blks, lib, table)
    if parse(text) != {ALLREDUCE: blks}:
        raise AssertionError("openmpi: the rules file written does not read back as written")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
        "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(path),
        "OMPI_MCA_coll": "^han",
    }


def parse(text: str) -> dict[int, list[Block]]:
    """The rules of a file in the format above ({collective id: blocks}); ValueError naming
    what Open MPI would reject. Stricter than Open MPI: every token must be an integer."""
    tokens = []
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        for tok in line.split():
            if not tok.isdigit() or (len(tok) > 1 and tok[0] == "0"):
                raise ValueError(f"token {tok!r} is not a decimal integer")
            tokens.append(int(tok))
    it = iter(tokens)

    def nxt(what: str) -> int:
        try:
            return next(it)
        except StopIteration:
            raise ValueError(f"file ends where {what} was expected") from None

    out: dict[int, list[Block]] = {}
    for _ in range(nxt("the number of collectives")):
        coll = nxt("a collective id")
        if coll >= COLLCOUNT:
            raise ValueError(f"collective id {coll} >= {COLLCOUNT}")
        blks = []
        for _ in range(nxt("the number of communicator sizes")):
            procs, n = nxt("a communicator size"), nxt("the number of message sizes")
            rules = tuple(MsgRule(nxt("a message size"), nxt("an algorithm"),
                                  nxt("a fan-in/out"), nxt("a segment size")) for _ in range(n))
            if rules and rules[0].size != 0:
                raise ValueError(f"block P={procs}: the first rule is not for 0 bytes")
            if any(a.size >= b.size for a, b in zip(rules, rules[1:])):
                raise ValueError(f"block P={procs}: message sizes not increasing")
            blks.append(Block(procs, rules))
        if any(a.procs >= b.procs for a, b in zip(blks, blks[1:])):
            raise ValueError(f"collective {coll}: communicator sizes not increasing")
        out[coll] = blks
    if next(it, None) is not None:
        raise ValueError("numbers left over after the last rule")
    return out


# Run under mpiexec -n 1 with the tuning environment: after MPI_Init (which opens coll/tuned,
# whose open function reads the rules file) read the component's state through ctypes. The
# rules pointer is the field after the component's comm_query function pointer and an int
# (struct mca_coll_tuned_component_t, coll_tuned.h); the rule structs are those of
# coll_tuned_dynamic_rules.h; the decisions come from the library's own lookup functions.
_PROBE = r"""
import ctypes as C, json, re, sys
from mpi4py import MPI
points = json.loads(sys.argv[1])
out = {"error": "coll/tuned not found in the loaded MPI library"}
paths = sorted({l.split()[-1] for l in open("/proc/self/maps")
                if re.search(r"/(libmpi|mca_coll_tuned)\.so", l)})
for path in paths:
    so = C.CDLL(path)
    try:
        comp = C.addressof(C.c_char.in_dll(so, "mca_coll_tuned_component"))
        query = C.cast(so.ompi_coll_tuned_comm_query, C.c_void_p).value
        init = C.cast(so.ompi_coll_tuned_init_query, C.c_void_p).value
    except (ValueError, AttributeError):
        continue
    words = (C.c_void_p * 48).from_address(comp)
    at = next((i for i in range(1, 46) if words[i] == query and words[i - 1] == init), None)
    if at is None:
        out = {"error": "cannot locate the rules in mca_coll_tuned_component"}
        break
    rules = words[at + 2]
    so.mca_base_var_find.argtypes = [C.c_char_p] * 4  # libopen-pal, found through libmpi
    so.mca_base_var_get_value.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_void_p]
    def var(comp_name, name, ctype):
        i = so.mca_base_var_find(b"ompi", b"coll", comp_name, name)
        if i < 0:
            return None
        p, src = C.c_void_p(), C.c_int()
        if so.mca_base_var_get_value(i, C.byref(p), C.byref(src), None) != 0 or not p.value:
            return None
        v = ctype.from_address(p.value).value
        return [v.decode() if isinstance(v, bytes) else v, src.value]
    out = {"loaded": bool(rules), "path": path,
           "filename": var(b"tuned", b"dynamic_rules_filename", C.c_char_p),
           "use_dynamic_rules": var(b"tuned", b"use_dynamic_rules", C.c_bool),
           "allreduce_algorithm": var(b"tuned", b"allreduce_algorithm", C.c_int),
           "coll": var(None, None, C.c_char_p)}
    if rules:
        class Msg(C.Structure):
            _fields_ = [("comsize", C.c_int), ("alg_id", C.c_int), ("com_id", C.c_int),
                        ("msg_id", C.c_int), ("msg_size", C.c_size_t), ("alg", C.c_int),
                        ("faninout", C.c_int), ("segsize", C.c_long), ("max_requests", C.c_int)]
        class Com(C.Structure):
            _fields_ = [("comsize", C.c_int), ("alg_id", C.c_int), ("com_id", C.c_int),
                        ("n_msg", C.c_int), ("msg", C.POINTER(Msg))]
        class Alg(C.Structure):
            _fields_ = [("alg_id", C.c_int), ("n_com", C.c_int), ("com", C.POINTER(Com))]
        a = Alg.from_address(rules + C.sizeof(Alg) * %(coll)d)
        out["blocks"] = [[c.comsize, [c.msg[j].msg_size for j in range(c.n_msg)]]
                         for c in (a.com[i] for i in range(a.n_com))]
        so.ompi_coll_tuned_get_com_rule_ptr.restype = C.c_void_p
        so.ompi_coll_tuned_get_com_rule_ptr.argtypes = [C.c_void_p, C.c_int, C.c_int]
        get = so.ompi_coll_tuned_get_target_method_params
        get.restype = C.c_int
        get.argtypes = [C.c_void_p, C.c_size_t] + [C.POINTER(C.c_int)] * 3
        out["decisions"] = []
        for procs, size in points:
            com = so.ompi_coll_tuned_get_com_rule_ptr(rules, %(coll)d, procs)
            fan, seg, req = C.c_int(), C.c_int(), C.c_int()
            alg = get(com, size, C.byref(fan), C.byref(seg), C.byref(req)) if com else 0
            out["decisions"].append([alg, fan.value, seg.value] if com else [0, 0, 0])
    break
print("TUNEDPROBE " + json.dumps(out), flush=True)
""" % {"coll": ALLREDUCE}


def probe(env: dict, lib, points: list[tuple[int, int]] = ()) -> dict:
    """Open MPI's own view of the tuning in ``env`` (one rank): whether coll/tuned loaded a
    rules file, the MCA values it runs with, its blocks, and its decisions at ``points``."""
    run_env = {**os.environ, **lib.run_env(), **{k: str(v) for k, v in env.items()}}
    for var, dirs in lib.prepend().items():
        run_env[var] = os.pathsep.join(dirs + [p for p in [run_env.get(var)] if p])
    cmd = [*lib.launch_argv(1), sys.executable, "-c", _PROBE, json.dumps([list(p) for p in points])]
    with launch_turn("Open MPI tuning probe"):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env,
                              timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    for line in proc.stdout.splitlines():
        if line.startswith("TUNEDPROBE "):
            return json.loads(line[len("TUNEDPROBE "):])
    tail = (proc.stderr.strip().splitlines() or [""])[-1]
    return {"error": f"probe launch failed (exit {proc.returncode}): {tail}"[:300]}


def check(env: dict, lib) -> str | None:
    """None when Open MPI, launched with ``env``, has read and accepted the rules file it
    names and follows it for MPI_Allreduce; else a one-line reason. One launch of one rank."""
    name = env.get("OMPI_MCA_coll_tuned_dynamic_rules_filename")
    if not name:
        return "no OMPI_MCA_coll_tuned_dynamic_rules_filename in the environment"
    path = Path(name)
    if not path.is_absolute():
        return f"rules file {name} is not an absolute path"
    try:
        text = path.read_text()
    except OSError as e:
        return f"rules file {name} cannot be read: {e.strerror or e}"
    try:
        parsed = parse(text).get(ALLREDUCE)
    except ValueError as e:
        parsed, perr = None, str(e)
    points = []
    for b in parsed or []:
        for r in b.rules:
            points.append((b.procs, r.size))
            if r.size:
                points.append((b.procs, r.size - 1))
    got = probe(env, lib, points)
    if "error" in got:
        return got["error"]
    if not got["loaded"]:
        return (f"Open MPI did not load the rules file {name} (it drops a malformed file "
                "silently and runs its fixed decisions)")
    if got["filename"] and got["filename"][0] != str(path):
        return f"Open MPI read {got['filename'][0]}, not {name}"
    if not got["use_dynamic_rules"] or not got["use_dynamic_rules"][0]:
        return "coll_tuned_use_dynamic_rules is off"
    forced = got["allreduce_algorithm"]
    if forced and forced[0]:
        return f"coll_tuned_allreduce_algorithm={forced[0]} is set: it overrides the rules file"
    coll = (got["coll"] or [None])[0] or ""
    parts = coll.lstrip("^").split(",") if coll else []
    if not coll or (coll.startswith("^") and "han" not in parts) or (
            not coll.startswith("^") and ("han" in parts or "tuned" not in parts)):
        return (f"coll={coll!r}: han is not excluded or tuned not included, so tuned may "
                "not run MPI_Allreduce")
    if parsed is None:
        return f"Open MPI loaded {name}, but it is not a file this harness writes: {perr}"
    want = [[b.procs, [r.size for r in b.rules]] for b in parsed]
    if got.get("blocks") != want:
        return f"Open MPI holds blocks {got.get('blocks')}, the file says {want}"
    for (procs, size), dec in zip(points, got["decisions"]):
        r = lookup(parsed, procs, size)
        if dec != [r.alg, r.faninout, r.segsize]:
            return (f"at P={procs}, {size} B Open MPI decides {dec}, the file says "
                    f"{[r.alg, r.faninout, r.segsize]}")
    return None


in_force = check  # harness.campaign.tune calls each library's in_force(env, lib) after writing
