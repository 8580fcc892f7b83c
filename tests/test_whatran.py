"""What the library ran (harness whatran): rank 0 under gdb, a breakpoint on each collective
function of its libmpi (found in the symbol tables, or from the __func__ strings of a stripped
MPICH), one allreduce per size; and the catalogue verified per installation with it."""

import os
import subprocess

import pytest
import yaml
from conftest import HARNESS, REPO

from harness import libraries
from harness.measure import functions, preflight
from harness.measure.whatran import whatran

pytestmark = pytest.mark.skipif(subprocess.run(["which", "gdb"], capture_output=True).returncode,
                                reason="gdb is not installed (bash .ci/debian-mpi.sh)")

FORCED = [(lib, alg, procs) for lib in ("mpich", "openmpi", "impi")
          for alg in ("ring", "recursive_doubling") for procs in (2, 3)]


@pytest.mark.parametrize("lib,alg,procs", FORCED, ids=[f"{a}-{b}-P{c}" for a, b, c in FORCED])
def test_a_forced_algorithm_is_seen_running(lib, alg, procs):
    installation = libraries.get_library(lib)
    found = whatran(installation, preflight.environment(installation), procs, [56, 1 << 20],
                    algorithm=f"native:{alg}")
    assert [r["size"] for r in found] == [56, 1 << 20]
    for r in found:
        assert r["status"] == "identified" and r["ran"][0] == alg, r
        assert all(hits == 1 for _, hits in r["functions"]), r  # one call: each function once


def test_a_composition_counts_its_parts_and_auto_is_named():
    impi = libraries.get_library("impi")
    found = whatran(impi, preflight.environment(impi), 3, [1 << 20], algorithm="native:reduce_bcast")
    names = [n for n, _ in found[0]["functions"]]
    assert any(n.startswith("MPIR_Reduce_intra_") for n in names)
    assert any(n.startswith("MPIR_Bcast_intra_") for n in names)
    assert found[0]["ran"][0] == "reduce_bcast"
    ompi = libraries.get_library("openmpi")  # Open MPI's fixed rules at P=3 (docs/catalogue.md)
    auto = whatran(ompi, preflight.environment(ompi), 3, [56, 1 << 20])
    assert [r["ran"][0] for r in auto] == ["recursive_doubling", "rabenseifner"]


def test_stripped_mpich_functions_are_found_from_their_names():
    lib = libraries.get_library("mpich")
    t = functions.table(lib.libmpi_path(), r"MPIR_Allreduce_intra_\w+")
    assert "from their __func__ strings" in t["how"]
    # the offsets found by hand for the 5.0.2 wheel (docs/catalogue.md)
    assert t["functions"]["MPIR_Allreduce_intra_ring"] == 0x213640
    assert t["functions"]["MPIR_Allreduce_intra_recursive_doubling"] == 0x20DED0


def test_verification_refuses_an_algorithm_whose_forcing_variable_is_wrong(tmp_path):
    """A catalogue whose MPICH ring is forced with recursive doubling's value: the
    verification sees recursive doubling run, keeps the verdict, and the plan refuses ring
    (with that catalogue only: the verdict holds for the environment it was found with)."""
    doc = yaml.safe_load((REPO / "harness" / "data" / "libraries.yaml").read_text())
    doc["mpich"]["algorithms"]["ring"]["env"]["MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"] = \
        "recursive_doubling"
    bad = tmp_path / "libraries.yaml"
    bad.write_text(yaml.safe_dump(doc))
    env = {**os.environ, "HARNESS_CATALOGUE": str(bad), "HARNESS_RESULTS": str(tmp_path / "r")}
    out = subprocess.run(HARNESS + ["algorithms", "--verify", "--library", "mpich", "--algorithm",
                                    "native:ring"], env=env, capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert ("verify mpich native:ring: wrong: at P=2 56B it ran MPIR_Allreduce_intra_recursive_doubling"
            in out.stdout.replace("MPIDI_Allreduce_allcomm_composition_json, ", "")), out.stdout
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"campaign": "v", "experiments": {"e": {
        "libraries": ["mpich"], "algorithms": ["native:ring"], "procs": [2], "sizes": ["8B"]}}}))
    plan = subprocess.run(HARNESS + ["plan", "--config", str(cfg)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert plan.returncode == 2
    assert "'native:ring' matches no algorithm of mpich (refused: its wrong: at P=2 56B it ran" in plan.stderr
    env.pop("HARNESS_CATALOGUE")  # the real catalogue's ring is not touched by that verdict
    ok = subprocess.run(HARNESS + ["plan", "--config", str(cfg)], env=env, capture_output=True,
                        text=True, timeout=120, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
