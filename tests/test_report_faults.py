"""The report never fails on the data it is given: every report stage writes its declared
tables and figures whatever the cells' statuses (no MPI; the summaries are synthetic, shaped
like the workflow's own)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from test_pap_report import summary as pap_summary  # noqa: E402
from test_report import row  # noqa: E402
from test_report import summary as native_summary
from test_report_suara import synthetic as suara_synthetic  # noqa: E402

from harness.report import figures, node_aware, pap, suara  # noqa: E402
from harness.report.inputs import Inputs  # noqa: E402
from harness.report.registry import REPORTS, Facts  # noqa: E402
from harness.results.store import SUMMARY_COLUMNS  # noqa: E402

LIBRARIES = ["mpich", "openmpi", "impi"]
STATS = ["n", "mean", "ci_low", "ci_high", "rel_halfwidth", "std", "median", "median_ci_low",
         "median_ci_high", "min", "max", "algbw", "busbw"]


def node_aware_rows():
    rows = []
    for alg, t in (("recursive_doubling", 3e-5), ("smp", 2e-5), ("nap", 1e-5)):
        for ppn in (1, 2):
            rec = {"layout": "emulated", "ppn": ppn, "n_nodes": 4 // ppn, "inter_msgs": 1,
                   "intra_msgs": 1, "inter_bytes": 8, "intra_bytes": 8}
            rows.append(row("openmpi", alg, 8, t, procs=4, cell_id=f"na{alg}{ppn}",
                            record=json.dumps(rec), params=json.dumps({"ppn": ppn})))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


@pytest.fixture
def base(tmp_path):
    parts = [native_summary.__wrapped__(), pap_summary.__wrapped__(),
             pd.read_csv(suara_synthetic(tmp_path)), node_aware_rows()]
    return pd.concat([p.reindex(columns=SUMMARY_COLUMNS) for p in parts], ignore_index=True)


def _unfinished(d, mask, status):
    """Rows under ``mask`` become cells the run never finished: no statistics, no metric."""
    d = d.copy()
    d.loc[mask, "status"] = status
    d.loc[mask, STATS + ["metric", "record"]] = np.nan
    d.loc[mask, "error"] = f"job script exited with status 9 ({status})"
    return d


def all_failed(d):
    return _unfinished(d, d.index >= 0, "failed")


def all_timeout(d):
    return _unfinished(d, d.index >= 0, "timeout")


def one_library_failed(d):
    return _unfinished(d, d["library"] == "mpich", "failed")


def mixed_statuses(d):
    d = d.copy()
    cycle = np.array(["ok", "wrong", "timeout", "failed", "not-converged"])
    d["status"] = cycle[np.arange(len(d)) % len(cycle)]
    return _unfinished(d, d["status"].isin(["timeout", "failed"]), "failed")


def no_metric(d):
    d = d.copy()
    d.loc[d.index % 3 == 0, "metric"] = np.nan
    return d


def all_not_converged(d):
    d = d.copy()
    d["status"] = "not-converged"
    return d


def header_only(d):
    return d.iloc[0:0]


SCENARIOS = [all_failed, all_timeout, one_library_failed, mixed_statuses, no_metric,
             all_not_converged, header_only]


def declared(tables_dir, figures_dir):
    """What the workflow's report rules declare for a campaign with these experiments (the
    registry's outputs of the four reports made here)."""
    facts = Facts(native_libraries=tuple(LIBRARIES))
    return [Path(p) for name in ("auto_vs_best", "suara", "node_aware", "pap")
            for p in REPORTS[name].outputs(str(tables_dir), str(figures_dir), facts)]


RENDERED = "mixed_statuses"  # the scenario whose figures are rendered to PNG and PDF


@pytest.mark.parametrize("fault", SCENARIOS, ids=lambda f: f.__name__)
def test_every_report_stage_writes_its_declared_outputs(base, fault, tmp_path, monkeypatch):
    """Every declared table is written; every declared figure is drawn and saved. One scenario
    renders its figures to files; the others draw each figure to the end and hand it to
    ``style.save`` without rendering it (rendering took most of this test's CPU time; the
    golden reports do the same)."""
    from harness.report import style

    saved = set()
    if fault.__name__ != RENDERED:
        monkeypatch.setattr(style, "save", lambda fig, path: saved.update(
            {Path(f"{path}.png"), Path(f"{path}.pdf")}) or [Path(f"{path}.png"), Path(f"{path}.pdf")])
    csv = tmp_path / "summary.csv"
    fault(base).to_csv(csv, index=False)
    tdir, fdir = tmp_path / "tables", tmp_path / "figures"
    figures.make(Inputs.of(csv, tdir, fdir, libraries=LIBRARIES))
    for report in (suara, node_aware, pap):
        report.make(Inputs.of(csv, tdir, fdir))
    missing = [p.name for p in declared(tdir, fdir)
               if p not in saved and (not p.is_file() or not p.stat().st_size)]
    assert not missing
    assert fault.__name__ == RENDERED or saved, "no figure drawn"


def test_failed_cells_are_listed_as_such(base, tmp_path):
    csv = tmp_path / "summary.csv"
    one_library_failed(base).to_csv(csv, index=False)
    figures.make(Inputs.of(csv, tmp_path / "t", tmp_path / "f", libraries=LIBRARIES))
    table = pd.read_csv(tmp_path / "t" / "auto_vs_best.csv")
    mpich = table[table["library"] == "mpich"]
    assert len(mpich) and (mpich["verdict"] == "no data").all()
    assert mpich["excluded"].str.contains(r"\(failed\)").all()
    # the failed cells took the campaign's metric: no figure split by a 'nan' metric
    assert not list((tmp_path / "f").glob("*metric*"))


def test_a_library_without_native_rows_gets_a_figure_saying_so(tmp_path):
    csv = tmp_path / "summary.csv"
    pd.DataFrame([row("mpich", "native:auto", 8, 1e-6)], columns=SUMMARY_COLUMNS).to_csv(csv, index=False)
    written = figures.make(Inputs.of(csv, tmp_path / "t", tmp_path / "f", libraries=LIBRARIES))
    assert {p.name for p in written} >= {f"auto_vs_best_{lib}.png" for lib in LIBRARIES}


def test_several_conditions_keep_the_declared_file(tmp_path):
    rows = [row("mpich", a, 4096, t, dtype=dt, cell_id=f"{a}{dt}")
            for dt in ("float32", "float64") for a, t in (("native:auto", 2e-5), ("native:ring", 1e-5))]
    rows[0]["status"] = "failed"
    csv = tmp_path / "summary.csv"
    pd.DataFrame(rows, columns=SUMMARY_COLUMNS).to_csv(csv, index=False)
    names = {p.name for p in figures.make(Inputs.of(csv, tmp_path / "t", tmp_path / "f", libraries=["mpich"]))}
    assert {"auto_vs_best_mpich.png", "auto_vs_best_mpich_float32.png",
            "auto_vs_best_mpich_float64.png"} <= names


def test_node_aware_table_shows_unfinished_cells(base, tmp_path):
    csv = tmp_path / "summary.csv"
    d = base.copy()
    d = _unfinished(d, d["algorithm"] == "nap", "failed")
    d.to_csv(csv, index=False)
    node_aware.make(Inputs.of(csv, tmp_path / "t", tmp_path / "f"))
    md = (tmp_path / "t" / "node_aware_times.md").read_text()
    assert "| failed |" in md
