# Stage 4: the paper-style tables and figures, from summary.csv (and model_params.json where a
# report reads it). One rule per report of the registry (harness/report/registry.py) that is
# made from the summary: its name, outputs, whether the campaign gets it and the keywords it
# is called with all come from the registry's entry. `rule all` and the report page ask for
# the outputs of the reports the campaign gets (REPORT_OUTPUTS, workflow/rules/page.smk).
from pathlib import Path

# The summary the reports read: summary.csv, or under report.statistic: median its view with the
# medians in the time columns (harness/results/view.py), made by rule summary_view.
STATISTIC = CAMPAIGN.cfg.report["statistic"]
REPORT_SUMMARY = RES + ("/summary.csv" if STATISTIC == "mean" else f"/summary-{STATISTIC}.csv")


rule summary_view:
    localrule: True
    input:
        RES + "/summary.csv",
    output:
        RES + "/summary-{statistic}.csv",
    wildcard_constraints:
        statistic="median",
    run:
        import pandas as pd

        from harness.fileio import atomic_write_text
        from harness.results.view import statistic_view

        view = statistic_view(pd.read_csv(input[0]), wildcards.statistic)
        atomic_write_text(Path(output[0]), view.to_csv(index=False))


def _model_params(report):
    """model_params.json as an input: always (rule fit_params makes it), when it exists, or
    never."""
    path = RES + "/model_params.json"
    if report.params == "required" or (report.params == "if_fitted" and FACTS.pingpong):
        return [path]
    if report.params == "optional":
        return [path] if Path(path).is_file() else []
    return []


for _report in REPORTS.values():
    if not _report.from_summary:
        continue

    rule:
        name: _report.rule_name
        localrule: True
        input:
            REPORT_SUMMARY,
            _model_params(_report),
        output:
            _report.outputs(RES + "/tables", FIG, FACTS),
        params:
            report=_report.name,
            options=_report.options(FACTS, CAMPAIGN.cfg.report),
        run:
            report = REPORTS[params.report]
            options = dict(params.options)
            if len(input) > 1 and report.params in ("required", "if_fitted"):
                options["params_json"] = input[1]
            report.load()(input[0], RES + "/tables", FIG, **options)
