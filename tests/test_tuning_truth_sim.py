"""config/tuning-truth-sim.yaml, the simulated tuning truth (docs/tuning.md), validates and
plans without simulating anything: two platforms, the three families as SMPI's copies
(<family>@<platform>), eight P, seven sizes, every native algorithm SMPI copies (the rest
not-applicable), and no stage that launches MPI."""

from __future__ import annotations

import collections
from dataclasses import replace

import pytest
import yaml
from conftest import REPO

from harness.campaign.workflow import Campaign
from harness.simulate import loader

CONFIG = REPO / "config" / "tuning-truth-sim.yaml"
PROCS = [4, 8, 12, 16, 32, 48, 64, 128]
SIZES = [4096, 16384, 65536, 262144, 1 << 20, 2 << 20, 4 << 20]
# algorithms SMPI copies per family, AUTO included (harness/data/libraries.yaml, smpi:)
ALGORITHMS = {"openmpi": 7, "mpich": 5, "impi": 10}
APPLIES = "not applicable: the catalogue requires"

pytestmark = pytest.mark.skipif(loader.available() is not None,
                                reason=f"SimGrid: {loader.available()}")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("HARNESS_RESULTS", str(tmp_path_factory.mktemp("results")))
    try:
        yield Campaign(yaml.safe_load(CONFIG.read_text()), source=str(CONFIG))
    finally:
        mp.undo()


def test_the_simulated_truth_plans_every_family_on_both_platforms(campaign):
    cfg = campaign.cfg
    assert cfg.campaign == "tuning-truth-sim"
    assert sorted(cfg.platforms) == ["flat", "smp16"]
    assert cfg.platforms["flat"].platform["cores_per_node"] == 1
    assert cfg.platforms["smp16"].platform["cores_per_node"] == 16
    assert cfg.tune.get("surrogate") == "forest" and not cfg.tune.get("enabled")
    cells = collections.defaultdict(set)
    nodes = collections.defaultdict(set)
    # the whole matrix: the simulated runs and the cells outside their algorithm's condition
    # (catalogue's applies, or no SMPI copy), recorded not-applicable, never simulated
    # the matrix SMPI can copy: the simulated runs and the cells outside their algorithm's
    # catalogue condition (applies), recorded not-applicable and never simulated; not those
    # SMPI has no copy of
    outside = [replace(n.run, cells=tuple(c for c in n.run.cells
                                          if n.reasons[c.cell_id].startswith(APPLIES)))
               for n in campaign.not_applicable.values()]
    assert any(r.cells for r in outside)
    for run in [*campaign.runs.values(), *outside]:
        assert run.platform, f"{run.library}: a run of the simulated truth is not simulated"
        for c in run.cells:
            assert c.kind == "native" and c.delay == "none" and c.dtype == "float32"
            cells[c.library].add((c.procs, c.size, c.algorithm))
            nodes[c.library].add((c.procs, c.nodes))
    expected = {f"{family}@{platform}": n * len(PROCS) * len(SIZES)
                for family, n in ALGORITHMS.items() for platform in ("flat", "smp16")}
    assert {lib: len(v) for lib, v in cells.items()} == expected
    for lib, got in cells.items():
        assert sorted({p for p, _, _ in got}) == PROCS and sorted({s for _, s, _ in got}) == SIZES
    assert all(n == p for p, n in nodes["openmpi@flat"])  # one rank per node
    assert sorted(nodes["mpich@smp16"]) == [(p, -(-p // 16)) for p in PROCS]  # 16 per node


def test_nothing_in_it_launches_mpi(campaign):
    assert campaign.measured_runs() == []
    assert campaign.auto_ran_groups() == {}
    assert campaign.tune_libraries() == []
    # the algorithms SMPI has no copy of are decided not-applicable, never simulated
    skipped = {c.algorithm for na in campaign.not_applicable.values() for c in na.run.cells}
    assert "native:autotuner" not in {c.algorithm for r in campaign.runs.values() for c in r.cells}
    assert {"native:recexch", "native:tree", "native:nreduce"} <= skipped
