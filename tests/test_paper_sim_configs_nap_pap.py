"""The simulated paper-scale configs of the node-aware and PAP papers (config/sim-nap.yaml,
config/sim-pap.yaml): each validates and plans (Campaign, no simulation), its experiments name
its platform, and its cells are the ones its header promises."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from harness.campaign.workflow import Campaign
from harness.simulate import loader

REPO = Path(__file__).resolve().parents[1]

needs_simgrid = pytest.mark.skipif(loader.available() is not None,
                                   reason=f"SimGrid: {loader.available()}")


def campaign(name: str, results_root) -> Campaign:
    path = REPO / "config" / name
    return Campaign(yaml.safe_load(path.read_text()), str(path))


def cells(c: Campaign) -> list:
    return [cell for r in c.runs.values() for cell in r.cells]


@pytest.mark.parametrize("name, paper", [("sim-nap.yaml", "Node-aware improvements to allreduce"),
                                          ("sim-pap.yaml", "imbalanced process arrival")])
def test_the_header_says_what_it_reproduces_and_how_to_run_it(name, paper):
    text = (REPO / "config" / name).read_text()
    head = text.split("campaign:")[0]
    assert paper in head and f"--configfile config/{name}" in head
    assert "HARNESS_LAUNCH_LOCK" in head and "Measured here" in head


@needs_simgrid
def test_sim_nap_plans_rd_smp_nap_up_to_4096_at_16_per_node(results_root):
    c = campaign("sim-nap.yaml", results_root)
    assert c.cfg.campaign == "sim-nap" and not c.not_applicable
    all_cells = cells(c)
    assert len(all_cells) == 43 and len(c.runs) == 8
    assert {r.library for r in c.runs.values()} == {"mpich@bluewaters"}
    assert all(r.platform for r in c.runs.values())
    by_alg = Counter(x.algorithm for x in all_cells)
    assert by_alg == {"recursive_doubling": 13, "smp": 13, "nap": 13,
                      "native:smp": 2, "native:auto": 2}
    at_4096 = sorted({x.size for x in all_cells if x.procs == 4096})
    assert at_4096 == [8, 64, 512, 2048, 4096, 16384]
    assert max(r.procs for r in c.runs.values()) == 4096
    # the run at P = 4096 fits the ~8 GB a run may take here
    big = next(r for r in c.runs.values() if r.procs == 4096)
    assert c.memory_mb(big) < 12000


@needs_simgrid
def test_sim_pap_plans_tables_3_4_and_fig_12(results_root):
    c = campaign("sim-pap.yaml", results_root)
    assert c.cfg.campaign == "sim-pap" and not c.not_applicable
    all_cells = cells(c)
    assert len(all_cells) == 102 and len(c.runs) == 7
    assert {r.library for r in c.runs.values()} == {"openmpi@tryton"}
    assert sorted(r.procs for r in c.runs.values()) == [4, 8, 16, 24, 32, 40, 48]
    assert {x.algorithm for x in all_cells} == {"ring", "rabenseifner", "slt", "prr"}
    assert {x.delay for x in all_cells} == {"none", "one-late", "rand-late"}
    assert max(x.max_delay for x in all_cells) == pytest.approx(1.0)
    assert all("compute" in dict(x.params) for x in all_cells)   # the PAP report's rows
    table3 = [x for x in all_cells if x.procs == 48 and x.size == 4 << 20
              and x.delay in ("none", "one-late")]
    assert Counter(x.algorithm for x in table3) == {"ring": 8, "rabenseifner": 8, "slt": 8,
                                                    "prr": 8}
    assert max(x.size for x in all_cells) == 4 << 20   # 4 M and 8 M floats left out (memory)
    rand = [x for x in all_cells if x.delay == "rand-late"]
    assert len(rand) == 14 and {x.size for x in rand} == {4 << 20}
    assert max(c.memory_mb(r) for r in c.runs.values()) < 8000
