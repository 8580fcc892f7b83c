"""The findings that open the report page (harness/report/findings.py): one claim per
comparison that shows a difference with statistical support, read from the stages' tables;
ties counted; nothing from an oversubscribed launch."""

import json

import pandas as pd
from test_guidelines import _row

from harness.report import confirm, guidelines
from harness.report.findings import findings
from harness.report.inputs import Inputs
from harness.report.page import _findings


def test_claims_come_from_the_tables_and_only_with_support(tmp_path):
    tables, figs = tmp_path / "tables", tmp_path / "figures"
    rows = [_row("native:auto", 65536, 10e-6, 0.2e-6),
            _row("reduce_scatter_allgather", 65536, 7e-6, 0.2e-6),  # violation
            _row("allreduce_halves", 65536, 10.1e-6, 0.2e-6),  # tie
            _row("native:auto", 4096, 5e-6, 0.1e-6, over=True),
            _row("reduce_bcast", 4096, 1e-6, 0.1e-6, over=True)]  # oversubscribed: no claim
    pd.DataFrame(rows).to_csv(tmp_path / "summary.csv", index=False)
    guidelines.make(Inputs.of(tmp_path / "summary.csv", tables, figs))
    base = {"library": "openmpi", "procs": 2, "dtype": "float64", "op": "sum",
            "timing": "percall", "auto_mean": 2e-5, "best_mean": 1e-5, "pairs": 6,
            "campaign_gain": 2.0}
    entries = [dict(base, size=1024, best="native:ring", gain=2.0, gain_ci_low=1.8,
                    gain_ci_high=2.2, verdict="BEST faster", median_gain=2.0,
                    wilcoxon_p=0.03125, nonparametric="BEST faster"),
               dict(base, size=2048, best="native:ring", gain=1.0, gain_ci_low=0.9,
                    gain_ci_high=1.1, verdict="tie"),
               dict(base, size=4096, best="native:ring", verdict="oversubscribed"),
               # the same size on cold buffers: a claim of its own, and the line says which
               dict(base, size=1024, buffers="rotate", best="native:ring", gain=1.5,
                    gain_ci_low=1.2, gain_ci_high=1.8, verdict="BEST faster")]
    guideline = {"library": "mpich", "procs": 2, "dtype": "float64", "op": "sum",
                 "timing": "percall", "buffers": "reuse", "role": "guideline", "pairs": 4,
                 "best": "reduce_scatter_allgather", "auto_mean": 9e-6, "best_mean": 7e-6,
                 "campaign_gain": 1.4}
    # the campaign's violation before the confirmation stage ran: claimed, said to rest on
    # one launch each
    claims, ties = findings(tables)
    assert [c.text for c in claims] == [
        "MPICH P=2 64KiB: Reduce_scatter+Allgather is faster than the library's own Allreduce "
        "(performance guideline violated)"]
    assert "one launch each, not measured again" in claims[0].evidence and ties == 1
    assert claims[0].table.name == "guidelines.csv"
    entries += [dict(guideline, size=65536, gain=1.3, gain_ci_low=1.1, gain_ci_high=1.5,
                     verdict="BEST faster"),
                # measured again: a tie, so no claim, counted
                dict(guideline, size=1048576, gain=1.1, gain_ci_low=0.5, gain_ci_high=2.2,
                     verdict="tie")]
    (tmp_path / "g.json").write_text(json.dumps({"entries": entries}))
    confirm.make(Inputs.load(tmp_path, tables, figs, documents=[tmp_path / "g.json"]))
    again = (tables / "guidelines_confirmed.md").read_text()
    assert "violation confirmed" in again and "not confirmed (tie)" in again
    assert "Reduce_scatter+Allgather" in again
    assert "reduce_scatter_allgather" not in (tables / "auto_vs_best_confirmed.md").read_text()
    claims, ties = findings(tables)
    texts = [c.text for c in claims]
    assert texts == ["Open MPI P=2 1KiB: BEST (ring) faster than AUTO, confirmed in fresh launches",
                     "Open MPI P=2 1KiB rotated buffers: BEST (ring) faster than AUTO, confirmed "
                     "in fresh launches",
                     "MPICH P=2 64KiB: Reduce_scatter+Allgather is faster than the library's own "
                     "Allreduce (performance guideline violated), confirmed in fresh launches"]
    assert "2.00x [1.80, 2.20] over 6 paired launches; Wilcoxon p = 0.031" in claims[0].evidence
    assert "1.30x [1.10, 1.50] over 4 paired launches" in claims[2].evidence
    assert claims[2].table.name == "guidelines_confirmed.csv" and ties == 2
    html = _findings(claims, ties, tmp_path / "report")
    assert html.count("<li>") == 3 and 'href="../tables/guidelines_confirmed.csv"' in html
    assert "2 comparison(s) showed no difference" in html
    empty = _findings(*findings(tmp_path / "none"), tmp_path / "report")
    assert "No claim" in empty


def test_the_costliest_auto_decision_names_what_auto_ran(tmp_path):
    """Per library, the confirmed BEST-faster row with the largest gain, with what AUTO ran
    there (auto_choices) and the sizes where the same pair of decisions is confirmed."""
    from harness.report.findings import costliest_auto_choices

    tables = tmp_path / "tables"
    tables.mkdir()
    base = {"library": "openmpi", "procs": 2, "best": "native:rabenseifner", "pairs": 6,
            "verdict": "BEST faster", "gain_ci_low": 1.1, "gain_ci_high": 1.6}
    pd.DataFrame([dict(base, size=65536, gain=1.3), dict(base, size=262144, gain=1.5),
                  dict(base, size=1024, gain=2.0, verdict="tie"),
                  dict(base, library="mpich", size=8, gain=1.2, best="native:ring")]
                 ).to_csv(tables / "auto_vs_best_confirmed.csv", index=False)
    pd.DataFrame([{"library": "openmpi", "procs": 2, "size": s, "auto_ran": "ring"}
                  for s in (1024, 65536, 262144)]).to_csv(tables / "auto_choices.csv", index=False)
    found, _ = costliest_auto_choices(tables)
    assert [f.text for f in found] == [
        "Open MPI: AUTO's costliest decision is ring at P=2, 64KiB to 256KiB (2 sizes), where "
        "rabenseifner is faster (confirmed)"]  # MPICH's row: no auto_choices entry, no claim
    assert found[0].evidence.startswith("at 256KiB: gain t_AUTO/t_BEST 1.50x [1.10, 1.60]")
