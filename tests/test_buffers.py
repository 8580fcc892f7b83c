"""The buffers' cache state as a cell dimension (``buffers: reuse | rotate``,
``harness/measure/buffers.py``): the rotation's slots, cells that keep their ids, verified
results in both timing modes, a wrong result caught in rotation, and inputs it cannot take."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import FAST, PLUGIN, execute_run, harness
from test_report import row

from harness.analysis.auto_vs_best import auto_vs_best
from harness.campaign.config import load
from harness.campaign.plan import expand as plan_runs
from harness.cells import Cell
from harness.errors import ConfigError
from harness.measure.buffers import Rotation, check
from harness.memory import PAGE, last_level_cache
from harness.results.store import SUMMARY_COLUMNS


def fake_sysfs(tmp_path, caches):
    for i, (level, kind, size) in enumerate(caches):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    return tmp_path


def test_the_last_level_cache_is_the_largest_data_cache(tmp_path):
    sysfs = fake_sysfs(tmp_path, [(1, "Data", "32K"), (1, "Instruction", "64M"),
                                  (2, "Unified", "512K"), (3, "Unified", "32768K")])
    assert last_level_cache(sysfs) == (32 * 2**20, f"{sysfs}/index*/size")
    empty = tmp_path / "none"
    empty.mkdir()
    assert last_level_cache(empty) == (32 * 2**20, "not found in sysfs: 32 MiB assumed")


@pytest.mark.parametrize("count", [0, 1, 7, 513, 2**17 + 3])
def test_slots_exceed_the_cache_each_on_its_own_pages(count):
    send = np.arange(count, dtype=np.float64)
    rot = Rotation(send, -1.0, llc=2**20)
    assert rot.slots * rot.stride >= 2**20 and rot.slots >= 2 and rot.stride % PAGE == 0
    seen = set()
    for k in (0, 1, rot.slots - 1, rot.slots, 3 * rot.slots + 2):
        s, r = rot.pair(k)
        assert s.ctypes.data % PAGE == 0 and r.ctypes.data % PAGE == 0
        assert np.array_equal(s, send) and (r == -1.0).all() and len(r) == count
        seen.add((k % rot.slots, s.ctypes.data))
    assert len({a for _, a in seen}) == len({k for k, _ in seen})  # one address per slot
    if count:
        r = rot.pair(5)[1]
        r[:] = 3.0
        rot.refill(5 + rot.slots)  # the same slot, a turn later
        assert (rot.pair(5)[1] == -1.0).all()


def test_a_reused_cell_keeps_its_id_and_a_rotated_one_gets_its_own():
    reuse = Cell("mpich", "native:auto", 2, 4096)
    assert reuse.cell_id == Cell("mpich", "native:auto", 2, 4096, buffers="reuse").cell_id
    assert "buffers" not in reuse.key() and reuse.to_dict()["buffers"] == "reuse"
    rotated = Cell("mpich", "native:auto", 2, 4096, buffers="rotate")
    assert rotated.cell_id != reuse.cell_id
    assert Cell.from_dict(rotated.to_dict()) == rotated


def test_rotation_refuses_what_it_cannot_move():
    check("native:auto", (), "rotate")
    with pytest.raises(ValueError, match="buffers must be one of reuse, rotate, got 'cold'"):
        check("native:auto", (), "cold")
    with pytest.raises(ValueError, match="not to pingpong"):
        check("pingpong", (), "rotate")
    with pytest.raises(ValueError, match="training iteration"):
        check("native:auto", (("workload", "resnet50"),), "rotate")


def test_rotated_cells_are_verified_in_both_timing_modes(results_root):
    """MPICH, every cell on rotated buffers: at P = 3 AUTO and harness algorithms per call,
    counts 1, 7 and 64 KiB + 1 element (not divisible by P); at P = 2 (IMB's loop at P = 3
    oversubscribes two cores for a minute a cell) IMB-style."""
    cells = {3: [Cell("mpich", alg, 3, n * 8, buffers="rotate")
                 for alg in ("native:auto", "ring", "rabenseifner", "shm") for n in (1, 7, 8193)],
             2: [Cell("mpich", alg, 2, n * 8, buffers="rotate", timing="imb")
                 for alg in ("native:auto", "ring") for n in (1, 8193)]}
    for procs, some in cells.items():
        outcome, doc, _ = execute_run(results_root, "mpich", some)
        assert outcome == "complete", doc
        for entry in doc["cells"]:
            assert entry["status"] in ("ok", "not-converged"), entry
            rot = entry["record"]["rotation"]
            assert rot["slots"] * rot["stride"] >= rot["last_level_cache"] > 0
            assert entry["cell"]["buffers"] == "rotate"
        assert len(doc["cells"]) == len(some)


def test_a_wrong_result_on_rotated_buffers_is_recorded_wrong(results_root):
    out = harness("run", "--library", "mpich", "--algorithm", "test:wrong", "--plugin", PLUGIN,
                  "--procs", "2", "--size", "1KiB", "--buffers", "rotate", *FAST)
    assert out.returncode == 1, out.stderr
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert list(df.status) == ["wrong"] and df.buffers[0] == "rotate"


def test_bad_buffers_are_named_before_any_launch(results_root, tmp_path):
    out = harness("run", "--library", "mpich", "--algorithm", "pingpong", "--procs", "2",
                  "--size", "1KiB", "--buffers", "rotate", *FAST)
    assert out.returncode == 2 and "argument --buffers: buffers: rotate applies to allreduce " \
                                   "calls, not to pingpong" in out.stderr, out.stderr
    assert not (results_root / "adhoc").exists()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"campaign": "b", "experiments": {"pp": {
        "libraries": ["mpich"], "algorithms": ["pingpong"], "procs": [2], "sizes": ["1KiB"],
        "buffers": "rotate"}}}))
    with pytest.raises(ConfigError, match="experiments.pp: buffers: rotate applies"):
        plan_runs(load(cfg))
    cfg.write_text(yaml.safe_dump({"campaign": "b", "experiments": {"e": {
        "libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2], "sizes": ["1KiB"],
        "buffers": "cold"}}}))
    with pytest.raises(ConfigError, match="buffers"):
        load(cfg)


def test_the_report_splits_by_buffers_where_both_exist():
    rows = [row("mpich", alg, 2**20, t, procs=2, buffers=b, cell_id=f"{alg}{b}")
            for b, ts in (("reuse", (2e-4, 1e-4)), ("rotate", (3e-4, 3.1e-4)))
            for alg, t in zip(("native:auto", "native:ring"), ts)]
    table = auto_vs_best(pd.DataFrame(rows, columns=SUMMARY_COLUMNS))
    assert "buffers" in table.columns and list(table.buffers) == ["reuse", "rotate"]
    assert list(table.verdict) == ["BEST faster", "AUTO is BEST"]
    assert json.dumps(list(table.best_algorithm)) == '["native:ring", "native:auto"]'
