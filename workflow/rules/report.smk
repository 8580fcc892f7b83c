# Stage 4: the paper-style tables and figures, from summary.csv (and model_params.json where a
# report reads it). One rule per report of the registry (harness/report/registry.py) made
# from the summary: its name, outputs, whether the campaign gets it and its options all come
# from the registry's entry; each report is `make(inputs)` (harness/report/inputs.py: the
# typed summary, loaded once per report under report.statistic, the parameters, the
# directories, the store). The reports that read a stage's documents (the registry's `reads`)
# have their rule in that stage's file. `rule all` and the report page ask for the outputs of
# the reports the campaign gets (REPORT_OUTPUTS, workflow/rules/page.smk).
from pathlib import Path

from harness.report.inputs import Inputs

# what the reports' time columns hold: the mean or the median (harness/results/view.py)
STATISTIC = CAMPAIGN.cfg.report["statistic"]


def _model_params(report):
    """model_params.json as an input: always (rule fit_params makes it), when the campaign
    fits it, when it exists, or never."""
    path = RES + "/model_params.json"
    if report.params == "required" or (report.params == "if_fitted" and FACTS.pingpong):
        return [path]
    if report.params == "optional":
        return [path] if Path(path).is_file() else []
    return []


def report_inputs(report, params=(), **options):
    """The Inputs of one of the campaign's reports (its rule's run block); ``params``: the
    rule's model_params.json input (none, or one path)."""
    params = [params] if isinstance(params, str) else list(params)
    return Inputs.load(RES, RES + "/tables", FIG, params=params[0] if params else None,
                       statistic=STATISTIC, **report.options(FACTS, CAMPAIGN.cfg.report),
                       **options)


for _report in REPORTS.values():
    if _report.reads:
        continue

    rule:
        name: _report.rule_name
        localrule: True
        input:
            summary=RES + "/summary.csv",
            params=_model_params(_report),
        output:
            _report.outputs(RES + "/tables", FIG, FACTS),
        params:
            report=_report.name,
        run:
            report = REPORTS[params.report]
            report.write(report_inputs(report, input.params))
