"""MPICH: a decision table as MPICH's own collective-selection ("csel") JSON files.

How MPICH 5.0 selects an allreduce (read in pmodels/mpich, branch 5.0.x):

* Two selection trees decide a blocking allreduce. The CH4 device's tree
  (``src/mpid/ch4/src/ch4_coll.h``, ``MPID_Allreduce`` with ``MPIR_CVAR_ALLREDUCE_COMPOSITION``
  = 0) picks a *composition*: on a communicator within one node ``gamma`` (the shared-memory
  module, whose own tree runs ``release_gather`` for commutative operations when the library
  is not multi-threaded, after a communicator's first ``MPIR_CVAR_POSIX_NUM_COLLS_THRESHOLD``
  = 5 collective calls, else falls to the generic layer), across nodes ``alpha`` for
  commutative operations on a parent communicator (intra-node reduce, allreduce among node
  leaders, intra-node bcast), else ``beta`` (the netmod, i.e. the generic
  ``MPIR_Allreduce_impl`` on the whole communicator). Only there does the generic tree
  (``MPII_coll_generic_json``, consulted by ``MPIR_Allreduce_allcomm_auto`` when
  ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` is ``auto``) pick the algorithm. The catalogue's
  forcing environments therefore set ``MPIR_CVAR_ALLREDUCE_COMPOSITION=2`` (beta) next to the
  algorithm. A generic-tree file alone would not take effect at thread level single on one
  node, or on COMM_WORLD across nodes.
* So this module writes both trees: ``mpich-coll-selection.json`` (generic level, loaded by
  ``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``) runs the table's algorithm in each rule's
  region, and ``mpich-ch4-coll-selection.json`` (``MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE``)
  picks composition beta in the same regions. Outside them both trees keep MPICH's own
  subtrees, so a call no rule covers is selected as without the files. Neither
  ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` nor ``MPIR_CVAR_ALLREDUCE_COMPOSITION`` is set; either
  would override the files.
* A file replaces the whole built-in tree (every collective), so the files start from the
  trees the installed library compiles in: their JSON text is read out of ``libmpi``'s
  read-only data (no copy of MPICH's data in this repository, and the exact installed version),
  and only the allreduce intra-communicator part is changed.

The csel grammar (``src/mpi/coll/src/csel.c``): a JSON object is a chain of alternatives tried
in order, the first that holds is followed (json-c keeps the file's key order). Keys:
``collective=<name>``, ``comm_type=intra|inter``, ``comm_size<=N`` / ``comm_size<N`` /
``comm_size=pow2`` / ``comm_size=node_comm_size``, ``avg_msg_size<=N`` / ``avg_msg_size<N``
(for allreduce: count * type size, in bytes), ``total_msg_size<=N`` / ``<N``, ``count<=N``,
``count<pow2`` (count below the largest power of two <= comm size), ``is_commutative=``,
``is_op_built_in=``, ``comm_hierarchy=`` ... and ``any`` or ``<anything>=any``, which always
holds and must come last. Numbers are read with ``atoi`` (32-bit). A comparison other than the
yes/no kinds must not be the last alternative (MPICH asserts), an operator's value must not be
empty, and a leaf object holds exactly one ``algorithm=<function>`` or
``composition=<function>`` key whose value lists the algorithm's parameters as ``name=value``
keys (parameters left out are read uninitialised). ``comm_size<N`` is evaluated as ``<=`` at
search time but as ``<`` when the tree is pruned per communicator, so only ``comm_size<=N`` is
written here. The generic tree's leaves run without the restriction checks a forced CVAR gets
(``maint/gen_coll.py``: only the CVAR path falls back), so each rule's leaf is guarded here by
the algorithm's restrictions (``src/mpi/coll/coll_algorithms.txt``) and falls back to MPICH's
own subtree when they do not hold, as a forced algorithm does where
``MPIR_CVAR_COLLECTIVE_FALLBACK`` is ``print`` (``error`` would fail the call instead). A
file's text is mmap-ed and parsed as a NUL-terminated string, so its size must not be a
multiple of the page size.

Known difference from a forced algorithm: in a multi-node run whose own P has no rule, the
``alpha`` composition's allreduce among node leaders (a communicator of one rank per node)
follows a rule that covers that number of ranks, as any call on such a communicator would.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from . import Table

FILE = "mpich-coll-selection.json"
CH4_FILE = "mpich-ch4-coll-selection.json"
ENV_FILE = "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE"
ENV_CH4_FILE = "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE"
BETA = "composition=MPIDI_Allreduce_intra_composition_beta"  # the netmod: MPIR_Allreduce_impl
INT_MAX = 2**31 - 1

# catalogue name -> the generic tree's container name
FUNCTIONS = {
    "recursive_doubling": "MPIR_Allreduce_intra_recursive_doubling",
    "recursive_multiplying": "MPIR_Allreduce_intra_recursive_multiplying",
    "reduce_scatter_allgather": "MPIR_Allreduce_intra_reduce_scatter_allgather",
    "smp": "MPIR_Allreduce_intra_smp",
    "tree": "MPIR_Allreduce_intra_tree",
    "recexch": "MPIR_Allreduce_intra_recexch",
    "ring": "MPIR_Allreduce_intra_ring",
    "k_reduce_scatter_allgather": "MPIR_Allreduce_intra_k_reduce_scatter_allgather",
    "nb": "MPIR_Allreduce_allcomm_nb",
}

# restrictions of coll_algorithms.txt as csel conditions: (key, must hold)
_COMMUTATIVE = ("is_commutative=yes", True)
RESTRICTIONS = {
    "smp": [_COMMUTATIVE, ("comm_hierarchy=parent", True)],
    "recursive_multiplying": [_COMMUTATIVE],
    "reduce_scatter_allgather": [("count<pow2", False), ("is_op_built_in=yes", True)],
    "ring": [_COMMUTATIVE],
    "k_reduce_scatter_allgather": [_COMMUTATIVE],
}

# the parameters a forced algorithm takes from CVARs (coll_algorithms.txt extra_params /
# cvar_params): (container key, CVAR suffix after MPIR_CVAR_ALLREDUCE_, MPICH 5.0 default)
PARAMS = {
    "recursive_multiplying": [("k", "RECURSIVE_MULTIPLYING_KVAL", "2")],
    "tree": [("tree_type", "TREE_TYPE", "knomial_1"), ("k", "TREE_KVAL", "2"),
             ("chunk_size", "TREE_PIPELINE_CHUNK_SIZE", "0"),
             ("buffer_per_child", "TREE_BUFFER_PER_CHILD", "0")],
    "recexch": [("k", "RECEXCH_KVAL", "2"),
                ("single_phase_recv", "RECEXCH_SINGLE_PHASE_RECV", "0")],
    "k_reduce_scatter_allgather": [("k", "RECEXCH_KVAL", "2"),
                                   ("single_phase_recv", "RECEXCH_SINGLE_PHASE_RECV", "0")],
}
_TREE_TYPES = ("kary", "knomial_1", "knomial_2")  # what the JSON path understands

# --------------------------------------------------------------------------- built-in trees


def builtin_trees(libmpi: str | Path) -> dict[str, dict]:
    """The selection trees compiled into ``libmpi`` as JSON text: ``{"mpir": generic,
    "ch4": device, "posix": shared memory}``. ValueError when they are not found."""
    data = Path(libmpi).read_bytes()
    decoder = json.JSONDecoder()
    trees: dict[str, dict] = {}
    for m in re.finditer(rb'\{\s*"collective=', data):
        end = data.find(b"\0", m.start())
        try:
            text = data[m.start():end if end >= 0 else len(data)].decode()
            tree, _ = decoder.raw_decode(text)
        except (UnicodeDecodeError, ValueError):
            continue
        leaves = " ".join(_leaf_keys(tree))
        kind = ("posix" if "=MPIDI_POSIX_" in leaves else
                "ch4" if "composition=MPIDI_" in leaves else
                "mpir" if "algorithm=MPIR_" in leaves else None)
        if kind and kind not in trees:
            trees[kind] = tree
    for kind in ("mpir", "ch4"):
        if kind not in trees:
            raise ValueError(f"{libmpi}: MPICH's built-in {kind} collective-selection JSON "
                             "not found in the library (not an MPICH 4.x/5.x ch4 build?)")
    return trees


def _leaf_keys(tree: dict):
    for key, val in tree.items():
        if key.replace(" ", "").startswith(("algorithm=", "composition=")):
            yield key
        elif isinstance(val, dict):
            yield from _leaf_keys(val)


# --------------------------------------------------------------------------- the grammar

_BOOLEAN = re.compile(r"(is_multi_threaded|comm_type|comm_hierarchy|is_node_consecutive|"
                      r"is_sendbuf_inplace|is_block_regular|is_commutative|is_op_built_in|"
                      r"collective)=\w+\Z")
_NUMERIC = re.compile(r"(comm_size|count|avg_msg_size|total_msg_size|comm_avg_ppn)<=?(-?\d+)\Z")
_OTHER = {"comm_size=pow2", "comm_size=node_comm_size", "count<pow2"}


def check_tree(tree: dict, where: str = "") -> None:
    """Raise ValueError where ``tree`` breaks a rule MPICH's parser asserts on (or silently
    misreads): see the module's docstring."""
    if not isinstance(tree, dict) or not tree:
        raise ValueError(f"{where or '/'}: an operator needs a non-empty object")
    keys = [k.replace(" ", "") for k in tree]
    if keys[0].startswith(("algorithm=", "composition=")):
        if len(keys) != 1:
            raise ValueError(f"{where}: a leaf holds exactly one algorithm, got {keys}")
        for p, v in tree[list(tree)[0]].items():
            if "=" not in p or v != {}:
                raise ValueError(f"{where}/{keys[0]}: parameter {p!r} is not name=value: {{}}")
        return
    for i, (raw, key) in enumerate(zip(tree, keys)):
        last = i == len(keys) - 1
        here = f"{where}/{key}"
        if key.startswith(("algorithm=", "composition=")):
            raise ValueError(f"{here}: a leaf must be the only key of its object")
        if key == "any" or key.endswith("=any"):
            if not last:
                raise ValueError(f"{here}: 'any' must be the last alternative")
        elif _BOOLEAN.match(key):
            pass
        elif (m := _NUMERIC.match(key)) or key in _OTHER:
            if m and not 0 <= int(m.group(2)) <= INT_MAX:
                raise ValueError(f"{here}: MPICH reads the number as a 32-bit int")
            if last:
                raise ValueError(f"{here}: a comparison needs a following alternative")
        else:
            raise ValueError(f"{here}: not a key MPICH's selection understands")
        check_tree(tree[raw], here)


# --------------------------------------------------------------------------- the transformation


def _guarded(conditions, leaf: dict, default: dict) -> dict:
    """``leaf`` where every (key, must hold) condition does, ``default`` elsewhere."""
    if not conditions:
        return leaf
    (key, holds), rest = conditions[0], conditions[1:]
    any_key = key.split("=")[0].split("<")[0] + "=any"
    inner = _guarded(rest, leaf, default)
    return {key: inner, any_key: default} if holds else {key: default, any_key: inner}


def _by_size(rules, leaf_of, default: dict) -> dict:
    """The message-size chain of one process-count interval (rules sorted by size)."""
    chain, cursor = {}, 0
    for r in rules:
        if r.size_lo > cursor:
            chain[f"avg_msg_size<{r.size_lo}"] = default
        leaf = leaf_of(r.algorithm, default)
        if chain and r.size_lo == cursor and list(chain.values())[-1] == leaf:
            chain.pop(list(chain)[-1])  # the same choice as the rule before: one range
        if r.size_hi is None:
            chain["avg_msg_size=any"] = leaf
            return leaf if len(chain) == 1 else chain
        chain[f"avg_msg_size<{r.size_hi}"] = leaf
        cursor = r.size_hi
    chain["avg_msg_size=any"] = default
    return chain


def _regions(table: Table):
    """The table as consecutive process-count intervals ``(hi or None, rules sorted by size)``
    covering 1..inf, adjacent intervals with the same rules merged."""
    rules = [r for r in table.rules if r.size_hi is None or r.size_hi > r.size_lo]
    for r in rules:
        for v in (r.size_lo, r.size_hi, r.procs_lo, r.procs_hi):
            if v is not None and not 0 <= v <= INT_MAX:
                raise ValueError(f"rule {r}: MPICH compares sizes and process counts as 32-bit "
                                 f"ints; {v} does not fit")
    points = sorted({1} | {max(r.procs_lo, 1) for r in rules}
                    | {r.procs_hi + 1 for r in rules if r.procs_hi is not None})
    out: list[tuple[int | None, tuple]] = []
    for i, lo in enumerate(points):
        hi = points[i + 1] - 1 if i + 1 < len(points) else None
        cover = tuple(sorted((r for r in rules if r.procs_lo <= lo and
                              (r.procs_hi is None or (hi is not None and hi <= r.procs_hi))),
                             key=lambda r: r.size_lo))
        for a, b in zip(cover, cover[1:]):
            if a.size_hi is None or a.size_hi > b.size_lo:
                raise ValueError(f"overlapping rules {a} and {b}")
        if out and out[-1][1] == cover:
            out[-1] = (hi, cover)
        else:
            out.append((hi, cover))
    return out


def _by_procs(table: Table, leaf_of, default: dict) -> dict:
    chain = {}
    for hi, rules in _regions(table):
        sub = _by_size(rules, leaf_of, default) if rules else default
        chain["comm_size=any" if hi is None else f"comm_size<={hi}"] = sub
    return chain["comm_size=any"] if len(chain) == 1 else chain  # one region: no test


def _with_allreduce_intra(tree: dict, make) -> dict:
    """A copy of ``tree`` whose allreduce intra-communicator subtree ``S`` is ``make(S)``."""
    out = copy.deepcopy(tree)
    key = next((k for k in out if k.replace(" ", "") == "collective=allreduce"), None)
    if key is None:
        raise ValueError("the built-in tree has no allreduce part")
    part = out[key]
    intra = next((k for k in part if k.replace(" ", "") == "comm_type=intra"), None)
    if intra is not None:
        part[intra] = make(part[intra])
    else:  # no split by communicator kind: add one, inter-communicators keep the original
        out[key] = {"comm_type=intra": make(part), "comm_type=any": part}
    return out


def _params(name: str, env: dict) -> dict:
    params = {}
    for key, suffix, default in PARAMS.get(name, ()):
        names = [p + suffix for p in ("MPIR_CVAR_ALLREDUCE_", "MPICH_ALLREDUCE_",
                                      "MPIR_PARAM_ALLREDUCE_")]
        value = next((str(env[n]) for n in names if n in env), default)
        if key in ("buffer_per_child", "single_phase_recv"):
            value = "1" if value.strip().lower() in ("1", "true", "yes", "on") else "0"
        elif key == "tree_type" and value not in _TREE_TYPES:
            raise ValueError(f"tree type {value!r}: MPICH's selection file only knows "
                             f"{', '.join(_TREE_TYPES)}")
        params[f"{key}={value}"] = {}
    return params


def transform(table: Table, mpir: dict, ch4: dict, env: dict | None = None) -> tuple[dict, dict]:
    """The tuned ``(generic, device)`` trees: each rule's region runs its algorithm (generic
    tree, guarded by the algorithm's restrictions) by composition beta (device tree); every
    other call follows MPICH's own subtrees. ``env``: the launch environment's CVARs that set a
    forced algorithm's parameters (MPICH's defaults otherwise)."""
    env = env or {}

    def algorithm(name: str, default: dict) -> dict:
        if name == "auto":
            return default
        if name not in FUNCTIONS:
            raise KeyError(f"no MPICH allreduce algorithm {name!r}; known: {', '.join(FUNCTIONS)}")
        leaf = {f"algorithm={FUNCTIONS[name]}": _params(name, env)}
        return _guarded(RESTRICTIONS.get(name, []), leaf, default)

    def composition(name: str, default: dict) -> dict:
        return default if name == "auto" else {BETA: {}}

    new_mpir = _with_allreduce_intra(mpir, lambda orig: _by_procs(table, algorithm, orig))
    new_ch4 = _with_allreduce_intra(ch4, lambda orig: _by_procs(table, composition, orig))
    check_tree(new_mpir)
    check_tree(new_ch4)
    return new_mpir, new_ch4


# --------------------------------------------------------------------------- files


def dumps(tree: dict) -> str:
    """Compact JSON, padded so that its size is no multiple of 4 KiB (MPICH mmaps the file
    and parses up to the NUL the page's tail provides)."""
    text = json.dumps(tree, separators=(",", ":"))
    return text[:-1] + " }" if len(text.encode()) % 4096 == 0 else text


def write(table: Table, lib, out_dir: Path) -> dict[str, str]:
    """Write ``mpich-coll-selection.json`` and ``mpich-ch4-coll-selection.json`` into
    ``out_dir`` from the installed library's built-in trees; returns the environment that
    loads them (absolute paths)."""
    libmpi = lib.libmpi_path()
    if not libmpi or not Path(libmpi).is_file():
        raise ValueError(f"{lib.name}: libmpi not found ({libmpi}); its built-in selection "
                         "trees are the base of the tuned files")
    trees = builtin_trees(libmpi)
    mpir, ch4 = transform(table, trees["mpir"], trees["ch4"], lib.run_env())
    names = set(_leaf_keys(mpir)) | set(_leaf_keys(ch4))
    data = Path(libmpi).read_bytes()
    unknown = sorted(k for k in names if b"\0" + k.encode() + b"\0" not in data)
    if unknown:
        raise ValueError(f"{libmpi} does not know {', '.join(unknown)}")
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {}
    for name, var, tree in ((FILE, ENV_FILE, mpir), (CH4_FILE, ENV_CH4_FILE, ch4)):
        path = out_dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(dumps(tree))
        tmp.replace(path)
        env[var] = str(path)
    return env
