"""PAP Tables 3-4 and Figs. 10-12 (``harness/report/pap.py``) from a summary: which rows are
PAP cells, the speedup and difference against the ring, bold where faster, the three formats,
the figures, and the Snakemake rule's outputs."""

import json

import pandas as pd
import pytest

from harness.analysis import pap as pap_data
from harness.report import pap
from harness.report.inputs import Inputs

MS = 1e-3


def _row(alg, delay, max_delay, mean, size=524288, params=None, status="ok", procs=4):
    params = {"compute": "20ms", **(params or {})}
    return {"campaign": "t", "cell_id": f"c{alg}{delay}{max_delay}{size}{json.dumps(params)}",
            "library": "openmpi", "library_version": "Open MPI v5.0.8", "algorithm": alg,
            "procs": procs, "nodes": 1, "size": size, "count": size // 8, "dtype": "float64",
            "op": "sum", "delay": delay, "max_delay": max_delay,
            "late_rank": 1 if delay == "one-late" else 0, "params": json.dumps(params),
            "metric": "mean", "n": 10, "mean": mean, "ci_low": mean * 0.98,
            "ci_high": mean * 1.02, "status": status, "finished": "2026-01-01T00:00:00"}


@pytest.fixture
def summary():
    rows = []
    # ring, slt, prr (oracle) and prr (online) at max delay 0 (none), 10 ms and 50 ms
    means = {  # ring,   slt,    prr,    prr online
        ("none", 0.0): (4.0, 6.0, 4.4, 4.5),
        ("one-late", 0.01): (12.0, 13.0, 10.0, 11.0),
        ("one-late", 0.05): (42.0, 40.0, 38.0, 39.0),
        ("rand-late", 0.01): (9.0, 9.5, 8.0, 8.5),
        ("rand-late", 0.05): (30.0, 31.0, 27.0, 28.0),
    }
    for (delay, md), (ring, slt, prr, online) in means.items():
        rows += [_row("ring", delay, md, ring * MS), _row("slt", delay, md, slt * MS),
                 _row("prr", delay, md, prr * MS),
                 _row("prr", delay, md, online * MS, params={"knowledge": "online"})]
    rows.append(_row("prr", "one-late", 0.05, 1.0, size=2**20, status="wrong"))  # never used
    rows.append({**_row("native:ring", "none", 0.0, 1 * MS), "params": "{}"})  # not a PAP cell
    return pd.DataFrame(rows)


def test_table3_speedup_and_better(summary):
    t3 = pap_data.table3(summary)
    assert set(t3["label"]) == {"ring", "slt", "prr", "prr (online)"}
    assert set(t3["mode"]) == {"one-late", "rand-late"}
    one = t3[t3["mode"] == "one-late"].set_index(["label", "max_delay"])
    assert one.loc[("prr", 0.05), "speedup"] == pytest.approx(42 / 38)
    assert one.loc[("prr", 0.05), "better"]
    assert not one.loc[("slt", 0.0), "better"]
    assert one.loc[("slt", 0.0), "speedup"] == pytest.approx(4 / 6)
    assert not one.loc[("ring", 0.05), "better"]
    # the delay-none cells are the max delay 0 column of both modes
    assert set(t3[t3["max_delay"] == 0]["mode"]) == {"one-late", "rand-late"}
    assert "native:ring" not in set(t3["algorithm"])


def test_table4_difference_and_speedup(summary):
    t4 = pap_data.table4(summary)
    r = t4[(t4["label"] == "prr") & (t4["mode"] == "rand-late") & (t4["max_delay"] == 0.05)]
    assert r["diff"].item() == pytest.approx(-3 * MS)
    assert r["speedup"].item() == pytest.approx(30 / 27)
    assert set(t4["label"]) == {"prr", "prr (online)"}


def test_renderings_bold_the_faster_entries(summary, tmp_path):
    written = pap.write_tables(summary, tmp_path)
    assert sorted(p.name for p in written) == sorted(
        f"pap_table{n}.{e}" for n in (3, 4) for e in ("md", "tex", "csv", "html"))
    md = (tmp_path / "pap_table3.md").read_text()
    assert "| prr | 4.4 | **10.0** | **38.0** |" in md
    assert "|  | 0.91 | **1.20** | **1.11** |" in md
    assert "| slt | 6.0 | 13.0 | **40.0** |" in md
    tex = (tmp_path / "pap_table3.tex").read_text()
    assert r"\toprule" in tex and r"\textbf{38.0}" in tex and r"\bottomrule" in tex
    md4 = (tmp_path / "pap_table4.md").read_text()
    assert "*one-late*" in md4 and "*rand-late*" in md4 and "**−3.0**" in md4
    csv = pd.read_csv(tmp_path / "pap_table3.csv")
    assert {"label", "mode", "max_delay", "mean", "speedup", "better"} <= set(csv.columns)


def test_figures_are_written(summary, tmp_path):
    csv = tmp_path / "summary.csv"
    summary.to_csv(csv, index=False)
    written = pap.make(Inputs.of(csv, tmp_path / "tables", tmp_path / "figures"))
    for n in (10, 11, 12):
        for ext in ("png", "pdf"):
            path = tmp_path / "figures" / f"pap_fig{n}.{ext}"
            assert path in written and path.stat().st_size > 1000


def test_a_summary_without_pap_cells_gives_empty_tables(summary, tmp_path):
    csv = tmp_path / "summary.csv"
    summary[summary["algorithm"] == "native:ring"].to_csv(csv, index=False)
    pap.make(Inputs.of(csv, tmp_path / "tables", tmp_path / "figures"))
    assert "No PAP cells" in (tmp_path / "tables" / "pap_table3.md").read_text()
    assert (tmp_path / "figures" / "pap_fig10.png").is_file()


def test_overlapping_intervals_are_ties_and_oversubscribed_cells_claim_nothing(summary):
    """slt at one-late 50 ms (40 vs ring 42, CIs ±2 %) is a win; 41.5 would overlap: a tie."""
    one = pap_data.table3(summary).query("mode == 'one-late'").set_index(["label", "max_delay"])
    assert one.loc[("slt", 0.05), "verdict"] == "faster"
    assert one.loc[("slt", 0.0), "verdict"] == "slower"
    tied = summary.copy()
    tied.loc[(tied.algorithm == "slt") & (tied.max_delay == 0.05) & (tied.delay == "one-late"),
             ["mean", "ci_low", "ci_high"]] = [41.5 * MS, 40.8 * MS, 42.3 * MS]
    one = pap_data.table3(tied).query("mode == 'one-late'").set_index(["label", "max_delay"])
    assert one.loc[("slt", 0.05), "verdict"] == "tie" and not one.loc[("slt", 0.05), "better"]
    assert "≈" in pap.table3_markdown(pap_data.table3(tied))
    crowded = pap_data.table3(summary.assign(oversubscribed=True))
    assert not crowded["better"].any()
    assert set(crowded.query("label != 'ring'")["verdict"]) == {"oversubscribed"}
    assert "‡" in pap.table3_markdown(crowded)
