"""The catalogue's SMPI table (harness/simulate/natives.py): every native algorithm of every
family mapped to an SMPI algorithm or listed as unavailable with a reason; every mapped name
and every selector runs in SMPI; fat-tree and dragonfly platforms load in SMPI and in the
simulated communicator (harness/simulate/platform.py)."""

import pytest

from harness import libraries
from harness.errors import SmpiError, SmpiUnavailable
from harness.simulate import loader, natives, smpi
from harness.simulate.cell import simulate_sizes
from harness.simulate.platform import Platform

MISSING_SMPI = smpi.available()
MISSING = loader.available() or MISSING_SMPI
needs_smpi = pytest.mark.skipif(MISSING_SMPI is not None, reason=str(MISSING_SMPI))
needs_simgrid = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))

# SMPI's allreduce algorithms in SimGrid 3.32 (src/smpi/colls/smpi_coll.cpp), selectors aside
SMPI_ALLREDUCE = {"default", "lr", "rab1", "rab2", "rab_rdb", "rdb", "smp_binomial", "smp_binomial_pipeline",
                  "smp_rdb", "smp_rsag", "smp_rsag_lr", "smp_rsag_rab", "redbcast", "ompi_ring_segmented",
                  "mvapich2_rs", "mvapich2_two_level", "rab"}
SELECTORS = {"mpich": ("mpich", "MPICH 3.3b"), "openmpi": ("ompi", "Open MPI 4.1.2"),
             "impi": ("impi", "Intel MPI 4.1.3")}
SIZES = [4096, 1 << 20]
PLATFORMS = {8: Platform(nodes=4, cores_per_node=2), 6: Platform(nodes=3, cores_per_node=2)}


def test_table_is_complete():
    for family, lib in libraries.catalogue().items():
        block = natives.table(family)
        assert (block["selector"], block["copies"]) == SELECTORS[family]
        assert block["source"].startswith("src/smpi/colls/")
        entries = block["algorithms"]
        assert set(entries) == set(lib.algorithms) - {"auto"}, family
        for name, entry in entries.items():
            if entry["smpi"] is None:
                assert entry["why"], (family, name)
                with pytest.raises(SmpiUnavailable, match=rf"{family} native:{name} .*: {entry['why'][:20]}"):
                    natives.smpi_choice(family, f"native:{name}")
            else:
                assert entry["smpi"] in SMPI_ALLREDUCE and entry["note"], (family, name)
        assert natives.available(family) == ["native:auto"] + [
            f"native:{n}" for n, e in entries.items() if e["smpi"]]


def test_choices():
    auto = natives.smpi_choice("openmpi", "native:auto")
    assert (auto.selector, auto.algorithm) == ("ompi", None)
    assert auto.copies == "Open MPI 4.1.2 (SMPI's copy of its selection)"
    assert auto.cfg == ["--cfg=smpi/coll-selector:ompi"]
    ring = natives.smpi_choice("openmpi", "ring")
    assert (ring.selector, ring.algorithm, ring.copies) == (None, "lr", "SMPI lr (Open MPI ring)")
    assert "remainder" in ring.note
    linear = natives.smpi_choice("openmpi", "native:basic_linear")
    assert linear.cfg == ["--cfg=smpi/reduce:ompi_basic_linear", "--cfg=smpi/bcast:flattree",
                          "--cfg=smpi/allreduce:redbcast"]
    assert natives.smpi_choice("mpich", "native:auto").copies.startswith("MPICH 3.3b")
    with pytest.raises(SmpiUnavailable, match="mpich native:tree cannot be simulated by SMPI: pipelined"):
        natives.smpi_choice("mpich", "native:tree")
    assert isinstance(SmpiUnavailable("f", "a", "w"), ValueError)
    with pytest.raises(KeyError, match="valid: auto, nb, smp"):
        natives.smpi_choice("mpich", "native:bogus")
    with pytest.raises(KeyError, match="unknown family"):
        natives.smpi_choice("lam", "native:auto")


def _applies(family: str, name: str, procs: int, size: int) -> bool:
    entry = libraries.catalogue()[family].algorithms[name]
    return entry.not_applicable(size // 8, procs, 8) is None


@needs_smpi
@pytest.mark.parametrize("family", sorted(SELECTORS))
def test_mapped_algorithms_run(family):
    """Every mapped algorithm at P = 8 and 6 (two ranks per node), 4 KiB and 1 MiB, where the
    catalogue says the forced value runs it (Intel's rabenseifner: P a power of two; SMPI's rab1
    throws otherwise)."""
    ran = 0
    for native in natives.available(family)[1:]:
        choice = natives.smpi_choice(family, native)
        for procs, platform in PLATFORMS.items():
            sizes = [s for s in SIZES if _applies(family, choice.native, procs, s)]
            if not sizes:
                continue
            results = smpi.smpi_allreduce(choice, procs, sizes, platform=platform, timeout=120)
            assert [r.size for r in results] == sizes
            assert all(r.time > 0 and len(r.times) == procs for r in results), (native, procs)
            assert results[0].algorithm == choice.algorithm
            ran += 1
    assert ran >= 2 * (len(natives.available(family)) - 1) - 1


@needs_smpi
@pytest.mark.parametrize("family", sorted(SELECTORS))
def test_selectors_run(family):
    choice = natives.smpi_choice(family, "native:auto")
    for procs, platform in PLATFORMS.items():
        if family == "impi" and procs == 6:
            # SMPI's Intel MPI table picks rab1 (id 2) at some sizes whatever P; rab1 throws
            # at P not a power of two: the selector cannot run there
            with pytest.raises(SmpiError, match="selector:impi"):
                smpi.smpi_allreduce(choice, procs, [1 << 20], platform=platform, timeout=120)
            sizes = [4096]
        else:
            sizes = SIZES
        results = smpi.smpi_allreduce(choice, procs, sizes, platform=platform, timeout=120)
        assert all(r.time > 0 for r in results) and results[0].algorithm == f"selector:{choice.selector}"


@needs_smpi
def test_selector_and_algorithm_together():
    both = smpi.smpi_allreduce("rdb", 4, [4096], selector="ompi", platform=Platform(4))
    alone = smpi.smpi_allreduce("rdb", 4, [4096], platform=Platform(4))
    assert both[0].algorithm == "rdb+selector:ompi" and both[0].time == pytest.approx(alone[0].time)
    with pytest.raises(ValueError, match="an algorithm, a selector, or both"):
        smpi.smpi_allreduce(None, 4, [4096])


FAT_TREE = Platform(16, topology="fat-tree", topo_parameters="2;4,4;1,1;1,1")  # 4:1 at the leaves
DRAGONFLY = Platform(24, topology="dragonfly", topo_parameters="2,1;2,1;3,1;2")


def test_topologies_validate():
    assert Platform(8).digest() == "6f36bcf37751"  # the flat cluster's file is unchanged
    assert Platform(3, 4).digest() == "399351a3c7da"
    assert 'topology="FAT_TREE" topo_parameters="2;4,4;1,1;1,1"' in FAT_TREE.xml()
    assert 'topology="DRAGONFLY"' in DRAGONFLY.xml() and FAT_TREE.digest() != Platform(16).digest()
    with pytest.raises(ValueError, match=r"platform nodes: 15 .* which make 16 nodes"):
        Platform(15, topology="fat-tree", topo_parameters="2;4,4;1,1;1,1")
    with pytest.raises(ValueError, match=r"topo_parameters: '2;4,4;1' is not a fat-tree's; expected 'LEVELS"):
        Platform(16, topology="fat-tree", topo_parameters="2;4,4;1")
    with pytest.raises(ValueError, match=r"topo_parameters: '2,1;2,1;3;2' is not a dragonfly's; expected"):
        Platform(12, topology="dragonfly", topo_parameters="2,1;2,1;3;2")
    with pytest.raises(ValueError, match=r"topology: 'torus' is not one of cluster, fat-tree, dragonfly"):
        Platform(4, topology="torus")
    with pytest.raises(ValueError, match=r"topo_parameters: 'x' given for topology 'cluster'"):
        Platform(4, topo_parameters="x")


@needs_simgrid
def test_topologies_load_in_smpi_and_the_simulation():
    """Both engines load a fat-tree and a dragonfly; across the oversubscribed fat-tree's core
    (and the dragonfly's longer routes) a large allreduce is slower than on the flat switch."""
    sizes = [4096, 1 << 22]
    flat = smpi.smpi_allreduce("rdb", 16, sizes, platform=Platform(16))
    tree = smpi.smpi_allreduce("rdb", 16, sizes, platform=FAT_TREE)
    dragon = smpi.smpi_allreduce("rdb", 16, sizes, platform=DRAGONFLY)
    assert tree[1].time > 1.5 * flat[1].time and dragon[1].time > flat[1].time
    assert tree[0].platform_digest == FAT_TREE.digest()
    for platform, ref in ((FAT_TREE, tree), (DRAGONFLY, dragon)):
        sim = simulate_sizes("recursive_doubling", 16, sizes, "float64", "sum", platform)
        assert all(s.ok for s in sim)
        assert sim[1].time == pytest.approx(ref[1].time, rel=0.05)


@needs_smpi
def test_smpi_results_are_checked_on_every_rank_and_a_wrong_one_is_caught(monkeypatch):
    """SMPI's result is checked against the reduction's closed form on every rank, for each
    dtype and op; a result spoilt on purpose (HARNESS_SMPI_BREAK_RANK) is named as wrong."""
    from harness.simulate.platform import Platform
    from harness.simulate.smpi import smpi_allreduce

    for dtype, op in (("float64", "sum"), ("float32", "max"), ("int32", "min"), ("int64", "prod")):
        res = smpi_allreduce("rdb", 7, [0, 8 * 5, 8 * 1001], dtype, op, Platform(nodes=7))
        assert [r.ok for r in res] == [True] * 3
    monkeypatch.setenv("HARNESS_SMPI_BREAK_RANK", "3")
    res = smpi_allreduce("lr", 6, [8, 8 * 1001], "float64", "sum", Platform(nodes=6))
    assert [r.wrong_ranks for r in res] == [[3], [3]] and not any(r.ok for r in res)
