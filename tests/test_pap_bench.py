"""The PAP benchmark through the bench (real MPI launches): arrival knowledge handed to SLT
and PRR (oracle and online), the online estimate against the injected delay, correct results
under every delay mode, the record, and bad parameters."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import FAST, execute_run, fast_settings, harness

from harness.cells import Cell
from harness.delays import DELAY_MODES

# The online estimate against the injected delay (P = 4 on 2 cores, one-late 50 ms): the
# estimate scales the time to edge(0.5) by 2, so a rank woken late at its edge by a loaded
# machine is estimated twice that late; single errors reach tens of ms at load averages far
# beyond the cores. What it promises, and is checked: the late rank is the one estimated
# late, by the injected delay within a factor of two, and the typical error is well below it.
DELAY = 0.050


def _raw(store, doc, cell_id):
    raw = pq.read_table(store.raw(doc["run_id"])).to_pandas()
    return raw[raw.cell_id == cell_id]


def test_online_estimate_matches_the_injected_delay(results_root):
    out = harness("run", "--library", "openmpi", "--algorithm", "prr", "--procs", "4",
                  "--size", "512KiB", "--delay", "one-late", "--max-delay", f"{DELAY * 1e3:g}ms",
                  "--param", "knowledge=online", "--param", "compute=20ms",
                  "--min-reps", "10", "--max-reps", "10", "--warmup", "1", "--campaign", "online")
    assert out.returncode == 0, out.stdout + out.stderr
    store_dir = results_root / "online"
    doc = json.loads(next((store_dir / "runs").glob("*.json")).read_text())
    (cell,) = doc["cells"]
    raw = pq.read_table(next((store_dir / "raw").glob("*.parquet"))).to_pandas()
    rec = cell["record"]
    assert cell["status"] in ("ok", "not-converged")
    assert rec["knowledge"] == "online" and rec["tau_source"] == "measured" and rec["tau"] > 0
    assert rec["base_compute"] == pytest.approx(DELAY + 0.020)  # max delay + compute (Fig. 9 l. 3)
    est = np.stack(raw.arrival_estimate.to_numpy())
    measured = np.stack(raw.arrival.to_numpy())
    err = np.stack(raw.estimate_error.to_numpy())
    assert est.shape == (10, 4)
    np.testing.assert_allclose(err, est - measured, atol=1e-9)
    assert rec["estimate_error_ms_median"] == pytest.approx(np.median(np.abs(err)) * 1e3)
    errors_ms = np.round(err * 1e3, 1).tolist()
    # rank 1 is the one estimated latest in the median repetition ...
    assert int(np.argmax(np.median(est - est.min(axis=1, keepdims=True), axis=0))) == 1, errors_ms
    # ... by the injected delay within a factor of two ...
    lateness = float(np.median(est[:, 1] - np.delete(est, 1, axis=1).mean(axis=1)))
    assert 0.5 * DELAY <= lateness <= 2 * DELAY, (lateness, errors_ms)
    # ... and the typical estimate is off by less than half the delay
    assert float(np.median(np.abs(err))) < 0.5 * DELAY, errors_ms


def test_every_delay_mode_and_knowledge_is_correct(results_root):
    """P = 3, 1025 doubles (not divisible by P), every delay mode, SLT and PRR with oracle,
    online and no knowledge: every repetition verified; PRR with tau set records it."""
    cells = []
    for alg in ("slt", "prr"):
        for knowledge in ("oracle", "online", "none"):
            for mode in DELAY_MODES:
                params = (("compute", "5ms"), ("knowledge", knowledge))
                if alg == "prr" and knowledge == "oracle":
                    params += (("tau", "100us"),)
                cells.append(Cell("openmpi", alg, 3, 8200, "float64", "sum", mode,
                                  0.0 if mode == "none" else 0.004,
                                  1 if mode == "one-late" else 0, 1, tuple(sorted(params))))
    outcome, doc, store = execute_run(results_root, "openmpi", cells)
    assert outcome == "complete"
    by_id = {c["cell_id"]: c for c in doc["cells"]}
    for cell in cells:
        entry = by_id[cell.cell_id]
        assert entry["status"] in ("ok", "not-converged"), entry
        rec = entry["record"]
        knowledge = dict(cell.params)["knowledge"]
        assert rec["knowledge"] == knowledge
        assert rec["base_compute"] == pytest.approx(cell.max_delay + 0.005)
        raw = _raw(store, doc, cell.cell_id)
        if knowledge == "none":
            assert "estimate_error_ms_median" not in rec
            continue
        assert rec["estimate_error_ms_median"] >= 0
        if knowledge == "oracle":
            # the oracle hands over the planned arrivals: common start + base + injected delay
            for est, delay in zip(raw.arrival_estimate, raw.delay):
                np.testing.assert_allclose(np.diff(est), np.diff(delay), atol=1e-9)
        if cell.algorithm == "prr":
            assert rec["tau_source"] == ("setting" if knowledge == "oracle" else "measured")
            if knowledge == "oracle":
                assert rec["tau"] == pytest.approx(1e-4)


def test_bad_knowledge_parameters_fail_the_cell_with_a_message(results_root):
    cells = [Cell("openmpi", "prr", 2, 4096, params=(("knowledge", "psychic"),)),
             Cell("openmpi", "ring", 2, 4096, params=(("knowledge", "online"),)),
             Cell("openmpi", "slt", 2, 4096, params=(("compute", "soon"),)),
             Cell("openmpi", "slt", 2, 4096, params=(("edge", 1.5),)),
             Cell("openmpi", "prr", 2, 4096, params=(("tau", "fast"),)),
             Cell("openmpi", "ring", 2, 4096, params=(("compute", "1ms"),))]
    outcome, doc, _ = execute_run(results_root, "openmpi", cells, settings=fast_settings())
    assert outcome == "complete"
    errors = {c["cell_id"]: (c["status"], c.get("error") or "") for c in doc["cells"]}
    status, error = errors[cells[0].cell_id]
    assert status == "failed" and "knowledge" in error and "'psychic'" in error and "oracle" in error
    status, error = errors[cells[1].cell_id]
    assert status == "failed" and "knowledge=online" in error and "ring" in error
    status, error = errors[cells[2].cell_id]
    assert status == "failed" and "parameter compute" in error and "'soon'" in error
    status, error = errors[cells[3].cell_id]
    assert status == "failed" and "parameter edge" in error and "1.5" in error
    status, error = errors[cells[4].cell_id]
    assert status == "failed" and "tau" in error and "'fast'" in error
    # a classic algorithm in the PAP compute phase (the ring baseline) is fine
    assert errors[cells[5].cell_id][0] in ("ok", "not-converged")


def test_cells_without_pap_parameters_keep_the_plain_path(results_root):
    out = harness("run", "--library", "openmpi", "--algorithm", "ring", "--procs", "2",
                  "--size", "4KiB", "--delay", "one-late", "--max-delay", "2ms", *FAST)
    assert out.returncode == 0, out.stderr
    doc = json.loads(next((results_root / "adhoc" / "runs").glob("*.json")).read_text())
    assert doc["cells"][0]["record"] is None
    raw = pq.read_table(next((results_root / "adhoc" / "raw").glob("*.parquet")))
    assert "arrival_estimate" not in raw.column_names
