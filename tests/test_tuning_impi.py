"""Intel MPI follows a decision table written by ``harness.tuning.impi``, bit for bit: on
random float64 data the rounding of an allreduce depends on the order its algorithm adds in,
so the SHA-1 of the result tells which algorithm ran (``mpi_force_fingerprint.py``). At P=4
the tuned launch must give, at every count, the result of the algorithm the table names,
and in the ranges the table leaves to the default the result of preset 0 (Intel MPI 2021.18
has no way to keep its default there; see ``harness/tuning/impi.py``). Plus the condition
string without MPI, and a launch under Intel MPI's autotuner."""

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, run_mpi

from harness.libraries import get_library
from harness.tuning import Rule, Table, impi

SCRIPT = REPO / "tests" / "mpi_force_fingerprint.py"
P = 4
ITEM = 8  # float64
# bytes: 8 | 128, 800, 4088 | 4096, 8008, 65528 | 65536, 560000  (gap | ring | shumilin | gap)
COUNTS = (1, 16, 100, 511, 512, 1001, 8191, 8192, 70000)
TABLE = Table("impi", (Rule(4, 4, 64, 4096, "ring"),
                       Rule(4, 4, 4096, 65536, "shumilin_ring")))


def _env(extra: dict) -> dict:
    lib = get_library("impi")
    env = {**os.environ, **lib.run_env(), **extra}
    for key, paths in lib.prepend().items():
        env[key] = os.pathsep.join(paths + ([env[key]] if env.get(key) else []))
    return env


def _mpiexec(argv: list, extra: dict, procs: int = P) -> subprocess.CompletedProcess:
    lib = get_library("impi")
    proc = run_mpi([str(lib.prefix / "bin" / "mpiexec"), "-n", str(procs), *argv],
                   capture_output=True, text=True, timeout=300, env=_env(extra), cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def fingerprints(extra: dict) -> dict[int, str]:
    """count -> fingerprint of one allreduce of that many doubles under ``extra``."""
    proc = _mpiexec([sys.executable, str(SCRIPT), "env", "x"],
                    {**extra, "FP_COUNTS": ",".join(map(str, COUNTS))})
    got = {int(c): fp for c, fp in re.findall(r"^FPC \S+ (\d+) (\S+)$", proc.stdout, re.M)}
    assert set(got) == set(COUNTS), proc.stdout
    return got


@pytest.fixture(scope="module")
def prints(tmp_path_factory):
    lib = get_library("impi")
    out = {"auto": fingerprints({}), "basic": fingerprints({impi.VARIABLE: impi.BASIC})}
    for alg in sorted({r.algorithm for r in TABLE.rules}):
        out[alg] = fingerprints(lib.algorithms[alg].env)
    env = impi.write(TABLE, lib, tmp_path_factory.mktemp("tuning"))
    assert set(env) == {"I_MPI_TUNING"}  # size rules at one P: the JSON file, not the string
    out["tuned_file"] = fingerprints(env)
    out["tuned_string"] = fingerprints({impi.VARIABLE: impi.condition_string(TABLE, lib, procs=P)})
    return out


def _expected(count: int) -> str:
    return TABLE.lookup(P, count * ITEM) or "basic"


@pytest.mark.parametrize("tuned", ["tuned_file", "tuned_string"])
def test_intel_mpi_follows_the_table_bit_for_bit(prints, tuned):
    for c in COUNTS:
        assert prints[tuned][c] == prints[_expected(c)][c], (
            f"{tuned}: {c} doubles ({c * ITEM} B) did not run {_expected(c)}")


def test_the_fingerprints_tell_the_ranges_apart(prints):
    rule_algs = sorted({r.algorithm for r in TABLE.rules})
    # at every count but 8 bytes (where all presets add alike) the entry the table names gives
    # another result than the other rule's algorithm and preset 0: the boundaries are proven
    for c in COUNTS[1:]:
        mine = _expected(c)
        for other in rule_algs + ["basic"]:
            assert other == mine or prints[other][c] != prints[mine][c], (c, mine, other)
    for alg in rule_algs:  # every rule changes what the library does somewhere
        assert any(prints[alg][c] != prints["auto"][c] for c in COUNTS if _expected(c) == alg), alg
    # above the last rule preset 0 runs (without it Intel MPI would run the last rule's
    # algorithm there); at P=4 and these sizes it adds like the default selection
    for c in (8192, 70000):
        assert prints["tuned_file"][c] == prints["auto"][c]
    # below the first rule the default is not kept: Intel MPI's own choice for 8 bytes (its
    # shared-memory gather) is not reachable by any preset id in 2021.18
    assert prints["tuned_file"][1] != prints["auto"][1], (
        "Intel MPI now keeps its default where the table names nothing: update impi.py")


def test_condition_string_and_files(tmp_path):
    lib = get_library("impi")
    assert impi.condition_string(TABLE, lib, procs=4) == \
        "0:0-63;8:64-4095;7:4096-65535;0:65536-2147483647"
    assert impi.condition_string(TABLE, lib, procs=5) == ""  # no rule at P=5: leave it unset
    with pytest.raises(ValueError, match="write_json"):
        impi.condition_string(TABLE, lib)  # size rules at one P only: not expressible

    everywhere = Table("impi", (Rule(1, None, 0, 4096, "recursive_doubling"),
                                Rule(1, None, 4096, None, "ring")))
    assert impi.condition_string(everywhere, lib) == "1:0-4095;8:4096-2147483647"
    assert impi.check(everywhere, lib) == []
    env = impi.write(everywhere, lib, tmp_path / "a")
    assert env == {"I_MPI_ADJUST_ALLREDUCE": "1:0-4095;8:4096-2147483647"}
    text = (tmp_path / "a" / impi.ENV_FILE).read_text()
    assert text.startswith("#")
    assert "export I_MPI_ADJUST_ALLREDUCE='1:0-4095;8:4096-2147483647'\n" in text

    per_p = Table("impi", (Rule(1, 3, 0, None, "ring"), Rule(4, 4, 0, None, "shumilin_ring"),
                           Rule(5, None, 0, None, "recursive_doubling")))
    assert impi.condition_string(per_p, lib) == \
        "8:0-2147483647@1-3;7:0-2147483647@4-4;1:0-2147483647@5-2147483647"

    env = impi.write(TABLE, lib, tmp_path / "b")
    assert env == {"I_MPI_TUNING": str((tmp_path / "b" / impi.JSON_FILE).resolve())}
    doc = json.loads((tmp_path / "b" / impi.JSON_FILE).read_text())
    assert doc == {"coll=Allreduce": {"ppn=-1": {
        "comm_size=3": {"comm_id=-1": {"msg_size=-1": {"ALLREDUCE=0": {}}}},
        "comm_size=4": {"comm_id=-1": {"msg_size=63": {"ALLREDUCE=0": {}},
                                       "msg_size=4095": {"ALLREDUCE=8": {}},
                                       "msg_size=65535": {"ALLREDUCE=7": {}},
                                       "msg_size=-1": {"ALLREDUCE=0": {}}}},
        "comm_size=-1": {"comm_id=-1": {"msg_size=-1": {"ALLREDUCE=0": {}}}}}}}
    sizes = list(doc["coll=Allreduce"]["ppn=-1"]["comm_size=4"]["comm_id=-1"])
    assert sizes == ["msg_size=63", "msg_size=4095", "msg_size=65535", "msg_size=-1"]  # order
    assert len(impi.check(TABLE, lib)) == 4  # P<4, P>4, and two size ranges at P=4

    empty = Table("impi", ())
    assert impi.condition_string(empty, lib) == ""
    assert impi.write(empty, lib, tmp_path / "c") == {}
    assert "export" not in (tmp_path / "c" / impi.ENV_FILE).read_text()
    assert impi.write_json(empty, lib, tmp_path / "c") == {}

    with pytest.raises(ValueError, match="overlapping"):
        impi.condition_string(Table("impi", (Rule(1, None, 0, 100, "ring"),
                                             Rule(1, None, 50, None, "ring_alt"))), lib)
    with pytest.raises(KeyError, match=r"'no_such' is not a forced algorithm of the impi catalogue"):
        impi.condition_string(Table("impi", (Rule(1, None, 0, None, "no_such"),)), lib)

    assert impi.autotuner_env(3, 2) == {
        "I_MPI_TUNING_MODE": "auto", "I_MPI_TUNING_AUTO": "1",
        "I_MPI_TUNING_AUTO_ITER_NUM": "3", "I_MPI_TUNING_AUTO_WARMUP_ITER_NUM": "2",
        "I_MPI_TUNING_AUTO_ITER_POLICY": "0", "I_MPI_TUNING_AUTO_SYNC": "1"}
    with pytest.raises(ValueError, match=r"iterations >= 1 and warmup >= 0 needed, not 0, 1"):
        impi.autotuner_env(0, 1)


AUTOTUNE_SCRIPT = """
import hashlib, sys
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
count, calls = int(sys.argv[1]), int(sys.argv[2])
mine = np.random.default_rng(7 + comm.rank).standard_normal(count)
exact = sum(np.random.default_rng(7 + r).standard_normal(count) for r in range(comm.size))
ok = []
for i in range(calls):
    out = np.empty_like(mine)
    comm.Allreduce(mine, out, MPI.SUM)
    ok.append(bool(np.allclose(out, exact, rtol=1e-12, atol=1e-12)))
    if comm.rank == 0:
        print("CALL", i, hashlib.sha1(out.tobytes()).hexdigest()[:16], flush=True)
oks = comm.gather(all(ok), root=0)
if comm.rank == 0:
    print("CORRECT", int(all(oks)), flush=True)
"""


def test_autotuner_env_runs_tries_presets_and_settles(tmp_path):
    script = tmp_path / "autotune.py"
    script.write_text(AUTOTUNE_SCRIPT)
    iterations, warmup, calls = 1, 1, 70
    proc = _mpiexec([sys.executable, str(script), "16", str(calls)],
                    impi.autotuner_env(iterations, warmup))
    assert "CORRECT 1" in proc.stdout, proc.stdout[-2000:]
    seq = re.findall(r"^CALL \d+ (\S+)$", proc.stdout, re.M)
    assert len(seq) == calls
    tuning = 19 * (iterations + warmup)  # the presets seen at P=4, 16 doubles (2021.18)
    assert len(set(seq[:tuning])) >= 3, "the autotuner did not try other algorithms"
    assert len(set(seq[tuning + 5:])) == 1, "the autotuner did not settle"
