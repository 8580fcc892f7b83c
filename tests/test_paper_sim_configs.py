"""The simulated paper configs (config/sim-suara.yaml, config/sim-castello.yaml) validate and
plan: their platforms resolve, their experiments expand into the cells and runs their headers
describe, every cell is simulated on the paper's platform. No simulation runs (a second or two)."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml
from conftest import REPO

from harness.campaign.workflow import Campaign
from harness.simulate import loader

needs_simgrid = pytest.mark.skipif(loader.available() is not None,
                                   reason=f"SimGrid: {loader.available()}")


def campaign(name: str, tmp_path, monkeypatch) -> Campaign:
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    path = REPO / "config" / name
    return Campaign(yaml.safe_load(path.read_text()), source=str(path))


@needs_simgrid
def test_sim_suara_plans(tmp_path, monkeypatch):
    c = campaign("sim-suara.yaml", tmp_path, monkeypatch)
    runs = list(c.runs.values())
    assert {r.library for r in runs} == {"openmpi@shaheen"}
    # one run per P: 16 .. 1024
    assert sorted(r.procs for r in runs) == [16, 32, 64, 128, 256, 512, 1024]
    assert len({r.platform for r in runs}) == 1 and all(r.platform for r in runs)
    cells = [cell for r in runs for cell in r.cells]
    # segmented_ring below P x 64 KiB is outside its catalogue condition: not applicable
    not_applicable = [cell for n in c.not_applicable.values() for cell in n.run.cells]
    assert len(cells) == 248 and len(not_applicable) == 25
    assert {cell.algorithm for cell in not_applicable} == {"native:segmented_ring"}
    algs = Counter(cell.algorithm for cell in cells)
    assert algs["suara2"] == 58 + 8 and algs["three_step"] == 10 and algs["native:auto"] == 29
    assert algs["native:nonoverlapping"] == 23  # left out at P >= 512 (SMPI too slow)
    assert max(cell.size for cell in cells if cell.procs == 1024) == 512 << 10
    # memory asked of a scheduler stays within what the header promises (6 GB per run)
    assert max(c.memory_mb(r) for r in runs) < 6 * 1024 * 1.25
    p = c.cfg.platforms["shaheen"]
    assert p.platform["latency"] == pytest.approx(1.5e-6)
    assert p.platform["bandwidth"] == pytest.approx(1 / 6.25e-11)
    assert p.reduce_rate == pytest.approx(1 / 2e-10)
    assert p.platform["cores_per_node"] == 1 and p.platform["nodes"] == 1024


@needs_simgrid
def test_sim_castello_plans(tmp_path, monkeypatch):
    c = campaign("sim-castello.yaml", tmp_path, monkeypatch)
    runs = list(c.runs.values())
    assert {r.library for r in runs} == {"mpich@altec16", "openmpi@altec16", "impi@altec16"}
    assert sorted(r.procs for r in runs) == [7, 7, 7, 8, 8, 8, 16, 16, 16]
    cells = [cell for r in runs for cell in r.cells]
    assert len(cells) == 1061
    assert {cell.algorithm for cell in cells if cell.library == "mpich@altec16"} == {
        "native:auto", "native:smp", "native:recursive_doubling",
        "native:reduce_scatter_allgather", "native:ring"}
    assert max(cell.size for cell in cells) == 128 << 20
    p = c.cfg.platforms["altec16"]
    assert p.platform["latency"] == pytest.approx(2e-6)
    assert p.platform["bandwidth"] == pytest.approx(11.77e9)
    assert p.platform["cores_per_node"] == 1  # one rank per node, as the paper maps them


def test_suara_report_fits_and_labels_a_simulated_openmpi(tmp_path):
    """A campaign whose Open MPI is simulated (openmpi@<platform>) only: the SUARA report fits
    the Hockney pairs to those native cells (not the paper's Table 4) and labels the rows as
    simulated."""
    import pandas as pd
    from test_report_suara import TRUE, synthetic

    from harness import models
    from harness.report import suara

    path = synthetic(tmp_path)
    d = pd.read_csv(path)
    d["library"], d["library_version"] = "openmpi@flat", "Open MPI 4.1.2"
    d.to_csv(path, index=False)
    params, how = suara.fitted_params(path, gamma=TRUE.gamma)
    assert how == "fitted to this campaign's openmpi@flat cells (simulated)"
    for a in models.ALL6:
        assert params.ab[a][0] == pytest.approx(TRUE.ab[a][0], rel=1e-6)
    rows = suara._load(path)
    choice = suara.choice_table(rows, params)
    assert set(choice["library"]) == {"openmpi@flat (simulated Open MPI 4.1.2)"}
    assert len(suara.model_table(rows, params)) > 0
