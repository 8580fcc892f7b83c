"""Simulated against measured: the calibration of a simulated platform from a campaign's fit
(harness/simulate/calibrate.py), the pairing of simulated and measured rows
(harness/analysis/simulation.py) and the report that shows them (harness/report/simulation.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.analysis import simulation as sim
from harness.analysis import vocabulary
from harness.errors import ConfigError
from harness.report.inputs import Inputs
from harness.report.registry import REPORTS, TABLE_FORMATS, Facts
from harness.results.summary import load
from harness.simulate.calibrate import calibrated

# --------------------------------------------------------------------------- calibration

NODE = {"alpha": 4e-7, "beta": 1 / 8e9}
SOCKET = {"alpha": 2e-7, "beta": 1 / 16e9}
NETWORK = {"alpha": 2e-6, "beta": 1 / 10e9}


def _params(tmp_path, campaign="probe", pingpong=None, gamma=1 / 4e9):
    d = tmp_path / campaign
    d.mkdir(parents=True, exist_ok=True)
    if pingpong is None:
        pingpong = {
            "openmpi": {"alpha": NODE["alpha"], "beta": NODE["beta"], "gamma": 1 / 5e9,
                        "level": "node", "levels": {"socket": SOCKET, "node": NODE}},
            "mpich": {"alpha": 9e-7, "beta": 1 / 6e9, "gamma": 1 / 3e9, "level": "network",
                      "levels": {"node": {"alpha": 5e-7, "beta": 1 / 7e9}, "network": NETWORK}},
        }
    doc = {"alpha": {}, "beta": {}, "gamma": gamma, "pingpong": pingpong}
    (d / "model_params.json").write_text(json.dumps(doc))
    return d / "model_params.json"


def test_calibrated_one_node_fills_intra_fields_from_node_level(tmp_path):
    path = _params(tmp_path)
    block = {"kind": "simulated", "topology": "cluster", "nodes": 1, "cores_per_node": 2,
             "calibrate_from": "probe"}
    out, prov = calibrated(block, tmp_path)
    assert out["intra_latency"] == pytest.approx(NODE["alpha"])
    assert out["intra_bandwidth"] == pytest.approx(8e9)
    assert out["reduce_rate"] == pytest.approx(5e9)  # the library's gamma, not the file's
    assert "latency" not in out and "bandwidth" not in out  # no network level: not calibrated
    assert prov["campaign"] == "probe" and prov["library"] == "openmpi"  # first in the file
    assert prov["file"] == str(path) and len(prov["sha256"]) == 64
    assert "level node" in prov["sources"]["intra_latency"]
    assert block.get("intra_latency") is None  # the block itself is not changed


def test_calibrated_keeps_explicit_values_and_takes_the_named_library(tmp_path):
    _params(tmp_path)
    out, prov = calibrated({"nodes": 4, "cores_per_node": 2, "calibrate_from": "probe",
                            "calibrate_library": "mpich", "bandwidth": "25GB/s"}, tmp_path)
    assert out["bandwidth"] == "25GB/s" and prov["given"] == ["bandwidth"]
    assert out["latency"] == pytest.approx(NETWORK["alpha"])
    assert out["intra_latency"] == pytest.approx(5e-7)
    assert out["reduce_rate"] == pytest.approx(3e9)
    assert prov["library"] == "mpich" and "bandwidth" not in prov["values"]


def test_calibrated_without_calibrate_from_is_unchanged(tmp_path):
    block = {"nodes": 2, "latency": "1us"}
    assert calibrated(block, tmp_path) == (block, {})


@pytest.mark.parametrize("case, words", [
    ("no campaign", ["platform.calibrate_from", "'missing'", "model_params.json", "harness fit missing"]),
    ("no file", ["platform.calibrate_from", "'probe'", "model_params.json", "harness fit probe"]),
    ("no network level", ["platform.calibrate_from", "network", "between two nodes"]),
    ("unknown library", ["platform.calibrate_library", "'impi'"]),
])
def test_calibrated_refuses_what_is_missing(tmp_path, case, words):
    block = {"nodes": 1, "cores_per_node": 2, "calibrate_from": "probe"}
    if case == "no campaign":
        block["calibrate_from"] = "missing"
    elif case == "no file":
        (tmp_path / "probe").mkdir()
    else:
        _params(tmp_path)
        if case == "no network level":
            block["nodes"] = 2
        else:
            block["calibrate_library"] = "impi"
    with pytest.raises(ConfigError, match=r"platform\.calibrate_(from|library)") as e:
        calibrated(block, tmp_path)
    for w in words:
        assert w in str(e.value)


# --------------------------------------------------------------------------- pairing

BASE = {"campaign": "v", "procs": 2, "nodes": 1, "dtype": "float64", "op": "sum",
        "delay": "none", "max_delay": 0.0, "buffers": "reuse", "timing": "percall",
        "params": "{}", "n": 30, "converged": True, "oversubscribed": False}


def _row(library, algorithm, size, mean, simulated=False, status="ok", platform="a1b2c3d4e5f6",
         **kw):
    r = {**BASE, "library": f"{library}@small" if simulated else library, "algorithm": algorithm, "size": size, "mean": mean,
         "ci_low": mean * 0.95, "ci_high": mean * 1.05, "status": status,
         "library_version": "" if simulated else "4.1.2", "simulated": simulated,
         "platform": platform if simulated else "", "simulator": "SimGrid 3.32" if simulated else "",
         "copies": "Open MPI 4.1.2 (SMPI ompi selector)" if simulated else ""}
    if simulated:
        r["ci_low"] = r["ci_high"] = mean
        r["record"] = json.dumps({"platform": {"nodes": 1, "cores_per_node": 2,
                                               "intra_latency": 2e-7}})
    r.update(kw)
    return r


def summary() -> pd.DataFrame:
    rows = [
        _row("openmpi", "ring", 4096, 10e-6), _row("openmpi", "ring", 4096, 11e-6, True),
        _row("openmpi", "ring", 65536, 40e-6), _row("openmpi", "ring", 65536, 30e-6, True),
        # a cell measured twice (a rerun): the latest timed one is the partner
        _row("openmpi", "native:ring", 4096, 99e-6, finished="2026-01-01T00:00:00"),
        _row("openmpi", "native:ring", 4096, 20e-6, finished="2026-01-02T00:00:00"),
        _row("openmpi", "native:ring", 4096, 22e-6, True),
        # oversubscribed measurement: shown, claims nothing
        _row("mpich", "ring", 4096, 50e-6, oversubscribed=True),
        _row("mpich", "ring", 4096, 25e-6, True),
        # simulated without a measured partner, measured without a simulated one
        _row("mpich", "ring", 1 << 20, 1e-3, True),
        _row("mpich", "ring", 65536, 80e-6),
        # a failed measurement, and a failed simulation
        _row("openmpi", "rabenseifner", 4096, np.nan, status="failed"),
        _row("openmpi", "rabenseifner", 4096, 12e-6, True),
        _row("openmpi", "rabenseifner", 65536, 30e-6),
        _row("openmpi", "rabenseifner", 65536, np.nan, True, status="failed"),
        # measured only, an algorithm never simulated: counted, not listed
        _row("openmpi", "recursive_doubling", 4096, 9e-6),
        # probes are not allreduce cells
        _row("openmpi", "pingpong", 4096, 2e-6),
    ]
    return load(pd.DataFrame(rows))


def measured_only() -> pd.DataFrame:
    d = summary()
    return d[~vocabulary.simulated_mask(d)]


def _one(p, library, algorithm, size):
    r = p[(p["library"] == library) & (p["algorithm"] == algorithm) & (p["size"] == size)]
    assert len(r) == 1, r
    return r.iloc[0]


def test_pairs_error_and_partners():
    p = sim.pairs(summary())
    r = _one(p, "openmpi", "ring", 4096)
    assert r["partner"] == sim.PAIRED
    assert r["error"] == pytest.approx(0.1) and r["error_pct"] == pytest.approx(10.0)
    assert not r["within_ci"] and r["platform"] == "a1b2c3d4e5f6"
    assert r["simulator"] == "SimGrid 3.32" and r["library_version"] == "4.1.2"
    assert r["installation"] == "openmpi@small"
    assert _one(p, "openmpi", "ring", 65536)["error"] == pytest.approx(-0.25)
    rerun = _one(p, "openmpi", "native:ring", 4096)
    assert rerun["measured_mean"] == pytest.approx(20e-6) and rerun["measured_rows"] == 2
    assert rerun["error"] == pytest.approx(0.1)
    over = _one(p, "mpich", "ring", 4096)
    assert over["partner"] == sim.PAIRED and over["claims_nothing"]
    assert _one(p, "mpich", "ring", 1 << 20)["partner"] == sim.NO_MEASURED
    assert _one(p, "mpich", "ring", 65536)["partner"] == sim.NO_SIMULATED
    assert _one(p, "openmpi", "rabenseifner", 4096)["partner"] == sim.MEASURED_UNTIMED
    assert _one(p, "openmpi", "rabenseifner", 65536)["partner"] == sim.SIM_UNTIMED
    assert not (p["algorithm"] == "recursive_doubling").any()
    assert p.attrs["measured_elsewhere"] == 1
    assert not (p["algorithm"] == "pingpong").any()
    assert sim.has_pairs(summary())
    assert not sim.has_pairs(measured_only())


def test_aggregates_leave_out_what_claims_nothing():
    p = sim.pairs(summary())
    a = sim.aggregate(p, sim.BY_ALGORITHM).set_index(["platform", "library", "algorithm"])
    ring = a.loc[("a1b2c3d4e5f6", "openmpi", "ring")]
    assert ring["n"] == 2 and ring["mean_error_pct"] == pytest.approx(-7.5)
    assert ring["mean_abs_error_pct"] == pytest.approx(17.5)
    assert ring["worst_error_pct"] == pytest.approx(-25.0)
    m = a.loc[("a1b2c3d4e5f6", "mpich", "ring")]
    assert m["n"] == 0 and m["left_out"] == 2  # oversubscribed, no measured row
    assert a.loc[("", "mpich", "ring"), "left_out"] == 1  # measured, no simulated row
    s = sim.aggregate(p, sim.BY_SIZE).set_index(["platform", "size"])
    assert s.loc[("a1b2c3d4e5f6", 4096), "n"] == 2  # ring, native:ring (mpich's claims nothing)


def test_platforms_lists_each_digest():
    t = sim.platforms(summary())
    assert list(t["platform"]) == ["a1b2c3d4e5f6"]
    assert t.iloc[0]["parameters"]["cores_per_node"] == 2
    assert t.iloc[0]["rows"] == 7


# --------------------------------------------------------------------------- the report

def test_report_writes_its_files(tmp_path):
    inputs = Inputs.load(tmp_path / "v", tmp_path / "tables", tmp_path / "figures",
                         summary=summary())
    written = REPORTS["simulation"].write(inputs)
    want = set(REPORTS["simulation"].outputs(str(tmp_path / "tables"), str(tmp_path / "figures"),
                                             Facts()))
    assert {str(p) for p in written} == want and all(p.stat().st_size for p in written)
    md = (tmp_path / "tables" / "simulation_validation.md").read_text()
    for text in ("+10.0 %", "-25.0 %", sim.NO_MEASURED, sim.NO_SIMULATED,
                 "measured row not timed (failed)", "simulation not timed (failed)", "‡",
                 "Not listed: 1 measured allreduce row"):
        assert text in md, text
    csv = pd.read_csv(tmp_path / "tables" / "simulation_validation.csv")
    assert {"error", "error_pct", "partner", "measured_mean", "simulated_time"} <= set(csv.columns)
    cells = (tmp_path / "tables" / "simulated_cells.md").read_text()
    assert "a1b2c3d4e5f6" in cells and "SimGrid 3.32" in cells
    assert len(TABLE_FORMATS) == 4


def test_report_without_simulated_rows_still_writes(tmp_path):
    inputs = Inputs.load(tmp_path / "v", tmp_path / "t", tmp_path / "f",
                         summary=measured_only())
    written = REPORTS["simulation"].write(inputs)
    assert len(written) == 10 and all(p.exists() for p in written)


def test_report_applies_to_simulated_and_measured_cells_alike():
    from dataclasses import dataclass, field

    from harness.cells import Cell

    @dataclass
    class FakeRun:
        library: str
        cells: tuple
        platform: str = ""
        procs: int = 2
        nodes: int = 1
        env: tuple = ()
        thread_level: str = "single"
        launch: int = 0
        extra: dict = field(default_factory=dict)

    cell = Cell("openmpi", "ring", 2, 4096)
    other = Cell("openmpi", "ring", 2, 65536)
    entry = REPORTS["simulation"]
    assert entry.applies(Facts.of([FakeRun("openmpi", (cell,)),
                                   FakeRun("openmpi@small", (cell,), platform="a1b2c3d4e5f6")]))
    assert not entry.applies(Facts.of([FakeRun("openmpi", (cell,)),
                                       FakeRun("openmpi@small", (other,), platform="a1b2c3d4e5f6")]))
    assert not entry.applies(Facts.of([FakeRun("openmpi", (cell,))]))


@pytest.mark.parametrize("case", ["header only", "every cell failed"])
def test_report_writes_its_files_whatever_the_rows(tmp_path, case):
    d = summary()
    if case == "header only":
        d = d.iloc[0:0]
    else:
        d = d.assign(status="failed", mean=np.nan)
    written = REPORTS["simulation"].write(Inputs.load(tmp_path / "v", tmp_path / "t",
                                                      tmp_path / "f", summary=d))
    assert len(written) == 10 and all(p.stat().st_size for p in written)
