"""The report registry (harness/report/registry.py): which reports a campaign gets, the files
each declares, a caption for every one of them on the report page."""

from harness.cells import Cell, Run
from harness.report.registry import REPORTS, Facts, applying, captions


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
        "t/auto_vs_best.md", "t/auto_vs_best.tex", "t/auto_vs_best.csv"]  # no native library


def test_outputs_expand_libraries_and_experiments():
    facts = Facts(native_libraries=("impi", "mpich"), tune_libraries=("openmpi",),
                  sgd_experiments=("a", "b"))
    figs = [p for p in REPORTS["auto_vs_best"].outputs("t", "f", facts) if p.startswith("f/")]
    assert figs == ["f/auto_vs_best_impi.png", "f/auto_vs_best_impi.pdf",
                    "f/auto_vs_best_mpich.png", "f/auto_vs_best_mpich.pdf"]
    assert "f/tuned_openmpi.png" in REPORTS["tuned"].outputs("t", "f", facts)
    sgd = REPORTS["sgd"].outputs("t", "f", facts)
    assert "t/sgd_a.md" in sgd and "f/sgd_b_loss.pdf" in sgd
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


def test_rule_names_are_unique_and_kept():
    rules = [r.rule_name for r in REPORTS.values()]
    assert len(rules) == len(set(rules))
    assert REPORTS["auto_vs_best"].rule_name == "report"  # the name the docs and tests use
    assert {"report_suara", "report_castello_models", "report_confirm", "report_sgd"} <= set(rules)
