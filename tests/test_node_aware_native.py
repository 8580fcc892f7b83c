"""The libraries' own allreduce beside RD/SMP/NAP (Bienz et al., Figs. 16-17), the Fig. 1 sweep
(one double against P) and the paper-scale config (config/paper-nap.yaml)."""

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
from conftest import HARNESS, REPO, execute_run, fast_settings

from harness.analysis import node_aware as node_aware_data
from harness.report import node_aware

SIZES = (8, 2048, 65536)


def _summary(layout: str, natives: bool = True) -> pd.DataFrame:
    """RD/SMP/NAP on ``layout`` nodes of 2 and 4 ranks at P = 4 and 8 (NAP fastest up to 2 KiB,
    slowest above), and, with ``natives``, MPICH's SMP and each library's AUTO on the real
    layout: one node (emulated case) or P / ppn nodes (real case, both ppn)."""
    rows = []
    base = dict(dtype="float64", op="sum", delay="none", timing="percall", params="{}",
                oversubscribed=False, n=50)
    for ppn in (2, 4):
        for procs in (4, 8):
            for size in SIZES:
                for alg, f in (("recursive_doubling", 1.3), ("smp", 1.2),
                               ("nap", 1.0 if size <= 2048 else 1.6)):
                    m = 1e-5 * f * procs * (1 + size / 4096)
                    rec = {"layout": layout, "ppn": ppn, "n_nodes": procs // ppn, "inter_msgs": 1}
                    rows.append(dict(base, library="openmpi", algorithm=alg, procs=procs,
                                     nodes=1 if layout == "emulated" else procs // ppn,
                                     size=size, status="ok", mean=m, ci_low=0.9 * m,
                                     ci_high=1.1 * m, record=json.dumps(rec),
                                     params=json.dumps({"layout": layout, "ppn": ppn})))
    if natives:
        node_counts = {4: [1], 8: [1]} if layout == "emulated" else {4: [2, 1], 8: [4, 2]}
        for procs, counts in node_counts.items():
            for nodes in counts:
                for size in SIZES:
                    m = 2e-5 * procs * (1 + size / 4096) * (1 + nodes / 100)
                    for lib, alg, f in (("mpich", "native:smp", 1.5), ("mpich", "native:auto", 1.0),
                                        ("openmpi", "native:auto", 1.1),
                                        ("impi", "native:auto", 1.2)):
                        rows.append(dict(base, library=lib, algorithm=alg, procs=procs,
                                         nodes=nodes, size=size, status="ok", mean=f * m,
                                         ci_low=0.9 * f * m, ci_high=1.1 * f * m, record=None))
    return pd.DataFrame(rows)


def test_native_smp_and_auto_in_the_times_table_and_figures(tmp_path):
    csv = tmp_path / "summary.csv"
    _summary("emulated").to_csv(csv, index=False)
    d = node_aware_data.load(csv)
    nat = node_aware_data.load_native(csv, like=d)
    node_aware.write_times(node_aware_data.times_table(d, nat), tmp_path / "t" / "node_aware_times")
    t = pd.read_csv(tmp_path / "t" / "node_aware_times.csv")
    for series in ("native:smp@mpich", "native:auto@mpich", "native:auto@openmpi",
                   "native:auto@impi"):
        assert t[f"{series}_mean"].notna().all(), series
    # one node here: MPICH's SMP is shown, never turned into a speedup over emulated NAP
    assert (t["native_nodes"] == 1).all() and not t["comparable"].any()
    assert t["speedup_vs_native_smp"].isna().all()
    row = t[(t.ppn == 2) & (t.procs == 8) & (t["size"] == 8)].iloc[0]
    assert row["native:smp@mpich_mean"] == pytest.approx(1.5 * 2e-5 * 8 * (1 + 8 / 4096) * 1.01)
    md = (tmp_path / "t" / "node_aware_times.md").read_text()
    for head in ("MPICH SMP (native)", "AUTO MPICH", "AUTO Open MPI", "AUTO Intel MPI",
                 "native nodes"):
        assert f"| {head} |" in md or f"| {head}" in md, head
    assert "1 (real, not comparable)" in md
    # the native rows are drawn beside RD/SMP/NAP: one legend entry per series, and the note
    assert sorted(nat["series"].unique()) == sorted(node_aware_data.NATIVE_SERIES)
    drawn = {}

    def save(fig, path):
        legend = fig.legends[0]
        drawn["labels"] = [x.get_text() for x in legend.get_texts()]
        drawn["note"] = legend.get_title().get_text()
        return []

    import harness.report.style as style
    orig, style.save = style.save, save
    try:
        node_aware._figure(d, "size", tmp_path / "f" / "vs_size", "t", nat)
    finally:
        style.save = orig
    assert drawn["labels"] == ["RD", "SMP", "NAP", "MPICH SMP (native)", "AUTO MPICH",
                               "AUTO Open MPI", "AUTO Intel MPI"]
    assert "real layout (1 node: all ranks on this one host)" in drawn["note"].replace("\n", " ")


def test_real_layout_gives_nap_speedup_over_mpich_smp(tmp_path):
    csv = tmp_path / "summary.csv"
    _summary("real").to_csv(csv, index=False)
    d = node_aware_data.load(csv)
    nat = node_aware_data.load_native(csv, like=d)
    t = node_aware_data.times_table(d, nat)
    # each ppn row takes the native cell of its own node count (P / ppn), not the other one
    for r in t.itertuples(index=False):
        assert r.native_nodes == r.n_nodes
    assert t["comparable"].all()
    want = t["native:smp@mpich_mean"] / t["nap_mean"]
    assert np.allclose(t["speedup_vs_native_smp"], want)
    paths = node_aware.write_times(t, tmp_path / "times")
    assert "NAP speedup vs MPICH SMP" in paths[0].read_text()


def test_report_without_native_cells_keeps_its_columns(tmp_path):
    csv = tmp_path / "summary.csv"
    _summary("emulated", natives=False).to_csv(csv, index=False)
    d = node_aware_data.load(csv)
    node_aware.write_times(node_aware_data.times_table(d, node_aware_data.load_native(csv, like=d)),
                           tmp_path / "t" / "node_aware_times")
    fig1 = node_aware_data.fig1_table(csv)
    node_aware.write_fig1_table(fig1, tmp_path / "t" / "node_aware_fig1")
    node_aware.fig1_figure(fig1, tmp_path / "f" / "node_aware_fig1")
    t = pd.read_csv(tmp_path / "t" / "node_aware_times.csv")
    assert not [c for c in t.columns if c.startswith("native:")]
    assert "MPICH SMP" not in (tmp_path / "t" / "node_aware_times.md").read_text()
    # no AUTO at 8 B either: Fig. 1 is a placeholder and an empty table, both written
    assert (tmp_path / "f" / "node_aware_fig1.png").stat().st_size > 0
    assert len(pd.read_csv(tmp_path / "t" / "node_aware_fig1.csv")) == 0


def test_fig1_from_a_real_run(results_root, tmp_path):
    """AUTO of MPICH reducing one double at P = 2 and 3 (real launches): the Fig. 1 table has
    both points with a time, P = 3 marked oversubscribed on a 2-core machine only if it is."""
    from harness.cells import Cell
    from harness.results.store import CampaignStore, rebuild_summary

    for procs in (2, 3):
        cell = Cell("mpich", "native:auto", procs, 8, "float64", "sum", "none", 0.0, 0, 1, (),
                    "single", "percall")
        outcome, doc, store = execute_run(results_root, "mpich", [cell], campaign="fig1",
                                          settings=fast_settings(time_budget=5.0), timeout=120)
        assert doc["cells"][0]["status"] in ("ok", "not-converged"), doc["cells"][0]
    summary = rebuild_summary(CampaignStore(results_root, "fig1"))
    fig1 = node_aware_data.fig1_table(summary)
    paths = (node_aware.write_fig1_table(fig1, tmp_path / "tables" / "node_aware_fig1")
             + node_aware.fig1_figure(fig1, tmp_path / "figures" / "node_aware_fig1"))
    names = sorted(p.name for p in paths)
    assert names == sorted(f"node_aware_fig1.{e}" for e in ("md", "tex", "csv", "html", "png",
                                                             "pdf"))
    t = pd.read_csv(tmp_path / "tables" / "node_aware_fig1.csv")
    assert list(t["procs"]) == [2, 3] and set(t["library"]) == {"mpich"}
    assert (t["mean"] > 0).all() and (t["ci_low"] <= t["mean"]).all()
    import os
    assert list(t["oversubscribed"]) == [2 > (os.cpu_count() or 1), 3 > (os.cpu_count() or 1)]
    md = (tmp_path / "tables" / "node_aware_fig1.md").read_text()
    assert "| MPICH | 1 | 2 |" in md and "Fig. 1" in md


def test_paper_config_plans():
    out = subprocess.run(HARNESS + ["plan", "--config", str(REPO / "config" / "paper-nap.yaml")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "136 cells" in out.stdout and "135 runs" in out.stdout, out.stdout
    for name in ("nap-64n", "mpi-64n", "auto-64n", "fig1-1n"):
        assert name in out.stdout
