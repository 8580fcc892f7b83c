"""The report registry (harness/report/registry.py): which reports a campaign gets, the files
each declares, a caption for every one of them on the report page; every report is
``make(inputs)`` (harness/report/inputs.py)."""

import json

import pandas as pd

from harness.cells import Cell, Run
from harness.report.inputs import Inputs
from harness.report.registry import REPORTS, Facts, applying, caption_of, captions, report_of
from harness.results.store import SUMMARY_COLUMNS


def run(library, *cells, env=()):
    return Run(library=library, env=env, procs=cells[0].procs, nodes=1, cells=tuple(cells))


def test_facts_of_a_campaign_decide_its_reports():
    runs = [run("mpich", Cell("mpich", "native:auto", 4, 8)),  # one double: Bienz Fig. 1
            run("openmpi", Cell("openmpi", "native:ring", 4, 1024)),
            run("openmpi", Cell("openmpi", "suara2", 4, 1024)),
            run("impi", Cell("impi", "native:auto", 2, 4096, params=(("workload", "vgg16"),)))]
    facts = Facts.of(runs, confirm_groups={"g1": None}, tune_libraries=["mpich"])
    assert facts.native_libraries == ("mpich", "openmpi")  # a workload cell is not one
    assert facts.node_aware and facts.suara and not facts.pap and not facts.pingpong
    assert facts.workload_models == ("vgg16",) and facts.confirm_groups == ("g1",)
    got = [r.name for r in applying(facts)]
    assert got == ["auto_vs_best", "confirm", "tuned", "cross_library", "suara", "node_aware",
                   "workload", "projection"]
    plain = Facts.of([run("mpich", Cell("mpich", "ring", 2, 64))])
    assert [r.name for r in applying(plain)] == ["auto_vs_best"]
    assert REPORTS["auto_vs_best"].outputs("t", "f", plain) == [
        "t/auto_vs_best.md", "t/auto_vs_best.tex", "t/auto_vs_best.csv",
        "t/auto_vs_best.html"]  # no native library: no figure


def test_outputs_expand_libraries_and_experiments():
    facts = Facts(native_libraries=("impi", "mpich"), tune_libraries=("openmpi",),
                  sgd_experiments=("a", "b"))
    figs = [p for p in REPORTS["auto_vs_best"].outputs("t", "f", facts) if p.startswith("f/")]
    assert figs == ["f/auto_vs_best_impi.png", "f/auto_vs_best_impi.pdf",
                    "f/auto_vs_best_mpich.png", "f/auto_vs_best_mpich.pdf"]
    assert "f/tuned_openmpi.png" in REPORTS["tuned"].outputs("t", "f", facts)
    sgd = REPORTS["sgd"].outputs("t", "f", facts)
    assert "t/sgd_a.md" in sgd and "f/sgd_b_loss.pdf" in sgd and "t/sgd_b_loss.md" not in sgd
    assert REPORTS["sgd"].outputs("t", "f", facts, experiment="{experiment}")[0] == \
        "t/sgd_{experiment}.md"


def test_every_file_a_report_declares_has_a_caption_on_the_page():
    caps = captions()
    for report in REPORTS.values():
        if not report.on_page:
            continue
        for stem in report.tables + report.figures:
            key = stem.replace("{library}", "*")
            assert key in caps, f"{report.name}: {stem} has no caption"
    names = [stem for r in REPORTS.values() for stem in r.captions]
    assert len(names) == len(set(names)), "a caption declared by two reports"


def test_each_file_belongs_to_one_report():
    """The page puts each table and figure under the report that writes it: by name first,
    so a file of one report is never taken by another's pattern."""
    assert report_of("auto_vs_best").name == "auto_vs_best"
    assert report_of("auto_vs_best_mpich_none_max_delay-0").name == "auto_vs_best"
    assert report_of("auto_vs_best_confirmed").name == "confirm"
    assert report_of("guidelines_confirmed").name == "confirm"
    assert report_of("tuned_openmpi").name == "tuned"
    assert report_of("sgd_x_loss").name == "sgd" and report_of("nothing_known") is None
    assert caption_of(REPORTS["tuned"], "tuned_openmpi")[1].startswith("time against")


def test_rule_names_are_unique_and_kept():
    rules = [r.rule_name for r in REPORTS.values()]
    assert len(rules) == len(set(rules))
    assert REPORTS["auto_vs_best"].rule_name == "report"  # the name the docs and tests use
    assert {"report_suara", "report_castello_models", "report_confirm", "report_sgd"} <= set(rules)
    # the reports of the stages read their documents; the others the summary alone
    assert {r.name for r in REPORTS.values() if r.reads} == {"confirm", "tuned", "sgd"}


def test_inputs_load_the_summary_once_under_the_statistic(tmp_path):
    rows = pd.DataFrame([{**{c: None for c in SUMMARY_COLUMNS}, "cell_id": "c1",
                          "library": "mpich", "algorithm": "native:auto", "procs": 2,
                          "size": 8, "status": "ok", "mean": 2.0, "median": 1.0,
                          "median_ci_low": 0.9, "median_ci_high": 1.1, "oversubscribed": "True"}])
    rows.to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "model_params.json").write_text(json.dumps({"gamma": 1e-9}))
    got = Inputs.load(tmp_path, statistic="median", params=tmp_path / "model_params.json",
                      libraries=["mpich"])
    assert got.summary.loc[0, "mean"] == 1.0 and got.summary.loc[0, "sample_mean"] == 2.0
    assert got.summary.loc[0, "oversubscribed"] is True or got.summary["oversubscribed"].all()
    assert got.summary.loc[0, "kind"] == "native" and got.summary.loc[0, "nodes"] == 1
    assert got.params == {"gamma": 1e-9} and got.libraries == ("mpich",)
    assert got.tables == tmp_path / "tables" and got.figures.name == tmp_path.name
    none = Inputs.load(tmp_path / "nothing-yet")
    assert none.summary.empty and "kind" in none.summary and none.params is None
    assert none.but(reference="impi").reference == "impi"
