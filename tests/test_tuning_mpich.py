"""MPICH's tuned selection (``harness.tuning.mpich``): the files follow the decision table bit
for bit, keep MPICH's own choice where no rule applies, and leave the other collectives alone.

Evidence under MPI: on random float64 data the result's rounding depends on the algorithm's
order of additions, so a fingerprint of the result names the algorithm that ran
(``tests/mpi_force_fingerprint.py``)."""

import json
import os
import re
import sys

import pytest
from conftest import REPO, run_mpi

from harness.libraries import get_library
from harness.tuning import Rule, Table, mpich

LIB = get_library("mpich")
SCRIPT = REPO / "tests" / "mpi_force_fingerprint.py"
QUIET = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
         "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}
# MPICH's own selection on one node at thread level single (the bench's) is the shared-memory
# release_gather allreduce, once a communicator has made 5 collective calls; from the first
# call here, so that one call per size shows what a benchmark sees after its warm-up
STEADY = {"FP_THREAD_LEVEL": "single", "MPIR_CVAR_POSIX_NUM_COLLS_THRESHOLD": "0"}


def launch(procs, argv, env, timeout=120):
    cmd = [str(LIB.prefix / "bin" / "mpiexec"), "-n", str(procs), sys.executable, *map(str, argv)]
    proc = run_mpi(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                   env={**os.environ, **LIB.run_env(), **QUIET, **env})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def fingerprints(procs, counts, env):
    out = launch(procs, [SCRIPT, "env", "x"], {"FP_COUNTS": ",".join(map(str, counts)), **env})
    got = {int(c): fp for c, fp in re.findall(r"^FPC x (\d+) (\S+)$", out, re.M)}
    assert sorted(got) == sorted(counts), out
    return got


# ------------------------------------------------------------------------- without MPI
# A small evaluator of MPICH's selection trees, as MPIR_Csel_search walks them
# (src/mpi/coll/src/csel.c): the first alternative whose condition holds is followed.

def search(tree, call):
    for key, sub in tree.items():
        if key.startswith(("algorithm=", "composition=")):
            return key
        if holds(key, call):
            return search(sub, call)
    return None


def holds(key, c):
    if key == "any" or key.endswith("=any"):
        return True
    if m := re.fullmatch(r"(comm_size|avg_msg_size|count)(<=?)(\d+)", key):
        value = {"comm_size": c["procs"], "avg_msg_size": c["size"], "count": c["count"]}[m[1]]
        return value <= int(m[3]) if m[2] == "<=" else value < int(m[3])
    pof2 = 1 << (c["procs"].bit_length() - 1)
    flags = {"collective=allreduce": c.get("coll", "allreduce") == "allreduce",
             "comm_type=intra": True, "comm_type=inter": False,
             "comm_size=pow2": c["procs"] == pof2, "count<pow2": c["count"] < pof2,
             "comm_size=node_comm_size": c["one_node"], "comm_hierarchy=parent": c["parent"]}
    for name in ("is_commutative", "is_op_built_in", "is_multi_threaded"):
        flags[f"{name}=yes"], flags[f"{name}=no"] = c[name], not c[name]
    if key.startswith("collective="):
        return key == f"collective={c.get('coll', 'allreduce')}"
    return flags[key]


TOY_MPIR = {  # shaped like MPICH's generic tree, written here
    "collective=bcast": {"comm_type=intra": {"algorithm=MPIR_Bcast_intra_binomial": {}}},
    "collective=allreduce": {
        "comm_type=intra": {
            "avg_msg_size<=8": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}},
            "avg_msg_size=any": {"is_op_built_in=yes": {
                "count<pow2": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}},
                "count=any": {"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}}},
                "is_op_built_in=no": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}}}},
        "comm_type=inter": {"algorithm=MPIR_Allreduce_inter_reduce_exchange_bcast": {}}},
}
TOY_CH4 = {  # shaped like MPICH's device tree
    "collective=allreduce": {"comm_type=intra": {
        "comm_size=node_comm_size": {"composition=MPIDI_Allreduce_intra_composition_gamma": {}},
        "comm_size=any": {
            "comm_hierarchy=parent": {"composition=MPIDI_Allreduce_intra_composition_alpha": {}},
            "comm_hierarchy=any": {"composition=MPIDI_Allreduce_intra_composition_beta": {}}}}},
    "collective=barrier": {"composition=MPIDI_Barrier_intra_composition_beta": {}},
}
TABLE = Table("mpich", (
    Rule(2, 4, 0, 1024, "tree"), Rule(2, 4, 1024, 4096, "recursive_doubling"),
    Rule(2, 4, 4096, 65536, "ring"),
    Rule(5, 16, 64, 4096, "reduce_scatter_allgather"), Rule(5, 16, 4096, None, "ring"),
    Rule(100, None, 0, 100, "smp"),
))


def calls():
    for procs in (1, 2, 3, 4, 5, 7, 16, 17, 99, 100, 5000):
        for count in (0, 1, 2, 7, 127, 128, 511, 512, 8191, 8192, 1 << 20):
            for flags in ((True, True), (False, True), (False, False)):
                for one_node, parent, threaded in ((True, True, False), (False, True, True),
                                                   (True, False, True)):
                    yield {"procs": procs, "count": count, "size": 8 * count,
                           "is_commutative": flags[0], "is_op_built_in": flags[1],
                           "one_node": one_node, "parent": parent, "is_multi_threaded": threaded}


def test_tuned_trees_follow_the_table_and_keep_mpich_elsewhere():
    mpir, ch4 = mpich.transform(TABLE, TOY_MPIR, TOY_CH4)
    # only the allreduce intra-communicator part changes
    assert mpir["collective=bcast"] == TOY_MPIR["collective=bcast"]
    assert ch4["collective=barrier"] == TOY_CH4["collective=barrier"]
    assert (mpir["collective=allreduce"]["comm_type=inter"]
            == TOY_MPIR["collective=allreduce"]["comm_type=inter"])
    assert list(mpir) == list(TOY_MPIR)
    n = 0
    for c in calls():
        rule = TABLE.lookup(c["procs"], c["size"])
        pof2 = 1 << (c["procs"].bit_length() - 1)
        restricted = {"ring": not c["is_commutative"],
                      "smp": not (c["is_commutative"] and c["parent"]),
                      "reduce_scatter_allgather": not c["is_op_built_in"] or c["count"] < pof2}
        want = (f"algorithm={mpich.FUNCTIONS[rule]}" if rule and not restricted.get(rule)
                else search(TOY_MPIR, c))
        got = search(mpir, c)
        assert got == want, (c, rule)
        assert search(ch4, c) == (mpich.BETA if rule else search(TOY_CH4, c)), (c, rule)
        n += rule is not None and got != search(TOY_MPIR, c)
    assert n > 100  # the grid does exercise the rules
    # the forced algorithms' CVAR parameters are written out (MPICH leaves missing ones unset)
    leaf = search(mpir, {"procs": 3, "count": 1, "size": 8, "is_commutative": True,
                         "is_op_built_in": True, "one_node": True, "parent": True,
                         "is_multi_threaded": False})
    assert leaf == "algorithm=MPIR_Allreduce_intra_tree"
    text = json.dumps(mpir)
    assert '"algorithm=MPIR_Allreduce_intra_tree": {"tree_type=knomial_1": {}, "k=2": {}, ' \
           '"chunk_size=0": {}, "buffer_per_child=0": {}}' in text
    assert '"k=4": {}' in json.dumps(mpich.transform(
        TABLE, TOY_MPIR, TOY_CH4, {"MPIR_CVAR_ALLREDUCE_TREE_KVAL": "4"})[0])
    # no rules: the trees as they were
    assert mpich.transform(Table("mpich"), TOY_MPIR, TOY_CH4) == (TOY_MPIR, TOY_CH4)
    with pytest.raises(KeyError, match="no MPICH allreduce algorithm"):
        mpich.transform(Table("mpich", (Rule(2, 2, 0, 8, "rabenseifner"),)), TOY_MPIR, TOY_CH4)
    with pytest.raises(ValueError, match="32-bit"):
        mpich.transform(Table("mpich", (Rule(2, 2, 0, 1 << 31, "ring"),)), TOY_MPIR, TOY_CH4)


@pytest.mark.parametrize("tree, error", [
    ({"collective=allreduce": {"any": {"algorithm=A": {}}, "comm_size<=4": {"algorithm=B": {}}}},
     "last alternative"),
    ({"collective=allreduce": {"avg_msg_size<64": {"algorithm=A": {}}}}, "following alternative"),
    ({"collective=allreduce": {}}, "non-empty"),
    ({"collective=allreduce": {"algorithm=A": {}, "algorithm=B": {}}}, "exactly one"),
    ({"collective=allreduce": {"comm_size>4": {"algorithm=A": {}}}}, "not a key"),
    ({"collective=allreduce": {"avg_msg_size<=4294967296": {"algorithm=A": {}}, "any": {
        "algorithm=B": {}}}}, "32-bit"),
])
def test_check_tree_refuses_what_mpich_asserts_on(tree, error):
    with pytest.raises(ValueError, match=error):
        mpich.check_tree(tree)


def test_file_size_is_never_a_page_multiple():
    for n in range(4000, 4200):
        tree = {"collective=allreduce": {"algorithm=" + "a" * n: {}}}
        text = mpich.dumps(tree)
        assert len(text.encode()) % 4096 and json.loads(text) == tree


def test_files_from_the_installed_library(tmp_path):
    env = mpich.write(TABLE, LIB, tmp_path / "t")
    out = tmp_path / "t"
    assert env == {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(out / mpich.FILE),
                   "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE": str(out / mpich.CH4_FILE)}
    builtin = mpich.builtin_trees(LIB.libmpi_path())
    for var, kind in ((mpich.ENV_FILE, "mpir"), (mpich.ENV_CH4_FILE, "ch4")):
        tuned = json.loads(open(env[var]).read())
        mpich.check_tree(builtin[kind])  # the checker accepts MPICH's own trees
        assert [k for k in tuned if tuned[k] != builtin[kind][k]] == ["collective=allreduce"]
        assert list(tuned) == list(builtin[kind])


# ------------------------------------------------------------------------- under MPI

def test_tuned_allreduce_is_bit_for_bit_the_tables_algorithm(tmp_path):
    """P=4: [0, 1 KiB) tree, [1, 4 KiB) recursive doubling, [4, 64 KiB) ring, above: MPICH's
    own choice; counts on both sides of each boundary."""
    procs, counts = 4, [100, 127, 128, 300, 511, 512, 1001, 8191, 8192, 70000]
    table = Table("mpich", TABLE.rules[:3])
    tuned_env = mpich.write(table, LIB, tmp_path)
    overriding = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "MPIR_CVAR_ALLREDUCE_COMPOSITION"}
    assert not overriding & set(tuned_env)  # either would override the files
    forced = {name: fingerprints(procs, counts, {**LIB.algorithms[name].env, **STEADY})
              for name in ("tree", "recursive_doubling", "ring")}
    forced["auto"] = fingerprints(procs, counts, STEADY)
    for c in counts:  # every candidate adds in another order at every count
        assert len({fp[c] for fp in forced.values()}) == len(forced), c
    tuned = fingerprints(procs, counts, {**tuned_env, **STEADY})
    for c in counts:
        want = table.lookup(procs, 8 * c) or "auto"
        assert tuned[c] == forced[want][c], f"count {c}: {want} expected"
    # the generic-level file alone does not take effect: MPICH's device level runs its
    # shared-memory allreduce on one node, which is why the device-level file is written too
    alone = fingerprints(procs, counts, {mpich.ENV_FILE: tuned_env[mpich.ENV_FILE], **STEADY})
    assert alone == forced["auto"]
    # at thread level multiple the same algorithms run
    multiple = {"FP_THREAD_LEVEL": "multiple"}
    auto_m = fingerprints(procs, counts, multiple)
    tuned_m = fingerprints(procs, counts, {**tuned_env, **multiple})
    for c in counts:
        want = table.lookup(procs, 8 * c)
        assert tuned_m[c] == (forced[want][c] if want else auto_m[c]), c


COLLECTIVES = r'''
import mpi4py, os
mpi4py.rc.thread_level = os.environ["FP_THREAD_LEVEL"]
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r, p = comm.Get_rank(), comm.Get_size()


def keep_left(a, b, datatype):  # b := a op b, a from the lower ranks
    np.copyto(np.frombuffer(b, np.int64), np.frombuffer(a, np.int64))


left = MPI.Op.Create(keep_left, commute=False)
for count in (1, 2, 3, 5, 100, 1000, 5000, 20000):  # every region, count < pof2 included
    x = np.arange(count, dtype=np.int64) + r
    y = np.empty_like(x)
    comm.Allreduce(x, y, MPI.SUM)
    assert (y == p * np.arange(count) + p * (p - 1) // 2).all(), count
    # a non-commutative user operation: rules for ring / reduce_scatter_allgather must fall
    # back to MPICH's own choice, which keeps the rank order (left operand wins here)
    comm.Allreduce(x, y, left)
    assert (y == np.arange(count)).all(), ("left", count)
    req = comm.Iallreduce(x, y, MPI.SUM); req.Wait()
    assert y[-1] == p * (count - 1) + p * (p - 1) // 2
b = np.arange(50000, dtype=np.float64) if r == 0 else np.empty(50000)
comm.Bcast(b, root=0); assert b[-1] == 49999
s = np.empty(1); comm.Reduce(np.array([r + 1.0]), s, MPI.SUM, root=0)
assert r or s[0] == p * (p + 1) / 2
g = np.empty(p * 3, dtype=np.int64); comm.Allgather(np.full(3, r, np.int64), g)
assert (g == np.repeat(np.arange(p), 3)).all()
a = np.empty(p, dtype=np.int64); comm.Alltoall(np.arange(p, dtype=np.int64) + 10 * r, a)
assert (a == 10 * np.arange(p) + r).all()
assert comm.scan(1) == r + 1 and comm.allgather(r) == list(range(p))
comm.Barrier()
half = comm.Split(r % 2, r)
z = np.empty(2000); half.Allreduce(np.ones(2000), z, MPI.SUM)
assert (z == half.Get_size()).all()
if r == 0:
    print("COLLECTIVES OK", p, flush=True)
'''


@pytest.mark.parametrize("procs", [3, 4])
def test_other_collectives_and_restricted_algorithms_work_with_the_files(tmp_path, procs):
    table = Table("mpich", (Rule(2, 8, 0, 64, "reduce_scatter_allgather"),
                            Rule(2, 8, 64, 16384, "ring"),
                            Rule(2, 8, 16384, None, "k_reduce_scatter_allgather")))
    env = mpich.write(table, LIB, tmp_path / "files")
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES)
    out = launch(procs, [script], {**env, **STEADY})
    assert f"COLLECTIVES OK {procs}" in out
