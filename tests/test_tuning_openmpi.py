"""Open MPI follows a decision table written as a coll/tuned dynamic rules file
(``harness.tuning.openmpi``): bit for bit, on random float64 data whose rounding depends on the
order an algorithm adds in, the tuned launch gives at each size the result of the algorithm the
table names there, and AUTO's in the table's gaps; ``check`` tells a file Open MPI follows from
one it dropped; the table's ranges map onto the file's blocks with gaps left to the library."""

import os
import re
import sys

import pytest
from conftest import REPO, run_mpi

from harness.libraries import get_library
from harness.tuning import Rule, Table
from harness.tuning import openmpi as om

LIB = get_library("openmpi")
SCRIPT = REPO / "tests" / "mpi_force_fingerprint.py"
PROCS = 3
# At P=3 the catalogue's algorithms fall in three rounding classes (ring = segmented_ring,
# recursive_doubling = rabenseifner, basic_linear), and AUTO (tuned's fixed decisions) runs
# recursive doubling below 4 KiB, ring-like at 4-8 KiB, 16-64 KiB and 64-256 KiB, rabenseifner
# from 256 KiB. The P=3 rules below name, at every count tested, another class than AUTO's,
# and the gap at 64-256 KiB lies between rules of the two other classes.
TABLE = Table("openmpi", (
    Rule(2, 2, 0, None, "ring"),
    Rule(3, 3, 0, 4096, "basic_linear"),
    Rule(3, 3, 4096, 65536, "recursive_doubling"),
    Rule(3, 3, 262144, None, "basic_linear"),
    Rule(4, None, 0, None, "recursive_doubling"),
))
# float64 elements: 2400 B, 4088 B | 4096 B, 65528 B | 65536 B (gap) | 262144 B
COUNTS = [300, 511, 512, 8191, 8192, 32768]


def fingerprints(extra_env: dict, label: str) -> dict[int, str]:
    cmd = [str(LIB.prefix / "bin" / "mpiexec"), "--oversubscribe", "-n", str(PROCS),
           sys.executable, str(SCRIPT), "env", label]
    env = {**os.environ, **LIB.run_env(), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "FP_COUNTS": ",".join(map(str, COUNTS)),
           **extra_env}
    proc = run_mpi(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    got = {int(c): fp for c, fp in re.findall(r"^FPC \S+ (\d+) (\S+)$", proc.stdout, re.M)}
    assert sorted(got) == COUNTS, proc.stdout
    return got


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    return om.write(TABLE, LIB, tmp_path_factory.mktemp("openmpi-tuning"))


def test_open_mpi_follows_the_rules_file_bit_for_bit(tuned):
    assert om.FORCING_VAR not in tuned and tuned["OMPI_MCA_coll"] == "^han"
    got = fingerprints(tuned, "tuned")
    names = ["auto", "basic_linear", "recursive_doubling", "ring"]
    fp = {n: fingerprints(LIB.native(n).env, n) for n in names}
    at_p = {r.algorithm for r in TABLE.rules if r.matches(PROCS, r.size_lo)} | {"auto"}
    for c in COUNTS:
        want = TABLE.lookup(PROCS, 8 * c) or "auto"
        assert got[c] == fp[want][c], f"count {c} ({8 * c} B): tuned is not {want}"
        for other in sorted(at_p - {want}):  # else the equality above would prove nothing
            assert fp[other][c] != fp[want][c], f"count {c}: {other} and {want} add alike"
    # the other communicator-size blocks would have given another result somewhere
    for n in ("ring", "recursive_doubling"):
        assert [fp[n][c] for c in COUNTS] != [got[c] for c in COUNTS]


def test_check_accepts_the_written_file(tuned):
    assert om.check(tuned, LIB) is None


@pytest.mark.parametrize("corrupt, reason", [
    # Open MPI refuses a block whose first rule is not for 0 bytes and drops the whole file
    (lambda t: t.replace("\n  0 1 0 0", "\n  16 1 0 0", 1), "did not load"),
    # one block fewer declared: Open MPI reads the first ones and ignores the rest, so it
    # runs a table other than the one written (the P >= 4 block is lost)
    (lambda t: re.sub(r"\n(\d+)(?=  # communicator-size blocks)",
                      lambda m: f"\n{int(m[1]) - 1}", t, count=1),
     "not a file this harness writes"),
], ids=["first-rule-not-0-bytes", "one-block-fewer-declared"])
def test_check_rejects_a_malformed_file(tuned, tmp_path, corrupt, reason):
    text = open(tuned["OMPI_MCA_coll_tuned_dynamic_rules_filename"]).read()
    bad = corrupt(text)
    assert bad != text
    path = tmp_path / om.RULES_FILE
    path.write_text(bad)
    got = om.check({**tuned, "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(path)}, LIB)
    assert got and reason in got and "\n" not in got


def test_check_rejects_a_forced_algorithm(tuned):
    got = om.check({**tuned, om.FORCING_VAR: "4"}, LIB)
    assert got and "overrides" in got


def test_ranges_map_onto_blocks_with_gaps_left_to_the_library():
    table = Table("openmpi", (
        Rule(3, 5, 0, 4096, "basic_linear"),
        Rule(3, 5, 65536, None, "segmented_ring"),
        Rule(8, 8, 16, 1024, "ring"),
        Rule(16, None, 0, None, "rabenseifner"),
    ))
    blks = om.blocks(table, LIB)
    M = om.MsgRule
    assert blks == [
        om.Block(0, (M(0, 0),)),                                    # P < 3: default
        om.Block(3, (M(0, 1), M(4096, 0), M(65536, 5, 0, 65536))),  # gap 4-64 KiB
        om.Block(6, (M(0, 0),)),                                    # P 6, 7
        om.Block(8, (M(0, 0), M(16, 4), M(1024, 0))),
        om.Block(9, (M(0, 0),)),                                    # P 9..15
        om.Block(16, (M(0, 6),)),
    ]
    ids = {n: int(a.id) for n, a in LIB.algorithms.items() if a.id}
    for procs in range(1, 40):
        for size in [0, 1, 15, 16, 17, 1023, 1024, 4095, 4096, 65535, 65536, 1 << 30]:
            name = table.lookup(procs, size)
            assert om.lookup(blks, procs, size).alg == (ids[name] if name else 0), (procs, size)
    assert om.parse(om.render(blks, LIB, table)) == {om.ALLREDUCE: blks}
    assert om.blocks(Table("openmpi"), LIB) == [om.Block(0, (M(0, 0),))]


def test_written_file_reads_back(tmp_path):
    table = Table("openmpi", (Rule(2, None, 1 << 20, None, "segmented_ring"),))
    env = om.write(table, LIB, tmp_path)
    path = tmp_path / om.RULES_FILE
    assert env == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                   "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(path.resolve()),
                   "OMPI_MCA_coll": "^han"}
    text = path.read_text()
    assert text.startswith("#") and "1048576 5 0 65536" in text
    assert om.parse(text) == {om.ALLREDUCE: om.blocks(table, LIB)}
    for bad, msg in [(text.replace("\n  0 0 0 0", "\n  8 0 0 0", 1), "not for 0 bytes"),
                     (text + "7\n", "left over"), (text[:text.rindex("65536")], "file ends")]:
        with pytest.raises(ValueError, match=msg):
            om.parse(bad)
